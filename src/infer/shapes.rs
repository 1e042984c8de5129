//! Static shape inference over the session graph, wide enough for constant folding (`Shape`
//! folding needs concrete dims) and transfer sizes. Unknown and symbolic dims are `None`.
//! Constant inputs (initializers) are read where an op's output shape depends on a value
//! (`Reshape`, `Slice`, `Expand`, `Unsqueeze`-13, ...).

use crate::sym::SymMap as HashMap;
use std::collections::hash_map::Entry;
use std::rc::Rc;

use super::eval::{self, NodeView, Tensor, reshape_dims, slice_plan};
use crate::session::{SNode, Session};
use crate::sym::Sym;

/// Dims of a value; `None` for an unknown or symbolic dim.
pub type Shape = Vec<Option<i64>>;

/// Constant values of initializers, decoded once.
#[derive(Default)]
pub struct Values {
    cache: HashMap<(usize, Sym), Option<Rc<Tensor>>>,
}

impl Values {
    /// The constant (non-overridable) value of `name` as seen from graph `gi`, if small.
    pub fn get(&mut self, session: &Session, gi: usize, name: Sym) -> Option<Rc<Tensor>> {
        // The graph that defines the initializer, so that enclosing scopes share entries.
        let mut g = gi;
        let init = loop {
            if let Some(i) = session.graphs[g].initializers.get(&name) {
                break i;
            }
            g = session.graphs[g].parent?.graph();
        };
        if init.overridable {
            return None;
        }
        self.cache
            .entry((g, name))
            .or_insert_with(|| Tensor::from_proto(&init.tensor).map(Rc::new))
            .clone()
    }
    /// Records a computed value (a folded output).
    pub fn set(&mut self, gi: usize, name: Sym, t: Tensor) {
        self.cache.insert((gi, name), Some(Rc::new(t)));
    }
    pub fn forget(&mut self, gi: usize, name: Sym) {
        self.cache.remove(&(gi, name));
    }
}

fn bdim(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(1), y) => y,
        (x, Some(1)) => x,
        (Some(x), Some(y)) if x == y => Some(x),
        (Some(x), None) | (None, Some(x)) if x > 1 => Some(x),
        _ => None,
    }
}

/// Numpy broadcast of shapes with unknown dims.
pub fn broadcast(shapes: &[&Shape]) -> Shape {
    let dims: Vec<&[Option<i64>]> = shapes.iter().map(|s| s.as_slice()).collect();
    broadcast_dims(&dims)
}

/// [`broadcast`] of dim slices.
fn broadcast_dims(shapes: &[&[Option<i64>]]) -> Shape {
    let r = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..r)
        .map(|i| {
            let mut acc = Some(1);
            for s in shapes {
                let d = if i + s.len() >= r {
                    s[i + s.len() - r]
                } else {
                    Some(1)
                };
                acc = bdim(acc, d);
            }
            acc
        })
        .collect()
}

/// The rank of a shape whose length a declared dim gives (the length of a shape input):
/// validated before it sizes a vector.
fn declared_rank(n: i64) -> Option<usize> {
    usize::try_from(n).ok().filter(|&r| r <= eval::MAX_RANK)
}

/// Axis `axis` of a rank-`rank` shape (a negative axis counts from the end), if in range.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

const SAME_AS_INPUT0: &[&str] = &[
    "Identity",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sqrt",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Round",
    "Erf",
    "Not",
    "Cast",
    "CastLike",
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "LeakyRelu",
    "Elu",
    "Selu",
    "Celu",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Softsign",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Asinh",
    "Acosh",
    "Atanh",
    "IsNaN",
    "IsInf",
    "Sign",
    "Clip",
    "Mish",
    "ThresholdedRelu",
    "Shrink",
    "LpNormalization",
    "InstanceNormalization",
    "MeanVarianceNormalization",
    "BatchNormalization",
    "QuantizeLinear",
    "DequantizeLinear",
    "Trilu",
    "CumSum",
    "ScatterElements",
    "ScatterND",
    "Scatter",
    "BitwiseNot",
    "Bernoulli",
    "LRN",
    "Swish",
];

const BROADCAST: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Where",
    "PRelu",
];

/// The shape of the concatenation of `xs` along `axis`: one rank, the axis dims summed
/// (unknown when one is), every other dim the first known one.
fn concat_shapes(xs: &[Shape], axis: i64) -> Option<Shape> {
    let rank = xs.first()?.len();
    if xs.iter().any(|x| x.len() != rank) {
        return None;
    }
    let axis = usize::try_from(if axis < 0 { axis + rank as i64 } else { axis }).ok()?;
    if axis >= rank {
        return None;
    }
    Some(
        (0..rank)
            .map(|d| {
                if d == axis {
                    xs.iter()
                        .try_fold(0i64, |acc, x| x[d].and_then(|v| acc.checked_add(v)))
                } else {
                    xs.iter().find_map(|x| x[d])
                }
            })
            .collect(),
    )
}

/// How [`infer_node`] treats an ai.onnx op before its per-op cases.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Output 0 has input 0's shape ([`SAME_AS_INPUT0`]).
    SameAsInput0,
    /// Output 0 is the broadcast of the inputs ([`BROADCAST`]).
    Broadcast,
}

/// The class of an op, by its interned name (one hash of an id per node instead of scanning
/// the lists' texts).
fn class_of(op: Sym) -> Option<Class> {
    static CLASSES: std::sync::OnceLock<HashMap<Sym, Class>> = std::sync::OnceLock::new();
    CLASSES
        .get_or_init(|| {
            let same = SAME_AS_INPUT0
                .iter()
                .map(|&op| (Sym::new(op), Class::SameAsInput0));
            let broadcast = BROADCAST.iter().map(|&op| (Sym::new(op), Class::Broadcast));
            same.chain(broadcast).collect()
        })
        .get(&op)
        .copied()
}

