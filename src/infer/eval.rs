//! A small constant evaluator for the ops of shape computations (`Shape`, `Gather`, `Concat`,
//! `Slice`, arithmetic, `Range`, ...) on small numeric tensors, so that values folded by the
//! simulated `ConstantFolding` can feed further folding, shape inference and `If` inlining.
//!
//! **Budgets, checked before work.** ORT's `ConstantFolding` has no size limit
//! (`core/optimizer/constant_folding.cc`: it folds whatever has a CPU kernel), but it only
//! needs to know *that* a node folds; this evaluator computes values, and only small values
//! matter (shapes, axes, masks). So every step computes its output's shape and element count
//! with checked arithmetic from its inputs, before it allocates, and declines (`None`: "not
//! folded to a value"; the caller keeps the inferred type and shape) when it is over budget:
//! - a tensor may have at most [`MAX_ELEMENTS`] elements (512 KiB as 8-byte values) and
//!   [`MAX_RANK`] dims, and the product of its dims with zeros counted as ones is bounded the
//!   same way, so that every stride and partial product fits (see [`extent`]);
//! - one step reads at most [`MAX_STEP_INPUT`] input elements (variadic `Concat`/`Sum`);
//! - one session (one call of the placer, see [`reset_budget`]) produces at most
//!   [`SESSION_ELEMENTS`] elements in all (32 MiB as 8-byte values): a long chain of folded
//!   64 Ki-element tensors cannot add up to gigabytes.

use std::cell::Cell;

use crate::model::DataType as D;
use crate::model::proto::{AttributeProto, TensorProto};

/// The most elements a tensor may have to be decoded or computed.
pub const MAX_ELEMENTS: usize = 1 << 16;
/// The highest rank of a tensor the evaluator holds (real shape computations stay below 10).
pub use crate::session::MAX_RANK;
/// The most input elements one evaluation step reads.
pub const MAX_STEP_INPUT: usize = 1 << 20;
/// The most elements the evaluator produces in one session, over all steps.
pub const SESSION_ELEMENTS: usize = 1 << 22;

thread_local! {
    /// Elements produced since the last [`reset_budget`] on this thread.
    static SPENT: Cell<usize> = const { Cell::new(0) };
}

/// Starts a new session's budget (the placer calls it once per model).
pub fn reset_budget() {
    SPENT.with(|s| s.set(0));
}

/// Takes `n` elements from the session budget; `None` when that would exceed it.
fn charge(n: usize) -> Option<()> {
    SPENT.with(|s| {
        let total = s.get().checked_add(n)?;
        (total <= SESSION_ELEMENTS).then(|| s.set(total))
    })
}

/// The element count of a tensor of shape `dims` that the evaluator may hold: `None` when the
/// rank is over [`MAX_RANK`], a dim is negative, or the product of the dims with zeros counted
/// as ones (which bounds every stride and partial product) is over [`MAX_ELEMENTS`].
pub fn extent(dims: &[i64]) -> Option<usize> {
    if dims.len() > MAX_RANK {
        return None;
    }
    let (mut span, mut n) = (1usize, 1usize);
    for &d in dims {
        let d = usize::try_from(d).ok()?;
        span = span.checked_mul(d.max(1))?;
        if span > MAX_ELEMENTS {
            return None;
        }
        // `n <= span`: cannot overflow.
        n *= d;
    }
    Some(n)
}

/// A small dense tensor. Integers and booleans are held as `i64`, floats as `f64`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub elem: i32,
    pub dims: Vec<i64>,
    pub data: Data,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl Data {
    fn len(&self) -> usize {
        match self {
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
        }
    }
    fn get_f(&self, i: usize) -> f64 {
        match self {
            Data::Int(v) => v[i] as f64,
            Data::Float(v) => v[i],
        }
    }
    fn get_i(&self, i: usize) -> i64 {
        match self {
            Data::Int(v) => v[i],
            Data::Float(v) => v[i] as i64,
        }
    }
    /// Elements at `idx`, in order; `None` if an index is out of range.
    fn pick(&self, idx: &[usize]) -> Option<Data> {
        Some(match self {
            Data::Int(v) => Data::Int(
                idx.iter()
                    .map(|&i| v.get(i).copied())
                    .collect::<Option<_>>()?,
            ),
            Data::Float(v) => Data::Float(
                idx.iter()
                    .map(|&i| v.get(i).copied())
                    .collect::<Option<_>>()?,
            ),
        })
    }
}

fn is_float(elem: i32) -> bool {
    matches!(
        D::try_from(elem),
        Ok(D::Float | D::Double | D::Float16 | D::Bfloat16)
    )
}

fn is_int(elem: i32) -> bool {
    matches!(
        D::try_from(elem),
        Ok(D::Int8
            | D::Int16
            | D::Int32
            | D::Int64
            | D::Uint8
            | D::Uint16
            | D::Uint32
            | D::Uint64
            | D::Bool)
    )
}

fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    // 2^k for k in -24..=15, built from its bits (exactly what `2f64.powi(k)` gives, without
    // the call: this runs once per element of every float16 constant).
    let pow2 = |k: i32| f64::from_bits(((1023 + k) as u64) << 52);
    match exp {
        0 => sign * frac * pow2(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * pow2(e - 15),
    }
}

fn f64_to_f16(v: f64) -> u16 {
    let x = (v as f32).to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let frac = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if frac != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        sign | 0x7c00
    } else if e <= 0 {
        if e < -10 {
            sign
        } else {
            let m = (frac | 0x80_0000) >> (1 - e + 13);
            sign | m as u16
        }
    } else {
        sign | ((e as u16) << 10) | (frac >> 13) as u16
    }
}

