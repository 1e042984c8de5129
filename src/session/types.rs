//! Value types as ORT compares them: tensors by element type, sequences, optionals and maps
//! structurally. Parsed from, and printed as, ORT's type strings (`tensor(float)`,
//! `seq(tensor(int64))`, `map(int64,tensor(float))`, ...).

use std::fmt;

use crate::model::proto::{TypeProto, type_proto};
use crate::model::type_name;

/// A value's type. Tensors carry the ONNX element type number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    Tensor(i32),
    SparseTensor(i32),
    Seq(Box<Type>),
    Optional(Box<Type>),
    Map(i32, Box<Type>),
    Opaque,
}

impl Type {
    pub fn from_proto(t: &TypeProto) -> Option<Type> {
        Some(match t.value.as_ref()? {
            type_proto::Value::TensorType(t) => Type::Tensor(t.elem_type?),
            type_proto::Value::SparseTensorType(t) => Type::SparseTensor(t.elem_type?),
            type_proto::Value::SequenceType(s) => {
                Type::Seq(Box::new(Type::from_proto(s.elem_type.as_deref()?)?))
            }
            type_proto::Value::OptionalType(o) => {
                Type::Optional(Box::new(Type::from_proto(o.elem_type.as_deref()?)?))
            }
            type_proto::Value::MapType(m) => Type::Map(
                m.key_type?,
                Box::new(Type::from_proto(m.value_type.as_deref()?)?),
            ),
            type_proto::Value::OpaqueType(_) => Type::Opaque,
        })
    }

    /// Parses an ORT/ONNX type string. A bare element name (`float`, as schema strings write
    /// map values) is a tensor of that type.
    pub fn parse(s: &str) -> Option<Type> {
        let s = s.trim();
        let inner = |prefix: &str| s.strip_prefix(prefix).and_then(|r| r.strip_suffix(')'));
        if let Some(e) = inner("tensor(") {
            return Some(Type::Tensor(elem_from_name(e)?));
        }
        if let Some(e) = inner("sparse_tensor(") {
            return Some(Type::SparseTensor(elem_from_name(e)?));
        }
        if let Some(e) = inner("seq(") {
            return Some(Type::Seq(Box::new(Type::parse(e)?)));
        }
        if let Some(e) = inner("optional(") {
            return Some(Type::Optional(Box::new(Type::parse(e)?)));
        }
        if let Some(e) = inner("map(") {
            let (k, v) = e.split_once(',')?;
            return Some(Type::Map(
                elem_from_name(k.trim())?,
                Box::new(Type::parse(v)?),
            ));
        }
        if s == "opaque" || s.starts_with("opaque(") {
            return Some(Type::Opaque);
        }
        elem_from_name(s).map(Type::Tensor)
    }

    /// The element type of a tensor (or sparse tensor).
    pub fn elem(&self) -> Option<i32> {
        match self {
            Type::Tensor(e) | Type::SparseTensor(e) => Some(*e),
            _ => None,
        }
    }

    pub fn to_proto(&self) -> TypeProto {
        let value = match self {
            Type::Tensor(e) => type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(*e),
                shape: None,
            }),
            Type::SparseTensor(e) => {
                type_proto::Value::SparseTensorType(type_proto::SparseTensor {
                    elem_type: Some(*e),
                    shape: None,
                })
            }
            Type::Seq(t) => type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
                elem_type: Some(Box::new(t.to_proto())),
            })),
            Type::Optional(t) => type_proto::Value::OptionalType(Box::new(type_proto::Optional {
                elem_type: Some(Box::new(t.to_proto())),
            })),
            Type::Map(k, v) => type_proto::Value::MapType(Box::new(type_proto::Map {
                key_type: Some(*k),
                value_type: Some(Box::new(v.to_proto())),
            })),
            Type::Opaque => type_proto::Value::OpaqueType(Default::default()),
        };
        TypeProto {
            value: Some(value),
            denotation: None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(e) => write!(f, "tensor({})", type_name(*e)),
            Type::SparseTensor(e) => write!(f, "sparse_tensor({})", type_name(*e)),
            Type::Seq(t) => write!(f, "seq({t})"),
            Type::Optional(t) => write!(f, "optional({t})"),
            Type::Map(k, v) => write!(f, "map({},{v})", type_name(*k)),
            Type::Opaque => write!(f, "opaque"),
        }
    }
}