/// Output shapes of `node` from its input shapes and the constant values of its inputs.
pub fn infer_node(
    node: &SNode,
    inputs: &[Option<&Shape>],
    values: &[Option<&Tensor>],
) -> Vec<Option<Shape>> {
    let n_out = node.outputs.len();
    let mut out: Vec<Option<Shape>> = vec![None; n_out];
    let since = node.since.unwrap_or(0);
    let view = NodeView {
        op: &node.op,
        domain: &node.domain,
        since,
        attrs: &node.attrs,
    };
    // Everything constant and small: evaluate.
    if !values.is_empty()
        && node
            .inputs
            .iter()
            .zip(values)
            .all(|(n, v)| n.is_empty() || v.is_some())
        && node.subgraphs.is_empty()
        && let Some(res) = eval::eval(&view, values)
    {
        for (slot, t) in out.iter_mut().zip(res) {
            *slot = Some(t.dims.iter().map(|&d| Some(d)).collect());
        }
        return out;
    }
    let first = out.first_mut();
    let Some(first) = first else {
        return out;
    };
    let r = |i: usize| inputs.get(i).copied().flatten();
    let s = |i: usize| r(i).cloned();
    let v = |i: usize| values.get(i).copied().flatten();
    if node.domain != Sym::AI_ONNX {
        if matches!(
            node.op.as_str(),
            "SimplifiedLayerNormalization"
                | "SkipSimplifiedLayerNormalization"
                | "SkipLayerNormalization"
                | "FastGelu"
                | "BiasGelu"
                | "QuickGelu"
                | "Gelu"
                | "QuantizeLinear"
                | "DequantizeLinear"
                | "QLinearSigmoid"
                | "QLinearLeakyRelu"
                | "QLinearSoftmax"
        ) {
            *first = s(0);
        }
        // The quantized binary ops broadcast A (input 0) and B (input 3), as their contrib
        // schemas' inference does.
        if matches!(node.op.as_str(), "QLinearAdd" | "QLinearMul")
            && let (Some(a), Some(b)) = (s(0), s(3))
        {
            *first = Some(broadcast(&[&a, &b]));
        }
        // QLinearConcat: Y's scale and zero point, then (X, scale, zero point) per input.
        if node.op == "QLinearConcat" {
            let xs: Option<Vec<Shape>> = (2..node.inputs.len()).step_by(3).map(s).collect();
            *first = xs.and_then(|xs| concat_shapes(&xs, node.attr_i("axis")?));
        }
        if node.domain == Sym::COM_MICROSOFT {
            *first = first.take().or_else(|| contrib_shape(node, &s));
        }
        // SkipLayerNormalizationShapeInference gives `input_skip_bias_sum` (output 3) input 0's
        // shape too (ORT 1.23-1.31 save it so).
        if matches!(
            node.op.as_str(),
            "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization"
        ) && let Some(sum) = out.get_mut(3)
        {
            *sum = s(0);
        }
        if node.op == "SkipGroupNorm"
            && let Some(sum) = out.get_mut(1)
        {
            *sum = s(0);
        }
        return out;
    }
    let op = node.op.as_str();
    if op == "DynamicQuantizeLinear" {
        // y like x; y_scale and y_zero_point scalars.
        for (k, slot) in out.iter_mut().enumerate() {
            *slot = if k == 0 { s(0) } else { Some(Vec::new()) };
        }
        return out;
    }
    let class = class_of(node.op);
    if class == Some(Class::SameAsInput0) {
        *first = s(0);
        if op == "BatchNormalization" {
            return out;
        }
        return out;
    }
    if class == Some(Class::Broadcast) {
        let shapes: Vec<&[Option<i64>]> = node
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, _)| r(i).map(Vec::as_slice))
            .collect::<Option<_>>()
            .unwrap_or_default();
        if !shapes.is_empty()
            && shapes.len() == node.inputs.iter().filter(|n| !n.is_empty()).count()
        {
            *first = Some(broadcast_dims(&shapes));
        }
        return out;
    }
    let attr_ints = |name: &str| node.attr_ints(name).map(<[i64]>::to_vec);
    *first = (|| -> Option<Shape> {
        match op {
            // ORT registers `SimplifiedLayerNormalization` in the ONNX domain too (the form
            // its transformer optimizer writes for T5's RMS norms, unseen3/ortopt.t5): Y is X.
            "Dropout"
            | "LayerNormalization"
            | "RMSNormalization"
            | "SimplifiedLayerNormalization" => {
                let x = s(0)?;
                if op == "LayerNormalization" {
                    // Mean and InvStdDev: reduced dims become 1.
                    let axis = norm_axis(node.attr_i("axis").unwrap_or(-1), x.len())?;
                    let red: Shape = x
                        .iter()
                        .enumerate()
                        .map(|(i, d)| if i >= axis { Some(1) } else { *d })
                        .collect();
                    return Some(x).inspect(|_| {
                        let _ = red;
                    });
                }
                Some(x)
            }
            "MatMul" | "MatMulInteger" | "QLinearMatMul" => {
                let (a, b) = if op == "QLinearMatMul" {
                    (r(0)?, r(3)?)
                } else {
                    (r(0)?, r(1)?)
                };
                if a.is_empty() || b.is_empty() {
                    return None;
                }
                // A rank-1 operand is promoted (`[1, k]`, `[k, 1]`): no batch dims.
                let batch = |x: &[Option<i64>]| -> usize { x.len().saturating_sub(2) };
                let mut o = broadcast_dims(&[&a[..batch(a)], &b[..batch(b)]]);
                if a.len() > 1 {
                    o.push(a[a.len() - 2]);
                }
                if b.len() > 1 {
                    o.push(b[b.len() - 1]);
                }
                Some(o)
            }
            "Gemm" => gemm_shape(node, s(0)?, s(1)?),
            "Reshape" => {
                let x = s(0);
                let target = if since >= 5 {
                    match v(1) {
                        Some(t) => t.as_i64(),
                        None => {
                            let n = s(1)?.first().copied().flatten()?;
                            return Some(vec![None; declared_rank(n)?]);
                        }
                    }
                } else {
                    attr_ints("shape")?
                };
                let allowzero = node.attr_i("allowzero").unwrap_or(0) != 0;
                match x {
                    Some(x) => Some(reshape_dims(&x, &target, allowzero)),
                    None => Some(
                        target
                            .iter()
                            .map(|&t| (t > 0 || (t == 0 && allowzero)).then_some(t))
                            .collect(),
                    ),
                }
            }
            "Flatten" => {
                let x = s(0)?;
                let axis = node.attr_i("axis").unwrap_or(1);
                let r = x.len() as i64;
                let axis = if axis < 0 { axis + r } else { axis };
                if !(0..=r).contains(&axis) {
                    return None;
                }
                let prod = |d: &[Option<i64>]| d.iter().try_fold(1i64, |a, x| a.checked_mul((*x)?));
                Some(vec![prod(&x[..axis as usize]), prod(&x[axis as usize..])])
            }
            "Transpose" => {
                let x = s(0)?;
                match node.attr_ints("perm") {
                    Some(p) => p
                        .iter()
                        .map(|&i| usize::try_from(i).ok().and_then(|i| x.get(i).copied()))
                        .collect(),
                    None => Some(x.iter().rev().copied().collect()),
                }
            }
            "Concat" => {
                let axis = node.attr_i("axis")?;
                let shapes: Vec<Shape> = node
                    .inputs
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| !n.is_empty())
                    .map(|(i, _)| s(i))
                    .collect::<Option<_>>()?;
                let rank = shapes.first()?.len();
                let axis = norm_axis(axis, rank)?;
                let mut o = shapes[0].clone();
                o[axis] = shapes
                    .iter()
                    .try_fold(0i64, |acc, sh| acc.checked_add((*sh.get(axis)?)?));
                for (k, d) in o.iter_mut().enumerate() {
                    if k != axis && d.is_none() {
                        *d = shapes.iter().find_map(|sh| sh.get(k).copied().flatten());
                    }
                }
                Some(o)
            }
            "Gather" => {
                let (x, i) = (s(0)?, s(1)?);
                let axis = norm_axis(node.attr_i("axis").unwrap_or(0), x.len())?;
                let mut o = x[..axis].to_vec();
                o.extend(i);
                o.extend_from_slice(&x[axis + 1..]);
                Some(o)
            }
            "GatherElements" => s(1),
            // ONNX's GatherND inference: `indices[:-1] + data[batch_dims + k:]` with `k` the
            // indices' last dim, which must be known.
            "GatherND" => {
                let (x, i) = (s(0)?, s(1)?);
                let k = usize::try_from((*i.last()?)?).ok()?;
                let b = usize::try_from(node.attr_i("batch_dims").unwrap_or(0)).ok()?;
                let mut o = i[..i.len() - 1].to_vec();
                o.extend_from_slice(x.get(b.checked_add(k)?..)?);
                Some(o)
            }
            "Unsqueeze" | "Squeeze" => {
                let x = s(0)?;
                let axes: Vec<i64> = if since >= 13 {
                    match node.inputs.get(1).filter(|n| !n.is_empty()) {
                        Some(_) => v(1)?.as_i64(),
                        None => Vec::new(),
                    }
                } else {
                    attr_ints("axes").unwrap_or_default()
                };
                if op == "Unsqueeze" {
                    eval::unsqueeze_dims(&x, &axes)
                } else {
                    eval::squeeze_dims(&x, &axes)
                }
            }
            "Slice" => {
                let x = s(0)?;
                let params = (|| {
                    let (starts, ends, axes, steps) = if since >= 10 {
                        (
                            v(1)?.as_i64(),
                            v(2)?.as_i64(),
                            match node.inputs.get(3).filter(|n| !n.is_empty()) {
                                Some(_) => Some(v(3)?.as_i64()),
                                None => None,
                            },
                            match node.inputs.get(4).filter(|n| !n.is_empty()) {
                                Some(_) => Some(v(4)?.as_i64()),
                                None => None,
                            },
                        )
                    } else {
                        (
                            attr_ints("starts")?,
                            attr_ints("ends")?,
                            attr_ints("axes"),
                            None,
                        )
                    };
                    // Axes over unknown dims: the sliced count is unknown.
                    let rank = x.len();
                    let mut o = x.clone();
                    let known: Vec<i64> = x.iter().map(|d| d.unwrap_or(i64::MAX / 4)).collect();
                    let plan =
                        slice_plan(&known, &starts, &ends, axes.as_deref(), steps.as_deref())?;
                    for k in 0..starts.len() {
                        let axis = match &axes {
                            Some(a) => norm_axis(*a.get(k)?, rank)?,
                            None => k,
                        };
                        o[axis] = if x[axis].is_some() {
                            Some(plan[axis].2)
                        } else {
                            None
                        };
                    }
                    Some(o)
                })();
                // Non-constant parameters: the rank is kept.
                params.or(Some(vec![None; x.len()]))
            }
            "Shape" => {
                // A 1-D tensor whatever its input; its length needs the input's rank.
                let Some(x) = s(0) else {
                    return Some(vec![None]);
                };
                let r = x.len() as i64;
                let clamp = |v: i64| {
                    let v = if v < 0 { v + r } else { v };
                    v.clamp(0, r)
                };
                let st = clamp(node.attr_i("start").unwrap_or(0));
                let en = clamp(node.attr_i("end").unwrap_or(r));
                Some(vec![Some((en - st).max(0))])
            }
            "Size" => Some(vec![]),
            "Expand" => {
                let x = s(0)?;
                match v(1) {
                    Some(t) => {
                        let sh: Shape = t.as_i64().into_iter().map(Some).collect();
                        Some(broadcast(&[&x, &sh]))
                    }
                    None => {
                        let n = s(1)?.first().copied().flatten()?;
                        let sh: Shape = vec![None; declared_rank(n)?];
                        Some(broadcast(&[&x, &sh]))
                    }
                }
            }
            "ConstantOfShape" => match v(0) {
                Some(t) => Some(t.as_i64().into_iter().map(Some).collect()),
                None => {
                    let n = s(0)?.first().copied().flatten()?;
                    Some(vec![None; declared_rank(n)?])
                }
            },
            "Range" => Some(vec![None]),
            "NonZero" => Some(vec![s(0).map(|x| x.len() as i64), None]),
            "Tile" => {
                let x = s(0)?;
                match v(1) {
                    Some(r) => {
                        let r = r.as_i64();
                        if r.len() != x.len() {
                            return None;
                        }
                        Some(
                            x.iter()
                                .zip(&r)
                                .map(|(d, &k)| d.and_then(|d| d.checked_mul(k)))
                                .collect(),
                        )
                    }
                    None => Some(vec![None; x.len()]),
                }
            }
            "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
            | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" | "ArgMax"
            | "ArgMin" => {
                let x = s(0)?;
                let keep = node.attr_i("keepdims").unwrap_or(1) != 0;
                let axes: Vec<i64> = if op.starts_with("Arg") {
                    vec![node.attr_i("axis").unwrap_or(0)]
                } else if (op == "ReduceSum" && since >= 13) || since >= 18 {
                    match node.inputs.get(1).filter(|n| !n.is_empty()) {
                        Some(_) => v(1)?.as_i64(),
                        None => Vec::new(),
                    }
                } else {
                    attr_ints("axes").unwrap_or_default()
                };
                let rank = x.len();
                let axes: Vec<usize> = if axes.is_empty() {
                    if node.attr_i("noop_with_empty_axes").unwrap_or(0) != 0 {
                        return Some(x);
                    }
                    (0..rank).collect()
                } else {
                    axes.iter()
                        .map(|&a| norm_axis(a, rank))
                        .collect::<Option<_>>()?
                };
                Some(
                    x.iter()
                        .enumerate()
                        .filter_map(|(i, d)| {
                            if axes.contains(&i) {
                                keep.then_some(Some(1))
                            } else {
                                Some(*d)
                            }
                        })
                        .collect(),
                )
            }
            "Conv" | "MaxPool" | "AveragePool" | "LpPool" | "ConvInteger" | "QLinearConv" => {
                let w = if op.contains("Conv") {
                    Some(s(if op == "QLinearConv" { 3 } else { 1 })?)
                } else {
                    None
                };
                conv_pool_shape(node, s(0)?, w)
            }
            // ONNX's `convTransposeShapeInference`: `[N, W[1] * group, spatial...]`, each
            // spatial dim `stride * (d - 1) + output_padding + (k - 1) * dilation + 1 - pads`
            // (`d * stride` with a SAME auto_pad), or the `output_shape` attribute's.
            "ConvTranspose" => {
                let (x, w) = (s(0)?, s(1)?);
                if x.len() < 3 || w.len() != x.len() {
                    return None;
                }
                let spatial = x.len() - 2;
                let group = node.attr_i("group").unwrap_or(1);
                let mut o = vec![x[0], w[1].and_then(|c| c.checked_mul(group))];
                if let Some(shape) = attr_ints("output_shape") {
                    let skip = shape.len().checked_sub(spatial)?;
                    o.extend(shape[skip..].iter().map(|&d| Some(d)));
                    return Some(o);
                }
                let kernel: Vec<Option<i64>> = match attr_ints("kernel_shape") {
                    Some(k) => k.into_iter().map(Some).collect(),
                    None => w[2..].to_vec(),
                };
                let strides = attr_ints("strides").unwrap_or_else(|| vec![1; spatial]);
                let dil = attr_ints("dilations").unwrap_or_else(|| vec![1; spatial]);
                let opad = attr_ints("output_padding").unwrap_or_else(|| vec![0; spatial]);
                let pads = attr_ints("pads").unwrap_or_else(|| vec![0; 2 * spatial]);
                let auto = node.attr_s("auto_pad").unwrap_or_default();
                for i in 0..spatial {
                    let dim = (|| -> Option<i64> {
                        let (d, st) = (x[2 + i]?, *strides.get(i)?);
                        if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
                            return d.checked_mul(st);
                        }
                        let ek = (*kernel.get(i)?)?
                            .checked_sub(1)?
                            .checked_mul(*dil.get(i)?)?
                            .checked_add(1)?;
                        let (p0, p1) = if auto == "VALID" {
                            (0, 0)
                        } else {
                            (*pads.get(i)?, *pads.get(i + spatial)?)
                        };
                        st.checked_mul(d.checked_sub(1)?)?
                            .checked_add(*opad.get(i)?)?
                            .checked_add(ek)?
                            .checked_sub(p0)?
                            .checked_sub(p1)
                    })();
                    o.push(dim);
                }
                Some(o)
            }
            // ONNX's RoiAlign inference: `[num_rois, C, output_height, output_width]`.
            "RoiAlign" => {
                let (x, rois) = (s(0)?, s(1));
                let rois_n = rois.and_then(|r| r.first().copied().flatten());
                let n = rois_n.or_else(|| s(2).and_then(|b| b.first().copied().flatten()));
                Some(vec![
                    n,
                    x.get(1).copied().flatten(),
                    Some(node.attr_i("output_height").unwrap_or(1)),
                    Some(node.attr_i("output_width").unwrap_or(1)),
                ])
            }
            "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
                let x = s(0)?;
                let mut o = x.clone();
                for d in o.iter_mut().skip(2) {
                    *d = Some(1);
                }
                Some(o)
            }
            "Split" => None,
            "TopK" => {
                let x = s(0)?;
                let axis = norm_axis(node.attr_i("axis").unwrap_or(-1), x.len())?;
                let mut o = x.clone();
                *o.get_mut(axis)? = v(1).and_then(|k| k.as_i64().first().copied());
                Some(o)
            }
            "OneHot" => None,
            "Pad" => {
                let x = s(0)?;
                let pads = if since >= 11 {
                    // A pads input not constant at load: ONNX gives the rank alone.
                    match v(1) {
                        Some(p) => p.as_i64(),
                        None => return Some(vec![None; x.len()]),
                    }
                } else {
                    attr_ints("pads")?
                };
                let axes: Vec<usize> = match node.inputs.get(3).filter(|n| !n.is_empty()) {
                    Some(_) => v(3)?
                        .as_i64()
                        .iter()
                        .map(|&a| norm_axis(a, x.len()))
                        .collect::<Option<_>>()?,
                    None => (0..x.len()).collect(),
                };
                if pads.len() != 2 * axes.len() {
                    return None;
                }
                let mut o = x.clone();
                for (k, &a) in axes.iter().enumerate() {
                    let slot = o.get_mut(a)?;
                    *slot = slot
                        .and_then(|d| d.checked_add(pads[k])?.checked_add(pads[k + axes.len()]));
                }
                Some(o)
            }
            // ONNX's `resizeShapeInference` (`defs/tensor/defs.cc`, `old.cc`): the input's rank;
            // the dims from a constant `sizes` (on `axes` from opset 18), else from a constant
            // `scales` (`floor(dim * scale)` in float), else unknown.
            "Resize" | "Upsample" => {
                let x = s(0)?;
                let (scales_at, sizes_at) = if op == "Upsample" || since < 11 {
                    (1, None)
                } else {
                    (2, Some(3))
                };
                let axes: Vec<usize> = match attr_ints("axes") {
                    Some(a) if since >= 18 => a
                        .iter()
                        .map(|&a| norm_axis(a, x.len()))
                        .collect::<Option<_>>()?,
                    _ => (0..x.len()).collect(),
                };
                let mut o: Shape = vec![None; x.len()];
                let stretch = node
                    .attr_s("keep_aspect_ratio_policy")
                    .is_none_or(|p| p == "stretch");
                // The rank is known whatever else is; the dims off `axes` keep X's.
                if let Some(sizes) = sizes_at.and_then(v).filter(|t| !t.is_empty()) {
                    let sizes = sizes.as_i64();
                    if stretch && sizes.len() == axes.len() {
                        o.clone_from(&x);
                        for (&a, &d) in axes.iter().zip(&sizes) {
                            o[a] = Some(d);
                        }
                    }
                } else if let Some(scales) = v(scales_at).filter(|t| !t.is_empty() && t.elem == 1) {
                    let scales = scales.as_f64();
                    if scales.len() == axes.len() {
                        o.clone_from(&x);
                        for (&a, &k) in axes.iter().zip(&scales) {
                            o[a] = x[a].map(|d| ((d as f32) * (k as f32)).floor() as i64);
                        }
                    }
                }
                Some(o)
            }
            "EyeLike" | "RandomNormalLike" | "RandomUniformLike" => s(0),
            "RandomNormal" | "RandomUniform" => {
                Some(attr_ints("shape")?.into_iter().map(Some).collect())
            }
            _ => None,
        }
    })();
    // Split: several outputs.
    if op == "Split"
        && let Some(x) = s(0)
    {
        {
            let r = x.len();
            if let Some(axis) = norm_axis(node.attr_i("axis").unwrap_or(0), r) {
                let sizes: Option<Vec<i64>> = if since >= 13 {
                    match node.inputs.get(1).filter(|n| !n.is_empty()) {
                        Some(_) => v(1).map(Tensor::as_i64),
                        None => None,
                    }
                } else {
                    attr_ints("split")
                };
                let sizes = sizes.or_else(|| {
                    let d = (*x.get(axis)?)?;
                    let k = n_out as i64;
                    let num = node.attr_i("num_outputs").unwrap_or(k);
                    if num <= 0 {
                        return None;
                    }
                    let chunk = d.checked_add(num - 1)? / num;
                    (0..n_out as i64)
                        .map(|i| Some(d.checked_sub(chunk.checked_mul(i)?)?.clamp(0, chunk)))
                        .collect()
                });
                if axis < x.len() {
                    for (i, slot) in out.iter_mut().enumerate() {
                        let mut o = x.clone();
                        o[axis] = sizes.as_ref().and_then(|z| z.get(i).copied());
                        *slot = Some(o);
                    }
                }
            }
        }
    }
    // RNN, GRU, LSTM (ONNX's `RNNShapeInference`, `defs/rnn/defs.cc`): `Y` is
    // `[seq, directions, batch, hidden]` and `Y_h`/`Y_c` `[directions, batch, hidden]` (batch
    // first with `layout` 1), the sequence and batch from `X`, the directions from `direction`,
    // the hidden size from its attribute; each dim unknown where its source is. The ranks are
    // given even without `X`'s shape. Found on a tf2onnx bidirectional LSTM whose `Y` feeds a
    // Loop body's `MatMul` + `Add` that ORT fuses (unseen3/tf.lstm-gru).
    if matches!(op, "RNN" | "GRU" | "LSTM") {
        let dirs = match node.attr_s("direction").as_deref().unwrap_or("forward") {
            "forward" | "reverse" => Some(1),
            "bidirectional" => Some(2),
            _ => None,
        };
        let hidden = node.attr_i("hidden_size").filter(|&h| h > 0);
        let layout = node.attr_i("layout").unwrap_or(0);
        let x = s(0);
        if x.as_ref().is_none_or(|x| x.len() == 3) {
            let dim = |k: usize| x.as_ref().and_then(|x| x[k]);
            let (seq, batch) = if layout == 0 {
                (dim(0), dim(1))
            } else {
                (dim(1), dim(0))
            };
            for (k, slot) in out.iter_mut().enumerate().take(3) {
                *slot = Some(match (k, layout == 0) {
                    (0, true) => vec![seq, dirs, batch, hidden],
                    (0, false) => vec![batch, seq, dirs, hidden],
                    (_, true) => vec![dirs, batch, hidden],
                    (_, false) => vec![batch, dirs, hidden],
                });
            }
        }
    }
    if op == "TopK" && n_out > 1 {
        out[1] = out[0].clone();
    }
    if op == "Dropout" && n_out > 1 {
        out[1] = out[0].clone();
    }
    if op == "LayerNormalization"
        && n_out > 1
        && let Some(x) = s(0)
        && let Some(axis) = norm_axis(node.attr_i("axis").unwrap_or(-1), x.len())
    {
        let red: Shape = x
            .iter()
            .enumerate()
            .map(|(i, d)| if i >= axis { Some(1) } else { *d })
            .collect();
        for slot in out.iter_mut().skip(1) {
            *slot = Some(red.clone());
        }
    }
    // A shape is held per value and copied along every chain of nodes: one of absurd rank
    // (from a long constant `Reshape` target, say) is kept as unknown instead.
    for slot in &mut out {
        if slot.as_ref().is_some_and(|sh| sh.len() > eval::MAX_RANK) {
            *slot = None;
        }
    }
    out
}