impl Tensor {
    pub fn ints(elem: i32, dims: Vec<i64>, v: Vec<i64>) -> Tensor {
        Tensor {
            elem,
            dims,
            data: Data::Int(v),
        }
    }
    pub fn i64_1d(v: Vec<i64>) -> Tensor {
        Tensor::ints(D::Int64 as i32, vec![v.len() as i64], v)
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.len() == 0
    }
    /// The values as integers (floats truncated).
    pub fn as_i64(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.data.get_i(i)).collect()
    }
    pub fn as_f64(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.data.get_f(i)).collect()
    }

    /// Decodes an initializer; `None` for external data, strings, unsupported types, or more
    /// than [`MAX_ELEMENTS`] elements.
    pub fn from_proto(t: &TensorProto) -> Option<Tensor> {
        let elem = t.data_type();
        let n = extent(&t.dims)?;
        if t.data_location == Some(1) {
            return None;
        }
        let data = if let Some(raw) = &t.raw_data {
            let b: &[u8] = raw;
            macro_rules! le {
                ($ty:ty, $sz:expr, $conv:expr, $variant:ident) => {{
                    if b.len() != n * $sz {
                        return None;
                    }
                    Data::$variant(
                        b.chunks_exact($sz)
                            .map(|c| {
                                let mut a = [0u8; $sz];
                                a.copy_from_slice(c);
                                $conv(<$ty>::from_le_bytes(a))
                            })
                            .collect(),
                    )
                }};
            }
            match D::try_from(elem).ok()? {
                D::Float => le!(f32, 4, f64::from, Float),
                D::Double => le!(f64, 8, |x| x, Float),
                D::Float16 => le!(u16, 2, f16_to_f64, Float),
                D::Bfloat16 => le!(
                    u16,
                    2,
                    |x: u16| f64::from(f32::from_bits(u32::from(x) << 16)),
                    Float
                ),
                D::Int8 => le!(i8, 1, i64::from, Int),
                D::Uint8 | D::Bool => le!(u8, 1, i64::from, Int),
                D::Int16 => le!(i16, 2, i64::from, Int),
                D::Uint16 => le!(u16, 2, i64::from, Int),
                D::Int32 => le!(i32, 4, i64::from, Int),
                D::Uint32 => le!(u32, 4, i64::from, Int),
                D::Int64 => le!(i64, 8, |x| x, Int),
                D::Uint64 => le!(u64, 8, |x| x as i64, Int),
                _ => return None,
            }
        } else {
            match D::try_from(elem).ok()? {
                D::Float => Data::Float(t.float_data.iter().map(|&x| f64::from(x)).collect()),
                D::Double => Data::Float(t.double_data.clone()),
                D::Float16 => {
                    Data::Float(t.int32_data.iter().map(|&x| f16_to_f64(x as u16)).collect())
                }
                D::Bfloat16 => Data::Float(
                    t.int32_data
                        .iter()
                        .map(|&x| f64::from(f32::from_bits((x as u32) << 16)))
                        .collect(),
                ),
                D::Int8 | D::Uint8 | D::Bool | D::Int16 | D::Uint16 | D::Int32 => {
                    Data::Int(t.int32_data.iter().map(|&x| i64::from(x)).collect())
                }
                D::Int64 => Data::Int(t.int64_data.clone()),
                D::Uint32 | D::Uint64 => {
                    Data::Int(t.uint64_data.iter().map(|&x| x as i64).collect())
                }
                _ => return None,
            }
        };
        if data.len() != n {
            return None;
        }
        Some(Tensor {
            elem,
            dims: t.dims.clone(),
            data,
        })
    }

    /// The initializer holding this tensor.
    pub fn to_proto(&self, name: &str) -> TensorProto {
        let mut t = TensorProto {
            name: Some(name.to_string()),
            dims: self.dims.clone(),
            data_type: Some(self.elem),
            ..Default::default()
        };
        let n = self.len();
        match D::try_from(self.elem) {
            Ok(D::Float) => t.float_data = (0..n).map(|i| self.data.get_f(i) as f32).collect(),
            Ok(D::Double) => t.double_data = (0..n).map(|i| self.data.get_f(i)).collect(),
            Ok(D::Float16) => {
                t.int32_data = (0..n)
                    .map(|i| i32::from(f64_to_f16(self.data.get_f(i))))
                    .collect()
            }
            Ok(D::Bfloat16) => {
                t.int32_data = (0..n)
                    .map(|i| ((self.data.get_f(i) as f32).to_bits() >> 16) as i32)
                    .collect()
            }
            Ok(D::Int64) => t.int64_data = self.as_i64(),
            Ok(D::Uint32 | D::Uint64) => {
                t.uint64_data = (0..n).map(|i| self.data.get_i(i) as u64).collect()
            }
            _ => t.int32_data = (0..n).map(|i| self.data.get_i(i) as i32).collect(),
        }
        t
    }

    /// Converts to element type `to`, with C-like wrapping for integers.
    pub fn cast(&self, to: i32) -> Option<Tensor> {
        let n = self.len();
        let data = if is_float(to) {
            Data::Float((0..n).map(|i| self.data.get_f(i)).collect())
        } else if is_int(to) {
            let wrap = |x: i64| -> i64 {
                match D::try_from(to) {
                    Ok(D::Bool) => i64::from(x != 0),
                    Ok(D::Int8) => i64::from(x as i8),
                    Ok(D::Uint8) => i64::from(x as u8),
                    Ok(D::Int16) => i64::from(x as i16),
                    Ok(D::Uint16) => i64::from(x as u16),
                    Ok(D::Int32) => i64::from(x as i32),
                    Ok(D::Uint32) => i64::from(x as u32),
                    _ => x,
                }
            };
            match (&self.data, D::try_from(to)) {
                (Data::Float(v), Ok(D::Bool)) => {
                    Data::Int(v.iter().map(|&x| i64::from(x != 0.0)).collect())
                }
                (Data::Float(v), _) => Data::Int(v.iter().map(|&x| wrap(x as i64)).collect()),
                (Data::Int(v), _) => Data::Int(v.iter().map(|&x| wrap(x)).collect()),
            }
        } else {
            return None;
        };
        Some(Tensor {
            elem: to,
            dims: self.dims.clone(),
            data,
        })
    }
}

/// The attributes and version an evaluation needs.
pub struct NodeView<'a> {
    pub op: &'a str,
    pub domain: &'a str,
    pub since: i64,
    pub attrs: &'a [AttributeProto],
}

impl NodeView<'_> {
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attrs.iter().find(|a| a.name() == name)
    }
    fn attr_i(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(|a| a.i)
    }
    fn attr_f(&self, name: &str) -> Option<f32> {
        self.attr(name).and_then(|a| a.f)
    }
    fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }
}

fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r.max(1)).contains(&a).then_some(a as usize)
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

fn udims(dims: &[i64]) -> Option<Vec<usize>> {
    dims.iter().map(|&d| usize::try_from(d).ok()).collect()
}

/// Numpy broadcast of two shapes.
pub fn broadcast_dims(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let y = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        out[i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        };
    }
    Some(out)
}