/// Whether `ty` is one of ORT's type strings in `allowed` (structurally, for maps).
pub fn type_allowed(ty: &Type, allowed: &[String]) -> bool {
    // Tensors (nearly every check) compare without formatting the type string.
    if let Type::Tensor(e) = ty {
        let name = type_name(*e);
        return allowed.iter().any(|a| {
            a.strip_prefix("tensor(")
                .and_then(|r| r.strip_suffix(')'))
                .is_some_and(|inner| inner == name)
        });
    }
    let s = ty.to_string();
    if allowed.contains(&s) {
        return true;
    }
    matches!(ty, Type::Map(..)) && allowed.iter().any(|a| Type::parse(a).as_ref() == Some(ty))
}

/// A list of ORT type strings (a type constraint's allowed types) read once: the tensor element
/// types it names as bits, so that [`TypeSet::allows`] answers [`type_allowed`] with a bit test
/// for a tensor (every other type, and an element number past the bits, asks the list).
#[derive(Debug, Clone)]
pub struct TypeSet<'t> {
    /// Bit `e`: the list holds `tensor(<type_name(e)>)`.
    elems: u64,
    /// Some entry starts with `tensor(`.
    any_tensor: bool,
    list: &'t [String],
}

impl<'t> TypeSet<'t> {
    pub fn new(list: &'t [String]) -> TypeSet<'t> {
        let mut elems = 0u64;
        for e in 0..64 {
            if type_allowed(&Type::Tensor(e), list) {
                elems |= 1 << e;
            }
        }
        TypeSet {
            elems,
            any_tensor: list.iter().any(|t| t.starts_with("tensor(")),
            list,
        }
    }

    /// [`type_allowed`] of the list.
    pub fn allows(&self, ty: &Type) -> bool {
        match ty {
            Type::Tensor(e) if (0..64).contains(e) => self.elems & (1 << e) != 0,
            _ => type_allowed(ty, self.list),
        }
    }

    /// Whether some entry of the list names a tensor type.
    pub fn any_tensor(&self) -> bool {
        self.any_tensor
    }

    /// The list.
    pub fn list(&self) -> &'t [String] {
        self.list
    }
}

/// Element type number from its ONNX name (`float`, `int64`, `float16`, ...).
pub fn elem_from_name(name: &str) -> Option<i32> {
    (1..=28).find(|&dt| type_name(dt) == name)
}

/// `tensor(float16)`, `tensor(bfloat16)`, float8 and float4 types: the "keep on CUDA" element
/// types of ORT's CPU-preferred pass.
pub fn is_cuda_preferred_float(t: &Type, include_fp4: bool) -> bool {
    use crate::model::DataType as D;
    let Type::Tensor(e) = t else { return false };
    let e = *e;
    e == D::Float16 as i32
        || e == D::Bfloat16 as i32
        || e == D::Float8e4m3fn as i32
        || e == D::Float8e4m3fnuz as i32
        || e == D::Float8e5m2 as i32
        || e == D::Float8e5m2fnuz as i32
        || (include_fp4 && e == D::Float4e2m1 as i32)
}

#[cfg(test)]
mod tests {
    use super::Type;

    #[test]
    fn round_trips() {
        for s in [
            "tensor(float)",
            "seq(tensor(int64))",
            "optional(seq(tensor(bool)))",
            "map(int64,tensor(float))",
        ] {
            assert_eq!(Type::parse(s).map(|t| t.to_string()).as_deref(), Some(s));
        }
        assert_eq!(
            Type::parse("map(int64, float)"),
            Type::parse("map(int64,tensor(float))")
        );
    }
}