/// Whether the output shape of `op` depends on the value of input `pos`.
fn value_needed(op: &str, pos: usize) -> bool {
    match op {
        "Reshape" | "Unsqueeze" | "Squeeze" | "Expand" | "Tile" | "Split" | "TopK" => pos == 1,
        "Slice" => pos >= 1,
        "Pad" => pos == 1 || pos == 3,
        "ConstantOfShape" => pos == 0,
        "Range" => true,
        "Resize" | "Upsample" => pos >= 1,
        _ => op.starts_with("Reduce") && pos == 1,
    }
}

/// Merges an inferred shape into the declared one, in place: concrete inferred dims win; a
/// rank that differs replaces the declared shape. Whether the declared shape changed.
fn merge_into(declared: &mut Shape, inferred: Shape) -> bool {
    if declared.len() == inferred.len() {
        let mut changed = false;
        for (a, b) in declared.iter_mut().zip(inferred) {
            if b.is_some() && *a != b {
                *a = b;
                changed = true;
            }
        }
        changed
    } else {
        *declared = inferred;
        true
    }
}

/// Infers and records the output shapes of node `ni` of graph `gi`, and the node's
/// [`SNode::inference_key`] (`SGraph::inferred`). Whether a recorded shape changed.
pub fn infer_and_record(session: &mut Session, gi: usize, ni: usize, values: &mut Values) -> bool {
    let node = &session.graphs[gi].nodes[ni];
    // Values are read where the output shape depends on them, or where every input is a
    // constant (the node may then be evaluated).
    let all_const = node
        .inputs
        .iter()
        .all(|&n| n.is_empty() || session.initializer(gi, n).is_some_and(|i| !i.overridable));
    let wanted = |pos: usize, n: Sym| !n.is_empty() && (all_const || value_needed(&node.op, pos));
    // Not all constant and no value wanted (most nodes): none is passed (`infer_node` reads a
    // missing one as `None`, and evaluates only where every input is a constant).
    let owned: Vec<Option<Rc<Tensor>>> = if all_const
        || node
            .inputs
            .iter()
            .enumerate()
            .any(|(pos, &n)| wanted(pos, n))
    {
        let mut owned = Vec::with_capacity(node.inputs.len());
        for (pos, &n) in node.inputs.iter().enumerate() {
            owned.push(if wanted(pos, n) {
                values.get(session, gi, n)
            } else {
                None
            });
        }
        owned
    } else {
        Vec::new()
    };
    let refs: Vec<Option<&Tensor>> = owned.iter().map(|t| t.as_deref()).collect();
    let shape = |&n: &Sym| {
        if n.is_empty() {
            None
        } else {
            session.shape_of(gi, n)
        }
    };
    // Up to `INLINE` inputs (nearly every node) on the stack.
    const INLINE: usize = 8;
    let mut inline: [Option<&Shape>; INLINE] = [None; INLINE];
    let spilled: Vec<Option<&Shape>>;
    let input_shapes: &[Option<&Shape>] = if node.inputs.len() <= INLINE {
        for (slot, n) in inline.iter_mut().zip(&node.inputs) {
            *slot = shape(n);
        }
        &inline[..node.inputs.len()]
    } else {
        spilled = node.inputs.iter().map(shape).collect();
        &spilled
    };
    let mut outs = infer_node(node, input_shapes, &refs);
    if node.op == Sym::IF && node.domain == Sym::AI_ONNX {
        if_shapes(session, node, &mut outs);
    }
    let g = &mut session.graphs[gi];
    let (nodes, shapes) = (&g.nodes, &mut g.shapes);
    let mut changed = false;
    for (name, sh) in nodes[ni].outputs.iter().zip(outs) {
        if name.is_empty() {
            continue;
        }
        // The declared shape is updated where it is kept, never copied.
        let Some(i) = sh else { continue };
        changed |= match shapes.entry(*name) {
            Entry::Vacant(v) => {
                v.insert(i);
                true
            }
            Entry::Occupied(mut o) => merge_into(o.get_mut(), i),
        };
    }
    // Kept for the main graph only, the one inferred incrementally (`SGraph::inferred`).
    if g.parent.is_none() {
        let key = nodes[ni].inference_key();
        if g.inferred.len() <= ni {
            g.inferred.resize(g.nodes.len(), 0);
        }
        g.inferred[ni] = key;
    }
    changed
}