/// For each element of `out` (broadcast shape), the source index into a tensor of `dims`.
fn broadcast_index(dims: &[i64], out: &[i64]) -> Option<Vec<usize>> {
    let n = extent(out)?;
    let od = udims(out)?;
    let r = od.len();
    let lead = r.checked_sub(dims.len())?;
    let mut src: Vec<usize> = vec![1; r];
    for (i, &d) in dims.iter().enumerate() {
        *src.get_mut(lead + i)? = usize::try_from(d).ok()?;
    }
    let ss = strides(&src);
    let os = strides(&od);
    Some(
        (0..n)
            .map(|flat| {
                let mut idx = 0;
                for k in 0..r {
                    let c = (flat / os[k]) % od[k].max(1);
                    if src[k] != 1 {
                        idx += c * ss[k];
                    }
                }
                idx
            })
            .collect(),
    )
}

fn binary(op: &str, a: &Tensor, b: &Tensor) -> Option<Tensor> {
    let dims = broadcast_dims(&a.dims, &b.dims)?;
    let ia = broadcast_index(&a.dims, &dims)?;
    let ib = broadcast_index(&b.dims, &dims)?;
    let cmp = matches!(
        op,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual"
    );
    let logic = matches!(op, "And" | "Or" | "Xor");
    let float = is_float(a.elem);
    let data = if cmp {
        let f = |x: f64, y: f64| -> bool {
            match op {
                "Equal" => x == y,
                "Less" => x < y,
                "Greater" => x > y,
                "LessOrEqual" => x <= y,
                _ => x >= y,
            }
        };
        Data::Int(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| {
                    if float {
                        i64::from(f(a.data.get_f(i), b.data.get_f(j)))
                    } else {
                        let (x, y) = (a.data.get_i(i), b.data.get_i(j));
                        i64::from(f(x as f64, y as f64) || (op.contains("Equal") && x == y))
                    }
                })
                .collect(),
        )
    } else if logic {
        Data::Int(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| {
                    let (x, y) = (a.data.get_i(i) != 0, b.data.get_i(j) != 0);
                    i64::from(match op {
                        "And" => x && y,
                        "Or" => x || y,
                        _ => x ^ y,
                    })
                })
                .collect(),
        )
    } else if float {
        let f = |x: f64, y: f64| -> Option<f64> {
            Some(match op {
                "Add" | "Sum" => x + y,
                "Sub" => x - y,
                "Mul" => x * y,
                "Div" => x / y,
                "Pow" => x.powf(y),
                "Max" => x.max(y),
                "Min" => x.min(y),
                "Mod" => x % y,
                _ => return None,
            })
        };
        Data::Float(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| f(a.data.get_f(i), b.data.get_f(j)))
                .collect::<Option<_>>()?,
        )
    } else {
        let f = |x: i64, y: i64| -> Option<i64> {
            Some(match op {
                "Add" | "Sum" => x.wrapping_add(y),
                "Sub" => x.wrapping_sub(y),
                "Mul" => x.wrapping_mul(y),
                "Div" => x.checked_div(y)?,
                "Mod" => x.checked_rem(y)?,
                "Pow" => x.checked_pow(u32::try_from(y).ok()?)?,
                "Max" => x.max(y),
                "Min" => x.min(y),
                _ => return None,
            })
        };
        Data::Int(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| f(a.data.get_i(i), b.data.get_i(j)))
                .collect::<Option<_>>()?,
        )
    };
    let elem = if cmp || logic { D::Bool as i32 } else { a.elem };
    Some(Tensor { elem, dims, data })
}

fn unary(op: &str, a: &Tensor) -> Option<Tensor> {
    let data = match &a.data {
        Data::Int(v) => Data::Int(
            v.iter()
                .map(|&x| {
                    Some(match op {
                        "Neg" => x.wrapping_neg(),
                        "Abs" => x.wrapping_abs(),
                        "Not" => i64::from(x == 0),
                        "Identity" | "Floor" | "Ceil" | "Round" => x,
                        "Relu" => x.max(0),
                        "Sign" => x.signum(),
                        _ => return None,
                    })
                })
                .collect::<Option<_>>()?,
        ),
        Data::Float(v) => Data::Float(
            v.iter()
                .map(|&x| {
                    Some(match op {
                        "Neg" => -x,
                        "Abs" => x.abs(),
                        "Identity" => x,
                        "Floor" => x.floor(),
                        "Ceil" => x.ceil(),
                        "Round" => x.round_ties_even(),
                        "Sqrt" => x.sqrt(),
                        "Reciprocal" => 1.0 / x,
                        "Relu" => x.max(0.0),
                        "Exp" => x.exp(),
                        "Log" => x.ln(),
                        "Sin" => x.sin(),
                        "Cos" => x.cos(),
                        "Tanh" => x.tanh(),
                        "Sigmoid" => 1.0 / (1.0 + (-x).exp()),
                        "Sign" => {
                            if x == 0.0 {
                                0.0
                            } else {
                                x.signum()
                            }
                        }
                        _ => return None,
                    })
                })
                .collect::<Option<_>>()?,
        ),
    };
    Some(Tensor {
        elem: a.elem,
        dims: a.dims.clone(),
        data,
    })
}

/// Gather along `axis` with (already validated) indices.
fn gather(data: &Tensor, indices: &Tensor, axis: i64) -> Option<Tensor> {
    let rank = data.dims.len();
    if rank == 0 {
        return None;
    }
    let axis = norm_axis(axis, rank)?;
    let d = udims(&data.dims)?;
    let mut dims = data.dims[..axis].to_vec();
    dims.extend_from_slice(&indices.dims);
    dims.extend_from_slice(&data.dims[axis + 1..]);
    // The output's size, from the shapes alone, before anything is allocated.
    let total = extent(&dims)?;
    let outer: usize = d[..axis].iter().product();
    let inner: usize = d[axis + 1..].iter().product();
    let len = d[axis];
    if total == 0 {
        return Some(Tensor {
            elem: data.elem,
            dims,
            data: data.data.pick(&[])?,
        });
    }
    let idx: Vec<usize> = indices
        .as_i64()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + len as i64 } else { i };
            usize::try_from(j).ok().filter(|&j| j < len)
        })
        .collect::<Option<_>>()?;
    let mut pick = Vec::with_capacity(total);
    for o in 0..outer {
        for &i in &idx {
            for k in 0..inner {
                pick.push((o * len + i) * inner + k);
            }
        }
    }
    Some(Tensor {
        elem: data.elem,
        dims,
        data: data.data.pick(&pick)?,
    })
}

