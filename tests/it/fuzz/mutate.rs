//! Byte-level mutation of binary models and token-level mutation of `.onnxtxt` sources.

use super::rng::Rng;

/// A protobuf varint of `v` (as ten bytes at most).
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// Applies one to eight random edits to `bytes`; `other` is a second seed to splice from.
pub fn bytes(rng: &mut Rng, bytes: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..rng.range(1, 8) {
        let len = bytes.len();
        let at = rng.below(len + 1);
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                bytes[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                bytes[i] = *rng
                    .pick(&[0u8, 0xff, 0x7f, 0x80, 0x01, 0x08, 0x12, 0x1a])
                    .unwrap_or(&0);
            }
            2 => {
                let n = rng.below(16).min(len - at.min(len));
                bytes.drain(at..at + n);
            }
            3 if len > 0 => {
                let start = rng.below(len);
                let n = rng.below(64).min(len - start);
                let chunk = bytes[start..start + n].to_vec();
                let to = rng.below(bytes.len() + 1);
                bytes.splice(to..to, chunk);
            }
            4 => {
                let n = rng.below(8);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                bytes.splice(at..at, junk);
            }
            5 => {
                // A length or value field replaced by an extreme varint.
                let v = varint(rng.interesting_int() as u64);
                let end = (at + v.len().min(2)).min(bytes.len());
                bytes.splice(at..end, v);
            }
            6 => bytes.truncate(at),
            7 if !other.is_empty() => {
                let start = rng.below(other.len());
                let n = rng.below(256).min(other.len() - start);
                let end = (at + rng.below(256)).min(bytes.len());
                bytes.splice(at..end, other[start..start + n].iter().copied());
            }
            _ => {
                let i = rng.below(len.max(1));
                if let Some(b) = bytes.get_mut(i) {
                    *b = b.wrapping_add(rng.range(-3, 3) as u8);
                }
            }
        }
    }
}

const TOKENS: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "<",
    ">",
    "[",
    "]",
    ",",
    "=",
    ":",
    "\"",
    "#",
    "\n",
    "@",
    "float[",
    "int64[",
    "float16",
    "If",
    "Loop",
    "Scan",
    "then_branch",
    "else_branch",
    "body",
    "Constant",
    "ConstantOfShape",
    "Gather",
    "Concat",
    "Reshape",
    "-9223372036854775808",
    "9223372036854775807",
    "99999999999999999999",
    "1e400",
    "-1",
    "0",
    "N",
    "seq(",
    "optional(",
    "ir_version",
    "opset_import",
    "\"\" : 1000",
    "<value = int64[1] {65536}>",
    "\u{0}",
    "\u{feff}",
    "é",
    "'",
];

/// Applies one to six token-level edits to `text`.
pub fn text(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..rng.range(1, 6) {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let li = rng.below(lines.len());
        match rng.below(7) {
            0 => {
                let l = lines[li].clone();
                lines.insert(li, l);
            }
            1 => {
                lines.remove(li);
            }
            2 => {
                let lj = rng.below(lines.len());
                lines.swap(li, lj);
            }
            3 => {
                // A number replaced by an extreme one.
                let line = &lines[li];
                let digits: Vec<usize> = line
                    .char_indices()
                    .filter(|(_, c)| c.is_ascii_digit())
                    .map(|(i, _)| i)
                    .collect();
                if let Some(&start) = rng.pick(&digits) {
                    let end = line[start..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(line.len(), |e| start + e);
                    let new = rng.interesting_int().to_string();
                    lines[li].replace_range(start..end, &new);
                }
            }
            4 => {
                let line = &lines[li];
                let cuts: Vec<usize> = line.char_indices().map(|(i, _)| i).collect();
                let at = rng.pick(&cuts).copied().unwrap_or(0);
                let tok = rng.pick(TOKENS).copied().unwrap_or("(");
                lines[li].insert_str(at, tok);
            }
            5 => {
                let line = &lines[li];
                let cuts: Vec<usize> = line.char_indices().map(|(i, _)| i).collect();
                if let Some(&at) = rng.pick(&cuts) {
                    let end = line[at..]
                        .char_indices()
                        .nth(rng.range(1, 8) as usize)
                        .map_or(line.len(), |(e, _)| at + e);
                    lines[li].replace_range(at..end, "");
                }
            }
            _ => {
                let keep = rng.below(lines.len() + 1);
                lines.truncate(keep);
            }
        }
    }
    lines.join("\n")
}