/// ONNX's `IfInferenceFunction` (`defs/controlflow/defs.cc`): each output is the union of the
/// two branches' outputs (`UnionShapeInfo`): no shape where their ranks differ, a dim only where
/// both branches agree on it. The branches are inferred before the node.
fn if_shapes(session: &Session, node: &SNode, outs: &mut [Option<Shape>]) {
    let branch = |attr: &str| {
        node.subgraphs
            .iter()
            .find(|(a, _)| a == attr)
            .map(|(_, g)| *g)
    };
    let (Some(t), Some(e)) = (branch("then_branch"), branch("else_branch")) else {
        return;
    };
    for (k, slot) in outs.iter_mut().enumerate() {
        let shape = |g: usize| {
            let name = *session.graphs.get(g)?.outputs.get(k)?;
            session.shape_of(g, name)
        };
        if let (Some(a), Some(b)) = (shape(t), shape(e))
            && a.len() == b.len()
        {
            *slot = Some(
                a.iter()
                    .zip(b)
                    .map(|(x, y)| if x == y { *x } else { None })
                    .collect(),
            );
        }
    }
}

/// Infers shapes for every node of graph `gi` (and its subgraphs) in topological order.
pub fn infer_graph(session: &mut Session, gi: usize, values: &mut Values) {
    let order = super::topological_order(session, gi);
    infer_graph_in(session, gi, values, &order);
}