/// Slice parameters resolved against a shape: per axis (start, step, count).
pub fn slice_plan(
    dims: &[i64],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Option<Vec<(i64, i64, i64)>> {
    let rank = dims.len();
    let mut plan: Vec<(i64, i64, i64)> = dims.iter().map(|&d| (0, 1, d)).collect();
    if starts.len() != ends.len() {
        return None;
    }
    for k in 0..starts.len() {
        let axis = match axes {
            Some(a) => norm_axis(*a.get(k)?, rank)?,
            None => k,
        };
        let dim = *dims.get(axis)?;
        let step = steps.and_then(|s| s.get(k).copied()).unwrap_or(1);
        if step == 0 {
            return None;
        }
        if dim < 0 {
            return None;
        }
        let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
        let mut s = starts[k];
        let mut e = ends[k];
        if s < 0 {
            s = s.saturating_add(dim);
        }
        if e < 0 {
            e = e.saturating_add(dim);
        }
        // In i128: `step` may be anything in i64, and `-i64::MIN` does not fit.
        let (st, wide) = (i128::from(step), |v: i64| i128::from(v));
        let count = if step > 0 {
            s = clamp(s, 0, dim);
            e = clamp(e, 0, dim);
            if e > s {
                (wide(e) - wide(s) + st - 1) / st
            } else {
                0
            }
        } else {
            s = clamp(s, -1, dim - 1);
            e = clamp(e, -1, dim - 1);
            if s > e {
                (wide(s) - wide(e) - st - 1) / -st
            } else {
                0
            }
        };
        // At most `dim` elements are taken.
        *plan.get_mut(axis)? = (s, step, i64::try_from(count).ok()?);
    }
    Some(plan)
}

fn slice(data: &Tensor, plan: &[(i64, i64, i64)]) -> Option<Tensor> {
    let d = udims(&data.dims)?;
    let st = strides(&d);
    let out: Vec<i64> = plan.iter().map(|p| p.2).collect();
    let n = extent(&out)?;
    if plan.len() != d.len() {
        return None;
    }
    let od = udims(&out)?;
    let os = strides(&od);
    let mut pick = Vec::with_capacity(n);
    for flat in 0..n {
        let mut idx = 0usize;
        for k in 0..od.len() {
            let c = (flat / os[k]) % od[k].max(1);
            let src = plan[k].0.checked_add(plan[k].1.checked_mul(c as i64)?)?;
            idx += usize::try_from(src).ok()? * st[k];
        }
        pick.push(idx);
    }
    Some(Tensor {
        elem: data.elem,
        dims: out,
        data: data.data.pick(&pick)?,
    })
}

fn transpose(data: &Tensor, perm: &[usize]) -> Option<Tensor> {
    let data_elem = data.elem;
    let d = udims(&data.dims)?;
    if perm.len() != d.len() {
        return None;
    }
    // A permutation of the axes: each once (a repeated axis could multiply the size).
    let mut seen = vec![false; d.len()];
    for &p in perm {
        if std::mem::replace(seen.get_mut(p)?, true) {
            return None;
        }
    }
    let st = strides(&d);
    let od: Vec<usize> = perm
        .iter()
        .map(|&p| d.get(p).copied())
        .collect::<Option<_>>()?;
    let n: usize = od.iter().product();
    // Source offset of every output element, in output order: an odometer over the output
    // index (no division per element and dimension), gathering as it goes.
    let step: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
    fn gather<T: Copy>(v: &[T], n: usize, od: &[usize], step: &[usize]) -> Option<Vec<T>> {
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; od.len()];
        let mut off = 0usize;
        for _ in 0..n {
            out.push(*v.get(off)?);
            for k in (0..od.len()).rev() {
                idx[k] += 1;
                off += step[k];
                if idx[k] < od[k] {
                    break;
                }
                off -= step[k] * idx[k];
                idx[k] = 0;
            }
        }
        Some(out)
    }
    let data = match &data.data {
        Data::Int(v) => Data::Int(gather(v, n, &od, &step)?),
        Data::Float(v) => Data::Float(gather(v, n, &od, &step)?),
    };
    Some(Tensor {
        elem: data_elem,
        dims: od.iter().map(|&x| x as i64).collect(),
        data,
    })
}

/// The target shape of `Reshape` (0 copies a dim unless `allowzero`, one -1 is inferred).
pub fn reshape_dims(input: &[Option<i64>], target: &[i64], allowzero: bool) -> Vec<Option<i64>> {
    let mut out: Vec<Option<i64>> = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        if t == 0 && !allowzero {
            out.push(input.get(i).copied().flatten());
        } else if t == -1 {
            infer_at = Some(i);
            out.push(None);
        } else {
            out.push(Some(t));
        }
    }
    if let Some(k) = infer_at {
        let total: Option<i64> = input.iter().try_fold(1i64, |a, d| a.checked_mul((*d)?));
        let known: Option<i64> = out
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .try_fold(1i64, |a, (_, d)| a.checked_mul((*d)?));
        if let (Some(t), Some(kn)) = (total, known)
            && kn > 0
            && t % kn == 0
        {
            out[k] = Some(t / kn);
        }
    }
    out
}

