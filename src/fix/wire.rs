//! Protobuf wire format, just enough to rewrite a few fields of a message and copy every other
//! byte as it was: prost drops fields it does not know, so re-encoding a decoded `ModelProto`
//! would lose what newer ONNX versions (or other tools) wrote. Editing at the wire level keeps
//! unknown fields, field order, packed or unpacked encodings and raw tensor data byte-identical.

/// One field of a message: its number, wire type and where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub number: u32,
    pub wire_type: u8,
    /// Start of the key.
    pub start: usize,
    /// Start of the payload (after the key, and after the length for length-delimited fields).
    pub body: usize,
    /// End of the field.
    pub end: usize,
}

/// The bytes are not well-formed protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub usize);

/// Reads a varint at `*pos`.
pub fn read_varint(b: &[u8], pos: &mut usize) -> Result<u64, Malformed> {
    crate::model::varint(b, pos).ok_or(Malformed(*pos))
}

/// Appends `v` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The fields of message `b`, in order (nested messages are not entered).
pub fn fields(b: &[u8]) -> Result<Vec<Field>, Malformed> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < b.len() {
        let start = pos;
        let key = read_varint(b, &mut pos)?;
        let number = u32::try_from(key >> 3).map_err(|_| Malformed(start))?;
        if number == 0 {
            return Err(Malformed(start));
        }
        let wire_type = (key & 7) as u8;
        let (body, len) = match wire_type {
            0 => {
                let body = pos;
                read_varint(b, &mut pos)?;
                (body, pos - body)
            }
            1 => (pos, 8),
            2 => {
                let n = read_varint(b, &mut pos)?;
                (pos, usize::try_from(n).map_err(|_| Malformed(start))?)
            }
            5 => (pos, 4),
            _ => return Err(Malformed(start)),
        };
        let end = body.checked_add(len).ok_or(Malformed(start))?;
        if end > b.len() {
            return Err(Malformed(start));
        }
        pos = end;
        out.push(Field {
            number,
            wire_type,
            start,
            body,
            end,
        });
    }
    Ok(out)
}

/// Appends a length-delimited field.
pub fn put_bytes(out: &mut Vec<u8>, number: u32, payload: &[u8]) {
    put_varint(out, (u64::from(number) << 3) | 2);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Appends a varint field.
pub fn put_int(out: &mut Vec<u8>, number: u32, v: i64) {
    put_varint(out, u64::from(number) << 3);
    put_varint(out, v as u64);
}

/// The payload of a length-delimited field.
pub fn payload<'a>(b: &'a [u8], f: &Field) -> &'a [u8] {
    &b[f.body..f.end]
}

/// A string field's value (lossy for invalid UTF-8, which ONNX does not allow anyway).
pub fn string(b: &[u8], f: &Field) -> String {
    String::from_utf8_lossy(payload(b, f)).into_owned()
}

/// The value of the last occurrence of string field `number` (protobuf's "last one wins").
pub fn last_string(b: &[u8], fs: &[Field], number: u32) -> Option<String> {
    fs.iter()
        .rev()
        .find(|f| f.number == number && f.wire_type == 2)
        .map(|f| string(b, f))
}

/// The value of the last occurrence of varint field `number`.
pub fn last_int(b: &[u8], fs: &[Field], number: u32) -> Option<i64> {
    let f = fs
        .iter()
        .rev()
        .find(|f| f.number == number && f.wire_type == 0)?;
    let mut pos = f.body;
    read_varint(b, &mut pos).ok().map(|v| v as i64)
}

/// Message `b` with every occurrence of varint field `number` replaced by one field holding `v`
/// (at the position of the first occurrence, or appended); every other byte is kept.
pub fn set_int(b: &[u8], number: u32, v: i64) -> Result<Vec<u8>, Malformed> {
    let fs = fields(b)?;
    let mut out = Vec::with_capacity(b.len() + 10);
    let mut done = false;
    for f in &fs {
        if f.number == number {
            if !done {
                put_int(&mut out, number, v);
                done = true;
            }
            continue;
        }
        out.extend_from_slice(&b[f.start..f.end]);
    }
    if !done {
        put_int(&mut out, number, v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn set_int_keeps_unknown_fields_and_order() {
        // domain "" (1), unknown field 99 = 7, version 24 (2).
        let mut b = Vec::new();
        put_bytes(&mut b, 1, b"");
        put_int(&mut b, 99, 7);
        put_int(&mut b, 2, 24);
        let out = set_int(&b, 2, 23).unwrap();
        let fs = fields(&out).unwrap();
        assert_eq!(
            fs.iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![1, 99, 2]
        );
        assert_eq!(last_int(&out, &fs, 2), Some(23));
        assert_eq!(last_int(&out, &fs, 99), Some(7));
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(fields(&[0x0a, 0x05, 0x01]).is_err());
        assert!(fields(&[0x00]).is_err());
        assert!(fields(&[0xff; 11]).is_err());
    }
}
