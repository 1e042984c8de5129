//! Element types and tensor data as the text view sees them.
//!
//! A tensor's values are held either in `raw_data` (little-endian bytes) or in one of the typed
//! fields (`int32_data`, `float_data`, ...). The listing prints small tensors' values as ONNX's
//! parser reads them back: into the typed field that ONNX's syntax uses for the element type. The
//! two stores are made comparable by [`canonical_raw`], which turns typed values into the bytes
//! ONNX's own `raw_data` would hold for them (the inverse of [`values`] on raw data).

use bytes::Bytes;

use crate::model::proto::TensorProto;

/// ONNX's name of each `TensorProto.DataType` (the index is the enum value).
const ELEM_NAMES: [&str; 29] = [
    "undefined",
    "float",
    "uint8",
    "int8",
    "uint16",
    "int16",
    "int32",
    "int64",
    "string",
    "bool",
    "float16",
    "double",
    "uint32",
    "uint64",
    "complex64",
    "complex128",
    "bfloat16",
    "float8e4m3fn",
    "float8e4m3fnuz",
    "float8e5m2",
    "float8e5m2fnuz",
    "uint4",
    "int4",
    "float4e2m1",
    "float8e8m0",
    "uint2",
    "int2",
    "float6e2m3",
    "float6e3m2",
];

/// The syntax name of an element type; `None` for a code ONNX does not define.
pub(crate) fn elem_name(code: i32) -> Option<&'static str> {
    usize::try_from(code)
        .ok()
        .and_then(|i| ELEM_NAMES.get(i))
        .copied()
}

/// The element-type code of a syntax name (`undefined` is 0).
pub(crate) fn elem_code(name: &str) -> Option<i32> {
    ELEM_NAMES
        .iter()
        .position(|n| *n == name)
        .and_then(|i| i32::try_from(i).ok())
}

/// How the values of one element type are written and stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Store {
    /// `int32_data`; raw data holds `width` bytes per value (1, 2 or 4); `signed` says how a
    /// raw value widens. Sub-byte types keep one packed byte per value, as ONNX does.
    Int32 { width: usize, signed: bool },
    /// `int64_data`, 8 raw bytes.
    Int64,
    /// `uint64_data`; `width` 4 (uint32) or 8 (uint64) raw bytes.
    Uint64 { width: usize },
    /// `float_data`, 4 raw bytes (float, complex64).
    Float,
    /// `double_data`, 8 raw bytes (double, complex128).
    Double,
    /// `string_data`; never raw.
    String,
}

/// The store of an element type; `None` for undefined or unknown codes.
pub(crate) fn store(code: i32) -> Option<Store> {
    Some(match code {
        3 => Store::Int32 {
            width: 1,
            signed: true,
        },
        2 | 9 | 17..=28 => Store::Int32 {
            width: 1,
            signed: false,
        },
        5 => Store::Int32 {
            width: 2,
            signed: true,
        },
        4 | 10 | 16 => Store::Int32 {
            width: 2,
            signed: false,
        },
        6 => Store::Int32 {
            width: 4,
            signed: true,
        },
        7 => Store::Int64,
        12 => Store::Uint64 { width: 4 },
        13 => Store::Uint64 { width: 8 },
        1 | 14 => Store::Float,
        11 | 15 => Store::Double,
        8 => Store::String,
        _ => return None,
    })
}

/// A tensor's stored values, decoded from whichever field holds them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Values<'a> {
    Ints(Vec<i64>),
    Uints(Vec<u64>),
    Floats(Vec<f32>),
    Doubles(Vec<f64>),
    Strings(&'a [Bytes]),
}

/// How many values the tensor stores, without decoding them; `None` when they cannot be read
/// (unknown type, or raw bytes that are not a whole number of values).
pub(crate) fn value_count(t: &TensorProto) -> Option<usize> {
    let store = store(t.data_type())?;
    if let Some(raw) = &t.raw_data {
        let width = raw_width(store)?;
        return (raw.len() % width == 0).then_some(raw.len() / width);
    }
    Some(match store {
        Store::Int32 { .. } => t.int32_data.len(),
        Store::Int64 => t.int64_data.len(),
        Store::Uint64 { .. } => t.uint64_data.len(),
        Store::Float => t.float_data.len(),
        Store::Double => t.double_data.len(),
        Store::String => t.string_data.len(),
    })
}