fn reduce(op: &str, data: &Tensor, axes: &[usize], keepdims: bool) -> Option<Tensor> {
    let d = udims(&data.dims)?;
    // A mask over the axes: `axes` may be long (it came from a tensor), the rank is not.
    let mut mask = vec![false; d.len()];
    for &a in axes {
        *mask.get_mut(a)? = true;
    }
    let axes: Vec<usize> = (0..d.len()).filter(|&a| mask[a]).collect();
    let axes = axes.as_slice();
    let st = strides(&d);
    let out_full: Vec<usize> = d
        .iter()
        .enumerate()
        .map(|(i, &x)| if axes.contains(&i) { 1 } else { x })
        .collect();
    let os = strides(&out_full);
    let n: usize = out_full.iter().product();
    let float = matches!(data.data, Data::Float(_));
    let init = match op {
        "ReduceProd" => 1.0,
        "ReduceMax" => f64::NEG_INFINITY,
        "ReduceMin" => f64::INFINITY,
        _ => 0.0,
    };
    let mut acc = vec![init; n];
    let mut iacc: Vec<i64> = vec![
        match op {
            "ReduceProd" => 1,
            "ReduceMax" => i64::MIN,
            "ReduceMin" => i64::MAX,
            _ => 0,
        };
        n
    ];
    let total: usize = d.iter().product();
    for flat in 0..total {
        let mut o = 0;
        for k in 0..d.len() {
            let c = (flat / st[k]) % d[k].max(1);
            if !axes.contains(&k) {
                o += c * os[k];
            }
        }
        let (x, xi) = (data.data.get_f(flat), data.data.get_i(flat));
        match op {
            "ReduceSum" | "ReduceMean" => {
                acc[o] += x;
                iacc[o] = iacc[o].wrapping_add(xi);
            }
            "ReduceProd" => {
                acc[o] *= x;
                iacc[o] = iacc[o].wrapping_mul(xi);
            }
            "ReduceMax" => {
                acc[o] = acc[o].max(x);
                iacc[o] = iacc[o].max(xi);
            }
            "ReduceMin" => {
                acc[o] = acc[o].min(x);
                iacc[o] = iacc[o].min(xi);
            }
            _ => return None,
        }
    }
    if op == "ReduceMean" {
        let cnt: usize = axes.iter().map(|&a| d[a]).product();
        if cnt == 0 {
            return None;
        }
        for (a, i) in acc.iter_mut().zip(iacc.iter_mut()) {
            *a /= cnt as f64;
            *i /= cnt as i64;
        }
    }
    let dims: Vec<i64> = if keepdims {
        out_full.iter().map(|&x| x as i64).collect()
    } else {
        d.iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &x)| x as i64)
            .collect()
    };
    Some(Tensor {
        elem: data.elem,
        dims,
        data: if float {
            Data::Float(acc)
        } else {
            Data::Int(iacc)
        },
    })
}