/// [`infer_graph`] with graph `gi`'s Kahn order given.
pub fn infer_graph_in(session: &mut Session, gi: usize, values: &mut Values, order: &[usize]) {
    for &ni in order {
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for sg in subs {
            infer_graph(session, sg, values);
        }
        infer_and_record(session, gi, ni, values);
    }
}

/// The first output's shape of the com.microsoft ops ORT's transformer optimizer writes, as
/// their shape inference gives it (`core/graph/contrib_ops/bert_defs.cc`): `Attention` keeps
/// the batch and sequence of its input with the value hidden size (`qkv_hidden_sizes[2]`, else a
/// third of the bias or weight width); `EmbedLayerNormalization` gives the ids' shape plus the
/// word embedding's width.
/// `Gemm`'s (and `QGemm`'s) output: `[M, N]` from the rank-2 `a` and `b`, transposed as
/// `transA`/`transB` say.
fn gemm_shape(node: &SNode, a: Shape, b: Shape) -> Option<Shape> {
    if a.len() != 2 || b.len() != 2 {
        return None;
    }
    let pick = |t: &Shape, trans: &str, if_set: usize| {
        let k = if node.attr_i(trans).unwrap_or(0) != 0 {
            if_set
        } else {
            1 - if_set
        };
        t[k]
    };
    Some(vec![pick(&a, "transA", 1), pick(&b, "transB", 0)])
}

