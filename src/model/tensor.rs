//! Element types and tensor sizes, with checked arithmetic: a model may claim any shape.

use super::proto::TensorProto;
pub use super::proto::tensor_proto::DataType;

/// ONNX's type string for an element type, as ORT writes it inside `tensor(...)`.
pub fn type_name(dt: i32) -> &'static str {
    match DataType::try_from(dt) {
        Ok(DataType::Float) => "float",
        Ok(DataType::Uint8) => "uint8",
        Ok(DataType::Int8) => "int8",
        Ok(DataType::Uint16) => "uint16",
        Ok(DataType::Int16) => "int16",
        Ok(DataType::Int32) => "int32",
        Ok(DataType::Int64) => "int64",
        Ok(DataType::String) => "string",
        Ok(DataType::Bool) => "bool",
        Ok(DataType::Float16) => "float16",
        Ok(DataType::Double) => "double",
        Ok(DataType::Uint32) => "uint32",
        Ok(DataType::Uint64) => "uint64",
        Ok(DataType::Complex64) => "complex64",
        Ok(DataType::Complex128) => "complex128",
        Ok(DataType::Bfloat16) => "bfloat16",
        Ok(DataType::Float8e4m3fn) => "float8e4m3fn",
        Ok(DataType::Float8e4m3fnuz) => "float8e4m3fnuz",
        Ok(DataType::Float8e5m2) => "float8e5m2",
        Ok(DataType::Float8e5m2fnuz) => "float8e5m2fnuz",
        Ok(DataType::Uint4) => "uint4",
        Ok(DataType::Int4) => "int4",
        Ok(DataType::Float4e2m1) => "float4e2m1",
        Ok(DataType::Float8e8m0) => "float8e8m0",
        Ok(DataType::Uint2) => "uint2",
        Ok(DataType::Int2) => "int2",
        Ok(DataType::Float6e2m3) => "float6e2m3",
        Ok(DataType::Float6e3m2) => "float6e3m2",
        Ok(DataType::Undefined) | Err(_) => "undefined",
    }
}

/// Size of one element in bits; `None` for strings and unknown types.
pub fn element_bits(dt: i32) -> Option<u64> {
    Some(match DataType::try_from(dt).ok()? {
        DataType::Bool | DataType::Uint8 | DataType::Int8 => 8,
        DataType::Float8e4m3fn
        | DataType::Float8e4m3fnuz
        | DataType::Float8e5m2
        | DataType::Float8e5m2fnuz
        | DataType::Float8e8m0 => 8,
        DataType::Uint16 | DataType::Int16 | DataType::Float16 | DataType::Bfloat16 => 16,
        DataType::Float | DataType::Int32 | DataType::Uint32 => 32,
        DataType::Double | DataType::Int64 | DataType::Uint64 | DataType::Complex64 => 64,
        DataType::Complex128 => 128,
        DataType::Uint4 | DataType::Int4 | DataType::Float4e2m1 => 4,
        DataType::Uint2 | DataType::Int2 => 2,
        DataType::Float6e2m3 | DataType::Float6e3m2 => 6,
        DataType::String | DataType::Undefined => return None,
    })
}

/// Bytes of a dense tensor of `dims` and element type `dt`, rounded up to whole bytes; `None`
/// when a dim is negative, the type has no fixed size, or the size overflows `u64`.
pub fn tensor_byte_size(dims: &[i64], dt: i32) -> Option<u64> {
    let mut elements: u64 = 1;
    for &d in dims {
        elements = elements.checked_mul(u64::try_from(d).ok()?)?;
    }
    let bits = elements.checked_mul(element_bits(dt)?)?;
    Some(bits.div_ceil(8))
}

/// Bytes of tensor data stored inside the model file for this initializer.
pub fn stored_bytes(t: &TensorProto) -> u64 {
    if let Some(raw) = &t.raw_data {
        return raw.len() as u64;
    }
    let n = |len: usize, size: u64| len as u64 * size;
    n(t.float_data.len(), 4)
        + n(t.int32_data.len(), 4)
        + n(t.int64_data.len(), 8)
        + n(t.double_data.len(), 8)
        + n(t.uint64_data.len(), 8)
        + t.string_data.iter().map(|s| s.len() as u64).sum::<u64>()
}