/// Evaluates one node on constant inputs (`None` for an omitted optional input). Returns the
/// outputs, or `None` when the op is not supported, a size bound is hit, or the inputs are
/// invalid.
pub fn eval(node: &NodeView, inputs: &[Option<&Tensor>]) -> Option<Vec<Tensor>> {
    if node.domain != "ai.onnx" {
        return None;
    }
    // Every input within the per-tensor budget and consistent (its data fills its shape), and
    // the step's inputs within the per-step budget: checked before any work.
    let mut read = 0usize;
    for t in inputs.iter().flatten() {
        if extent(&t.dims) != Some(t.len()) {
            return None;
        }
        read = read.checked_add(t.len())?;
    }
    if read > MAX_STEP_INPUT {
        return None;
    }
    let inp = |i: usize| inputs.get(i).copied().flatten();
    let x = inp(0);
    let out = |t: Tensor| -> Option<Vec<Tensor>> {
        (Some(t.len()) == extent(&t.dims)).then_some(())?;
        charge(t.len())?;
        Some(vec![t])
    };
    match node.op {
        "Identity" | "Neg" | "Abs" | "Not" | "Floor" | "Ceil" | "Round" | "Sqrt" | "Reciprocal"
        | "Relu" | "Exp" | "Log" | "Sin" | "Cos" | "Tanh" | "Sigmoid" | "Sign" => {
            out(unary(node.op, x?)?)
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Equal" | "Less" | "Greater"
        | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor" => {
            out(binary(node.op, x?, inp(1)?)?)
        }
        "Max" | "Min" | "Sum" => {
            let mut acc = x?.clone();
            for i in 1..inputs.len() {
                acc = binary(node.op, &acc, inp(i)?)?;
            }
            out(acc)
        }
        "Cast" => out(x?.cast(i32::try_from(node.attr_i("to")?).ok()?)?),
        "CastLike" => out(x?.cast(inp(1)?.elem)?),
        "Shape" => {
            let r = x?.dims.len() as i64;
            let clamp = |v: i64| {
                let v = if v < 0 { v + r } else { v };
                v.clamp(0, r)
            };
            let s = clamp(node.attr_i("start").unwrap_or(0));
            let e = clamp(node.attr_i("end").unwrap_or(r));
            let v: Vec<i64> = x?.dims[s as usize..(e.max(s)) as usize].to_vec();
            out(Tensor::i64_1d(v))
        }
        "Size" => out(Tensor::ints(D::Int64 as i32, vec![], vec![x?.len() as i64])),
        "Gather" => out(gather(x?, inp(1)?, node.attr_i("axis").unwrap_or(0))?),
        "Unsqueeze" | "Squeeze" => {
            let x = x?;
            let axes: Vec<i64> = if node.since >= 13 {
                inp(1).map(Tensor::as_i64).unwrap_or_default()
            } else {
                node.attr_ints("axes")
                    .map(<[i64]>::to_vec)
                    .unwrap_or_default()
            };
            let dims = if node.op == "Unsqueeze" {
                unsqueeze_dims(&x.dims.iter().map(|&d| Some(d)).collect::<Vec<_>>(), &axes)?
            } else {
                squeeze_dims(&x.dims.iter().map(|&d| Some(d)).collect::<Vec<_>>(), &axes)?
            };
            let dims: Vec<i64> = dims.into_iter().collect::<Option<_>>()?;
            out(Tensor {
                elem: x.elem,
                dims,
                data: x.data.clone(),
            })
        }
        "Reshape" | "Flatten" => {
            let x = x?;
            let din: Vec<Option<i64>> = x.dims.iter().map(|&d| Some(d)).collect();
            let dims = if node.op == "Flatten" {
                let axis = norm_axis(node.attr_i("axis").unwrap_or(1), x.dims.len() + 1)?;
                // Bounded by the input's extent: no overflow.
                let a: i64 = x.dims.get(..axis)?.iter().product();
                let b: i64 = x.dims.get(axis..)?.iter().product();
                vec![Some(a), Some(b)]
            } else if node.since >= 5 {
                reshape_dims(
                    &din,
                    &inp(1)?.as_i64(),
                    node.attr_i("allowzero").unwrap_or(0) != 0,
                )
            } else {
                reshape_dims(&din, node.attr_ints("shape")?, false)
            };
            let dims: Vec<i64> = dims.into_iter().collect::<Option<_>>()?;
            if extent(&dims)? != x.len() {
                return None;
            }
            out(Tensor {
                elem: x.elem,
                dims,
                data: x.data.clone(),
            })
        }
        "Concat" => {
            let axis = node.attr_i("axis")?;
            let parts: Vec<&Tensor> = (0..inputs.len()).filter_map(inp).collect::<Vec<_>>();
            if parts.len() != inputs.iter().filter(|i| i.is_some()).count() || parts.is_empty() {
                return None;
            }
            let first = parts.first()?;
            let rank = first.dims.len();
            // Scalars cannot be concatenated (ONNX requires rank >= 1).
            if rank == 0 {
                return None;
            }
            let axis = norm_axis(axis, rank)?;
            let outer: usize = udims(&first.dims[..axis])?.iter().product();
            let mut dims = first.dims.clone();
            dims[axis] = 0;
            for p in &parts {
                if p.dims.len() != rank
                    || (0..rank).any(|k| k != axis && p.dims[k] != first.dims[k])
                {
                    return None;
                }
                dims[axis] = dims[axis].checked_add(p.dims[axis])?;
            }
            // The output's size before anything is copied.
            extent(&dims)?;
            let float = parts.iter().any(|p| matches!(p.data, Data::Float(_)));
            let mut fi = Vec::new();
            let mut ii = Vec::new();
            for o in 0..outer {
                for p in &parts {
                    let chunk = p.len() / outer.max(1);
                    for k in o * chunk..(o + 1) * chunk {
                        if float {
                            fi.push(p.data.get_f(k));
                        } else {
                            ii.push(p.data.get_i(k));
                        }
                    }
                }
            }
            out(Tensor {
                elem: parts[0].elem,
                dims,
                data: if float {
                    Data::Float(fi)
                } else {
                    Data::Int(ii)
                },
            })
        }
        "Slice" => {
            let x = x?;
            let (starts, ends, axes, steps) = if node.since >= 10 {
                (
                    inp(1)?.as_i64(),
                    inp(2)?.as_i64(),
                    inp(3).map(Tensor::as_i64),
                    inp(4).map(Tensor::as_i64),
                )
            } else {
                (
                    node.attr_ints("starts")?.to_vec(),
                    node.attr_ints("ends")?.to_vec(),
                    node.attr_ints("axes").map(<[i64]>::to_vec),
                    None,
                )
            };
            let plan = slice_plan(&x.dims, &starts, &ends, axes.as_deref(), steps.as_deref())?;
            out(slice(x, &plan)?)
        }
        "Transpose" => {
            let x = x?;
            let perm: Vec<usize> = match node.attr_ints("perm") {
                Some(p) => p
                    .iter()
                    .map(|&v| usize::try_from(v).ok())
                    .collect::<Option<_>>()?,
                None => (0..x.dims.len()).rev().collect(),
            };
            out(transpose(x, &perm)?)
        }
        "ConstantOfShape" => {
            let shape = x?.as_i64();
            let n = extent(&shape)?;
            let (elem, data) = match node.attr("value").and_then(|a| a.t.as_ref()) {
                Some(t) => {
                    let v = Tensor::from_proto(t)?;
                    let data = match v.data {
                        Data::Int(ref d) if d.len() == 1 => Data::Int(vec![d[0]; n]),
                        Data::Float(ref d) if d.len() == 1 => Data::Float(vec![d[0]; n]),
                        _ => return None,
                    };
                    (v.elem, data)
                }
                None => (D::Float as i32, Data::Float(vec![0.0; n])),
            };
            out(Tensor {
                elem,
                dims: shape,
                data,
            })
        }
        "Range" => {
            let (s, l, d) = (x?, inp(1)?, inp(2)?);
            if s.len() != 1 || l.len() != 1 || d.len() != 1 {
                return None;
            }
            let data = if is_float(s.elem) {
                let (a, b, c) = (s.data.get_f(0), l.data.get_f(0), d.data.get_f(0));
                if c == 0.0 {
                    return None;
                }
                let n = ((b - a) / c).ceil().max(0.0);
                // Also refuses NaN (an infinite or NaN bound).
                if n.is_nan() || n > MAX_ELEMENTS as f64 {
                    return None;
                }
                Data::Float((0..n as usize).map(|i| a + c * i as f64).collect())
            } else {
                let (a, b, c) = (s.data.get_i(0), l.data.get_i(0), d.data.get_i(0));
                if c == 0 {
                    return None;
                }
                // In i128: no difference or step of i64 overflows there.
                let (diff, c) = (i128::from(b) - i128::from(a), i128::from(c));
                let n = if (diff > 0) == (c > 0) && diff != 0 {
                    (diff + c - c.signum()) / c
                } else {
                    0
                };
                if n > MAX_ELEMENTS as i128 {
                    return None;
                }
                let n = i64::try_from(n).ok()?;
                let c = i64::try_from(c).ok()?;
                Data::Int((0..n).map(|i| a.wrapping_add(c.wrapping_mul(i))).collect())
            };
            let n = data.len() as i64;
            out(Tensor {
                elem: s.elem,
                dims: vec![n],
                data,
            })
        }
        "Where" => {
            let (c, a, b) = (x?, inp(1)?, inp(2)?);
            let dims = broadcast_dims(&broadcast_dims(&c.dims, &a.dims)?, &b.dims)?;
            let ic = broadcast_index(&c.dims, &dims)?;
            let ia = broadcast_index(&a.dims, &dims)?;
            let ib = broadcast_index(&b.dims, &dims)?;
            let sel: Vec<(bool, usize, usize)> = (0..ic.len())
                .map(|k| (c.data.get_i(ic[k]) != 0, ia[k], ib[k]))
                .collect();
            let data = match (&a.data, &b.data) {
                (Data::Int(va), Data::Int(vb)) => Data::Int(
                    sel.iter()
                        .map(|&(t, i, j)| if t { va[i] } else { vb[j] })
                        .collect(),
                ),
                _ => Data::Float(
                    sel.iter()
                        .map(
                            |&(t, i, j)| {
                                if t { a.data.get_f(i) } else { b.data.get_f(j) }
                            },
                        )
                        .collect(),
                ),
            };
            out(Tensor {
                elem: a.elem,
                dims,
                data,
            })
        }
        "Expand" => {
            let x = x?;
            let shape = inp(1)?.as_i64();
            let dims = broadcast_dims(&x.dims, &shape)?;
            let idx = broadcast_index(&x.dims, &dims)?;
            out(Tensor {
                elem: x.elem,
                dims,
                data: x.data.pick(&idx)?,
            })
        }
        "Tile" => {
            let x = x?;
            let reps = inp(1)?.as_i64();
            if reps.len() != x.dims.len() {
                return None;
            }
            let dims: Vec<i64> = x
                .dims
                .iter()
                .zip(&reps)
                .map(|(&d, &r)| d.checked_mul(r))
                .collect::<Option<_>>()?;
            let n = extent(&dims)?;
            let od = udims(&dims)?;
            let id = udims(&x.dims)?;
            let (os, is) = (strides(&od), strides(&id));
            let pick: Vec<usize> = (0..n)
                .map(|flat| {
                    (0..od.len())
                        .map(|k| ((flat / os[k]) % od[k].max(1)) % id[k].max(1) * is[k])
                        .sum()
                })
                .collect();
            out(Tensor {
                elem: x.elem,
                dims,
                data: x.data.pick(&pick)?,
            })
        }
        "ReduceProd" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceMean" => {
            let x = x?;
            let axes_in: Option<Vec<i64>> =
                if (node.op == "ReduceSum" && node.since >= 13) || node.since >= 18 {
                    inp(1).map(Tensor::as_i64)
                } else {
                    node.attr_ints("axes").map(<[i64]>::to_vec)
                };
            let rank = x.dims.len();
            let axes: Vec<usize> = match axes_in {
                Some(a) if !a.is_empty() => a
                    .iter()
                    .map(|&v| norm_axis(v, rank))
                    .collect::<Option<_>>()?,
                _ => {
                    if node.attr_i("noop_with_empty_axes").unwrap_or(0) != 0 {
                        return out(x.clone());
                    }
                    (0..rank).collect()
                }
            };
            out(reduce(
                node.op,
                x,
                &axes,
                node.attr_i("keepdims").unwrap_or(1) != 0,
            )?)
        }
        "Clip" => {
            let x = x?;
            let (lo, hi) = if node.since >= 11 {
                // An empty `min`/`max` is invalid: not folded.
                let bound = |i: usize| -> Option<Option<f64>> {
                    match inp(i) {
                        None => Some(None),
                        Some(t) if t.len() == 1 => Some(Some(t.data.get_f(0))),
                        Some(_) => None,
                    }
                };
                (bound(1)?, bound(2)?)
            } else {
                (
                    node.attr_f("min").map(f64::from),
                    node.attr_f("max").map(f64::from),
                )
            };
            let data = match &x.data {
                Data::Int(v) => Data::Int(
                    v.iter()
                        .map(|&e| {
                            let mut e = e;
                            if let Some(l) = lo {
                                e = e.max(l as i64);
                            }
                            if let Some(h) = hi {
                                e = e.min(h as i64);
                            }
                            e
                        })
                        .collect(),
                ),
                Data::Float(v) => Data::Float(
                    v.iter()
                        .map(|&e| e.max(lo.unwrap_or(f64::MIN)).min(hi.unwrap_or(f64::MAX)))
                        .collect(),
                ),
            };
            out(Tensor {
                elem: x.elem,
                dims: x.dims.clone(),
                data,
            })
        }
        _ => None,
    }
}