/// ONNX's `convPoolShapeInference`: the output of a convolution (`w`: its weight's shape, whose
/// dim 0 is the output channels and dims 2.. the kernel when `kernel_shape` is absent) or of a
/// pool (`w` none) over the channels-first input `x`.
fn conv_pool_shape(node: &SNode, x: Shape, w: Option<Shape>) -> Option<Shape> {
    let attr_ints = |name: &str| node.attr_ints(name).map(<[i64]>::to_vec);
    if x.len() < 3 {
        return None;
    }
    let spatial = x.len() - 2;
    let kernel: Vec<Option<i64>> = match node.attr_ints("kernel_shape") {
        Some(k) => k.iter().map(|&v| Some(v)).collect(),
        None => w.as_ref()?.get(2..)?.to_vec(),
    };
    let channels = match &w {
        Some(w) => w.first().copied().flatten(),
        None => x[1],
    };
    let strides = attr_ints("strides").unwrap_or_else(|| vec![1; spatial]);
    let dil = attr_ints("dilations").unwrap_or_else(|| vec![1; spatial]);
    let pads = attr_ints("pads").unwrap_or_else(|| vec![0; 2 * spatial]);
    let auto = node.attr_s("auto_pad").unwrap_or_default();
    let ceil = node.attr_i("ceil_mode").unwrap_or(0) != 0;
    let mut o = vec![x[0], channels];
    for i in 0..spatial {
        let d = x[2 + i];
        let k = *kernel.get(i)?;
        let st = *strides.get(i)?;
        let dl = *dil.get(i)?;
        let dim = (|| -> Option<i64> {
            let d = d?;
            if st <= 0 {
                return None;
            }
            if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
                return Some(d.checked_add(st - 1)? / st);
            }
            let k = k?;
            let ek = k.checked_sub(1)?.checked_mul(dl)?.checked_add(1)?;
            let (p0, p1) = if auto == "VALID" {
                (0, 0)
            } else {
                (*pads.get(i)?, *pads.get(i + spatial)?)
            };
            let num = d.checked_add(p0)?.checked_add(p1)?.checked_sub(ek)?;
            if num < 0 {
                return None;
            }
            Some(if ceil {
                num.checked_add(st - 1)? / st + 1
            } else {
                num / st + 1
            })
        })();
        o.push(dim);
    }
    Some(o)
}