fn raw_width(store: Store) -> Option<usize> {
    match store {
        Store::Int32 { width, .. } | Store::Uint64 { width } => Some(width),
        Store::Int64 | Store::Double => Some(8),
        Store::Float => Some(4),
        Store::String => None,
    }
}

/// Decodes the tensor's values (see [`value_count`] for when this is `None`).
pub(crate) fn values(t: &TensorProto) -> Option<Values<'_>> {
    let store = store(t.data_type())?;
    let Some(raw) = &t.raw_data else {
        return Some(match store {
            Store::Int32 { .. } => Values::Ints(t.int32_data.iter().map(|&v| v.into()).collect()),
            Store::Int64 => Values::Ints(t.int64_data.clone()),
            Store::Uint64 { .. } => Values::Uints(t.uint64_data.clone()),
            Store::Float => Values::Floats(t.float_data.clone()),
            Store::Double => Values::Doubles(t.double_data.clone()),
            Store::String => Values::Strings(&t.string_data),
        });
    };
    let width = raw_width(store)?;
    if raw.len() % width != 0 {
        return None;
    }
    let chunks = raw.chunks_exact(width);
    Some(match store {
        Store::Int32 { signed, .. } => Values::Ints(
            chunks
                .map(|c| match (c, signed) {
                    ([a], true) => i64::from(*a as i8),
                    ([a], false) => i64::from(*a),
                    ([a, b], true) => i64::from(i16::from_le_bytes([*a, *b])),
                    ([a, b], false) => i64::from(u16::from_le_bytes([*a, *b])),
                    ([a, b, c, d], _) => i64::from(i32::from_le_bytes([*a, *b, *c, *d])),
                    _ => 0,
                })
                .collect(),
        ),
        Store::Int64 => Values::Ints(chunks.map(|c| i64::from_le_bytes(arr8(c))).collect()),
        Store::Uint64 { width: 4 } => Values::Uints(
            chunks
                .map(|c| u64::from(u32::from_le_bytes(arr4(c))))
                .collect(),
        ),
        Store::Uint64 { .. } => {
            Values::Uints(chunks.map(|c| u64::from_le_bytes(arr8(c))).collect())
        }
        Store::Float => Values::Floats(chunks.map(|c| f32::from_le_bytes(arr4(c))).collect()),
        Store::Double => Values::Doubles(chunks.map(|c| f64::from_le_bytes(arr8(c))).collect()),
        Store::String => return None,
    })
}

fn arr4(c: &[u8]) -> [u8; 4] {
    let mut a = [0; 4];
    a.iter_mut().zip(c).for_each(|(d, s)| *d = *s);
    a
}

fn arr8(c: &[u8]) -> [u8; 8] {
    let mut a = [0; 8];
    a.iter_mut().zip(c).for_each(|(d, s)| *d = *s);
    a
}

/// The raw little-endian bytes of the tensor's typed values, as `raw_data` would hold them
/// (truncating each value to the element width); `None` for strings and unknown types, or when
/// the tensor already uses `raw_data`.
pub(crate) fn canonical_raw(t: &TensorProto) -> Option<Vec<u8>> {
    if t.raw_data.is_some() {
        return None;
    }
    let mut out = Vec::new();
    match store(t.data_type())? {
        Store::Int32 { width, .. } => {
            for v in &t.int32_data {
                out.extend(v.to_le_bytes().iter().take(width));
            }
        }
        Store::Int64 => t
            .int64_data
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        Store::Uint64 { width } => {
            for v in &t.uint64_data {
                out.extend(v.to_le_bytes().iter().take(width));
            }
        }
        Store::Float => t
            .float_data
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        Store::Double => t
            .double_data
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        Store::String => return None,
    }
    Some(out)
}