/// `Unsqueeze` output dims.
pub fn unsqueeze_dims(input: &[Option<i64>], axes: &[i64]) -> Option<Vec<Option<i64>>> {
    let r = input.len().checked_add(axes.len())?;
    if r > MAX_RANK {
        return None;
    }
    let mut mask = vec![false; r];
    for &a in axes {
        // A repeated axis is invalid.
        if std::mem::replace(mask.get_mut(norm_axis(a, r)?)?, true) {
            return None;
        }
    }
    let mut out = Vec::with_capacity(r);
    let mut it = input.iter();
    for &new in &mask {
        if new {
            out.push(Some(1));
        } else {
            out.push(*it.next()?);
        }
    }
    Some(out)
}

/// `Squeeze` output dims (no axes: every dim known to be 1).
pub fn squeeze_dims(input: &[Option<i64>], axes: &[i64]) -> Option<Vec<Option<i64>>> {
    let r = input.len();
    if axes.is_empty() {
        if input.iter().any(Option::is_none) {
            return None;
        }
        return Some(input.iter().copied().filter(|d| *d != Some(1)).collect());
    }
    let mut mask = vec![false; r];
    for &a in axes {
        *mask.get_mut(norm_axis(a, r)?)? = true;
    }
    Some(
        input
            .iter()
            .zip(&mask)
            .filter(|(_, gone)| !**gone)
            .map(|(d, _)| *d)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_decoding_matches_the_powi_formula_for_every_value() {
        for bits in 0..=u16::MAX {
            let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
            let exp = i32::from((bits >> 10) & 0x1f);
            let frac = f64::from(bits & 0x3ff);
            let want = match exp {
                0 => sign * frac * 2f64.powi(-24),
                31 if frac == 0.0 => sign * f64::INFINITY,
                31 => f64::NAN,
                e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
            };
            let got = f16_to_f64(bits);
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()));
        }
    }

    fn view<'a>(op: &'a str, since: i64, attrs: &'a [AttributeProto]) -> NodeView<'a> {
        NodeView {
            op,
            domain: "ai.onnx",
            since,
            attrs,
        }
    }

    #[test]
    fn gather_concat_slice() {
        let shape = Tensor::i64_1d(vec![2, 3, 4]);
        let idx = Tensor::ints(D::Int64 as i32, vec![], vec![-1]);
        let g = eval(&view("Gather", 13, &[]), &[Some(&shape), Some(&idx)]).expect("evaluates");
        assert_eq!(g[0].dims, Vec::<i64>::new());
        assert_eq!(g[0].as_i64(), vec![4]);
        let axes = Tensor::i64_1d(vec![0]);
        let u = eval(&view("Unsqueeze", 13, &[]), &[Some(&g[0]), Some(&axes)]).expect("evaluates");
        assert_eq!(u[0].dims, vec![1]);
        let attrs = [AttributeProto {
            name: Some("axis".into()),
            i: Some(0),
            ..Default::default()
        }];
        let c = eval(
            &view("Concat", 13, &attrs),
            &[Some(&u[0]), Some(&Tensor::i64_1d(vec![-1]))],
        )
        .expect("evaluates");
        assert_eq!(c[0].as_i64(), vec![4, -1]);
        let s = eval(
            &view("Slice", 13, &[]),
            &[
                Some(&shape),
                Some(&Tensor::i64_1d(vec![1])),
                Some(&Tensor::i64_1d(vec![i64::MAX])),
            ],
        )
        .expect("evaluates");
        assert_eq!(s[0].as_i64(), vec![3, 4]);
    }

    fn axis(v: i64) -> [AttributeProto; 1] {
        [AttributeProto {
            name: Some("axis".into()),
            i: Some(v),
            ..Default::default()
        }]
    }

    /// issue 15: the evaluator panicked on an empty constant `min` of `Clip` and on `Concat`
    /// of scalars; both are now "not folded".
    #[test]
    fn invalid_inputs_are_not_folded_never_a_panic() {
        let x = Tensor::ints(D::Int64 as i32, vec![3], vec![1, 2, 3]);
        let empty = Tensor::ints(D::Int64 as i32, vec![0], vec![]);
        assert_eq!(
            eval(&view("Clip", 13, &[]), &[Some(&x), Some(&empty)]),
            None
        );
        let ok = eval(
            &view("Clip", 13, &[]),
            &[Some(&x), None, Some(&Tensor::i64_1d(vec![2]))],
        );
        assert_eq!(ok.expect("folds")[0].as_i64(), vec![1, 2, 2]);
        let scalar = Tensor::ints(D::Int64 as i32, vec![], vec![7]);
        let attrs = axis(0);
        assert_eq!(
            eval(&view("Concat", 13, &attrs), &[Some(&scalar), Some(&scalar)]),
            None
        );
        // A tensor whose data does not fill its shape is refused at the door.
        let bad = Tensor::ints(D::Int64 as i32, vec![4], vec![1]);
        assert_eq!(eval(&view("Neg", 13, &[]), &[Some(&bad)]), None);
        // Slice with extreme steps: no overflow.
        for step in [i64::MIN, i64::MAX, -1] {
            let r = eval(
                &view("Slice", 13, &[]),
                &[
                    Some(&x),
                    Some(&Tensor::i64_1d(vec![i64::MAX])),
                    Some(&Tensor::i64_1d(vec![i64::MIN])),
                    Some(&Tensor::i64_1d(vec![0])),
                    Some(&Tensor::i64_1d(vec![step])),
                ],
            );
            assert!(r.is_some_and(|r| r[0].len() <= 3));
        }
        // Range over the whole of i64.
        let r = eval(
            &view("Range", 11, &[]),
            &[
                Some(&Tensor::ints(7, vec![], vec![i64::MIN])),
                Some(&Tensor::ints(7, vec![], vec![i64::MAX])),
                Some(&Tensor::ints(7, vec![], vec![1])),
            ],
        );
        assert_eq!(r, None);
    }

    /// issue 15: outputs are sized from the shapes before anything is allocated.
    #[test]
    fn outputs_over_budget_are_refused_before_allocation() {
        reset_budget();
        let big = eval(
            &view("ConstantOfShape", 9, &[]),
            &[Some(&Tensor::i64_1d(vec![MAX_ELEMENTS as i64]))],
        )
        .expect("64 Ki elements fold");
        let big = &big[0];
        let row = Tensor {
            elem: big.elem,
            dims: vec![1, MAX_ELEMENTS as i64],
            data: big.data.clone(),
        };
        let idx = Tensor::i64_1d(vec![0; MAX_ELEMENTS]);
        let start = std::time::Instant::now();
        // Gather of 64 Ki zeros along axis 0 of a [1, 64 Ki] tensor: [64 Ki, 64 Ki] is 2^32
        // elements (34 GB before the fix).
        assert_eq!(
            eval(&view("Gather", 13, &[]), &[Some(&row), Some(&idx)]),
            None
        );
        // Concat of the same tensor 20,000 times: refused by the step's input budget.
        let attrs = axis(0);
        let parts: Vec<Option<&Tensor>> = vec![Some(big); 20_000];
        assert_eq!(eval(&view("Concat", 13, &attrs), &parts), None);
        // A repeated axis in `perm` would square the size.
        let col = Tensor {
            elem: big.elem,
            dims: vec![MAX_ELEMENTS as i64, 1],
            data: big.data.clone(),
        };
        let perm = [AttributeProto {
            name: Some("perm".into()),
            ints: vec![0, 0],
            ..Default::default()
        }];
        assert_eq!(eval(&view("Transpose", 13, &perm), &[Some(&col)]), None);
        // A shape of absurd rank, and dims whose product overflows past a zero.
        let rank = Tensor::i64_1d(vec![1; MAX_RANK + 1]);
        assert_eq!(eval(&view("ConstantOfShape", 9, &[]), &[Some(&rank)]), None);
        let zero = Tensor::i64_1d(vec![0, i64::MAX, i64::MAX]);
        assert_eq!(eval(&view("ConstantOfShape", 9, &[]), &[Some(&zero)]), None);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_session_budget_bounds_the_sum_of_all_steps() {
        reset_budget();
        let shape = Tensor::i64_1d(vec![MAX_ELEMENTS as i64]);
        let steps = SESSION_ELEMENTS / MAX_ELEMENTS;
        for _ in 0..steps {
            assert!(eval(&view("ConstantOfShape", 9, &[]), &[Some(&shape)]).is_some());
        }
        assert_eq!(
            eval(&view("ConstantOfShape", 9, &[]), &[Some(&shape)]),
            None
        );
        reset_budget();
        assert!(eval(&view("ConstantOfShape", 9, &[]), &[Some(&shape)]).is_some());
    }

    #[test]
    fn range_where_roundtrip() {
        let r = eval(
            &view("Range", 11, &[]),
            &[
                Some(&Tensor::ints(7, vec![], vec![0])),
                Some(&Tensor::ints(7, vec![], vec![5])),
                Some(&Tensor::ints(7, vec![], vec![2])),
            ],
        )
        .expect("evaluates");
        assert_eq!(r[0].as_i64(), vec![0, 2, 4]);
        let p = r[0].to_proto("r");
        assert_eq!(Tensor::from_proto(&p).expect("evaluates"), r[0]);
        let h = Tensor {
            elem: D::Float16 as i32,
            dims: vec![2],
            data: Data::Float(vec![1.5, -2.0]),
        };
        assert_eq!(Tensor::from_proto(&h.to_proto("h")).expect("evaluates"), h);
        assert_eq!(
            reshape_dims(&[Some(2), Some(6)], &[0, -1, 3], false),
            vec![Some(2), Some(2), Some(3)]
        );
    }
}