fn contrib_shape(node: &SNode, s: &dyn Fn(usize) -> Option<Shape>) -> Option<Shape> {
    match node.op.as_str() {
        // `diffusion_defs.cc`: GroupNorm and BiasAdd propagate input 0's shape, SkipGroupNorm
        // too (to both outputs, see `infer_node`); BiasSplitGelu halves the last dim of a
        // rank-3 input to the bias's length over two.
        "GroupNorm" | "BiasAdd" | "SkipGroupNorm" => s(0),
        "BiasSplitGelu" => {
            let (x, bias) = (s(0)?, s(1)?);
            if x.len() != 3 || bias.len() != 1 {
                return None;
            }
            Some(vec![x[0], x[1], bias[0].map(|d| d / 2)])
        }
        // `convPoolShapeInferenceNhwc` (`nhwc_schema_defs.cc`): the channels-first inference
        // of the input transposed to NCHW, its output transposed back to NHWC.
        "NhwcConv" => {
            let x = s(0)?;
            if x.len() < 3 {
                return None;
            }
            let mut nchw = vec![x[0], x[x.len() - 1]];
            nchw.extend_from_slice(&x[1..x.len() - 1]);
            let o = conv_pool_shape(node, nchw, Some(s(1)?))?;
            let mut nhwc = vec![o[0]];
            nhwc.extend_from_slice(&o[2..]);
            nhwc.push(o[1]);
            Some(nhwc)
        }
        "Attention" => {
            let x = s(0)?;
            if x.len() != 3 {
                return None;
            }
            let hidden = match node.attr_ints("qkv_hidden_sizes") {
                Some(q) if q.len() == 3 => Some(q[2]),
                _ => s(2)
                    .and_then(|b| b.first().copied().flatten())
                    .or_else(|| s(1).and_then(|w| w.get(1).copied().flatten()))
                    .filter(|w| w % 3 == 0)
                    .map(|w| w / 3),
            };
            Some(vec![x[0], x[1], hidden])
        }
        // MatMulNBits: A with its last dim replaced by the `N` attribute (out_features).
        "MatMulNBits" => {
            let mut a = s(0)?;
            let last = a.last_mut()?;
            *last = node.attr_i("N").filter(|n| *n >= 0);
            Some(a)
        }
        // QGemm: A (input 0) and B (input 3), each of rank 2, transposed as `transA`/`transB` say.
        "QGemm" => gemm_shape(node, s(0)?, s(3)?),
        "EmbedLayerNormalization" => {
            let ids = s(0)?;
            if ids.len() != 2 {
                return None;
            }
            let width = s(2).and_then(|w| w.get(1).copied().flatten());
            Some(vec![ids[0], ids[1], width])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, since: i64, inputs: &[&str], outputs: usize) -> SNode {
        SNode::plain(
            Sym::EMPTY,
            op.into(),
            Sym::AI_ONNX,
            Some(since),
            inputs.iter().map(|&s| Sym::new(s)).collect(),
            (0..outputs).map(|i| Sym::new(&format!("o{i}"))).collect(),
        )
    }

    /// `infer_node` with owned input shapes.
    fn infer_owned(
        n: &SNode,
        shapes: &[Option<Shape>],
        values: &[Option<&Tensor>],
    ) -> Vec<Option<Shape>> {
        let refs: Vec<Option<&Shape>> = shapes.iter().map(Option::as_ref).collect();
        infer_node(n, &refs, values)
    }

    #[test]
    fn broadcast_and_matmul() {
        let a: Shape = vec![None, Some(1), Some(4)];
        let b: Shape = vec![Some(3), Some(1)];
        assert_eq!(broadcast(&[&a, &b]), vec![None, Some(3), Some(4)]);
        let n = node("MatMul", 13, &["a", "b"], 1);
        let out = infer_owned(
            &n,
            &[
                Some(vec![Some(2), None, Some(8)]),
                Some(vec![Some(8), Some(5)]),
            ],
            &[None, None],
        );
        assert_eq!(out[0], Some(vec![Some(2), None, Some(5)]));
    }

    #[test]
    fn qgemm_reads_a_and_b() {
        let mut n = node(
            "QGemm",
            1,
            &["a", "as", "az", "b", "bs", "bz", "", "ys", "yz"],
            1,
        );
        n.domain = "com.microsoft".into();
        let mut shapes: Vec<Option<Shape>> = vec![Some(Vec::new()); 9];
        shapes[0] = Some(vec![None, Some(10)]);
        shapes[3] = Some(vec![Some(10), Some(5)]);
        let out = infer_owned(&n, &shapes, &[None; 9]);
        assert_eq!(out[0], Some(vec![None, Some(5)]));
    }

    #[test]
    fn contrib_ops_keep_or_reshape_input_0() {
        let ms = |op: &str, inputs: &[&str], outputs: usize| {
            let mut n = node(op, 1, inputs, outputs);
            n.domain = "com.microsoft".into();
            n
        };
        let x: Shape = vec![None, Some(7), Some(64)];
        // MatMulNBits: A's leading dims, then N.
        let mut nbits = ms("MatMulNBits", &["a", "b", "s"], 1);
        nbits.attrs.push(crate::model::proto::AttributeProto {
            name: Some("N".into()),
            r#type: Some(crate::model::proto::attribute_proto::AttributeType::Int as i32),
            i: Some(192),
            ..Default::default()
        });
        let out = infer_owned(&nbits, &[Some(x.clone()), None, None], &[None; 3]);
        assert_eq!(out[0], Some(vec![None, Some(7), Some(192)]));
        // No N: the last dim is unknown, the rank kept.
        let bare = ms("MatMulNBits", &["a", "b", "s"], 1);
        let out = infer_owned(&bare, &[Some(x.clone()), None, None], &[None; 3]);
        assert_eq!(out[0], Some(vec![None, Some(7), None]));
        // QuickGelu and com.microsoft Gelu: input 0's shape.
        for op in ["QuickGelu", "Gelu"] {
            let out = infer_owned(&ms(op, &["x"], 1), &[Some(x.clone())], &[None]);
            assert_eq!(out[0], Some(x.clone()), "{op}");
        }
        // SkipLayerNormalization: output 0 and input_skip_bias_sum (3), not mean/inv_std_var.
        let skip = ms("SkipLayerNormalization", &["x", "s", "g"], 4);
        let out = infer_owned(&skip, &[Some(x.clone()), None, None], &[None; 3]);
        assert_eq!(out[0], Some(x.clone()));
        assert_eq!(out[1], None);
        assert_eq!(out[3], Some(x));
    }

    #[test]
    fn reshape_with_constant_shape() {
        let n = node("Reshape", 14, &["x", "s"], 1);
        let target = Tensor::i64_1d(vec![0, -1]);
        let out = infer_owned(
            &n,
            &[Some(vec![Some(2), Some(3), Some(4)]), Some(vec![Some(2)])],
            &[None, Some(&target)],
        );
        assert_eq!(out[0], Some(vec![Some(2), Some(12)]));
    }

    #[test]
    fn slice_and_unsqueeze() {
        let n = node("Slice", 13, &["x", "s", "e"], 1);
        let (st, en) = (Tensor::i64_1d(vec![1]), Tensor::i64_1d(vec![i64::MAX]));
        let out = infer_owned(
            &n,
            &[Some(vec![Some(5), None]), None, None],
            &[None, Some(&st), Some(&en)],
        );
        assert_eq!(out[0], Some(vec![Some(4), None]));
        let u = node("Unsqueeze", 13, &["x", "a"], 1);
        let axes = Tensor::i64_1d(vec![0]);
        let out = infer_owned(&u, &[Some(vec![]), None], &[None, Some(&axes)]);
        assert_eq!(out[0], Some(vec![Some(1)]));
    }
}
