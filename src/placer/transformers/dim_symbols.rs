//! The symbolic dims (`dim_param`) ORT's shape inference gives a graph's values: declared on
//! the graph's inputs, outputs and value_info and carried through the ops transformer layers
//! are made of. Used by fusions that compare dims by symbol (`SkipLayerNormFusion`,
//! `BiasSoftmaxFusion`) and by `ReshapeFusion`'s shape match.

use std::cell::RefCell;

use crate::sym::SymMap as HashMap;

use crate::session::Session;
use crate::sym::Sym;

/// A value's dim `i` as the memo keys it.
pub(crate) type Memo = RefCell<HashMap<(Sym, usize), Option<Sym>>>;

/// One graph's symbol tracer: its declared dims and a producer lookup.
pub(crate) struct Symbols<'a> {
    pub session: &'a Session,
    pub gi: usize,
    /// Declared symbolic dims per value (the main graph's; empty for subgraphs).
    pub params: &'a HashMap<Sym, Vec<Option<Sym>>>,
    pub producer: &'a dyn Fn(Sym) -> Option<usize>,
    pub memo: &'a Memo,
}

impl Symbols<'_> {
    /// The symbolic dim (`dim_param`) ONNX shape inference gives dim `i` of `v`: declared on
    /// the graph's inputs, outputs and value_info, and carried through the ops transformer
    /// layers are made of (element-wise ops with broadcasting, MatMul, Transpose, Reshape's
    /// copied 0 dims, normalisations, the fused nodes, Q/DQ and the QOperator `QLinearAdd`,
    /// `QLinearMul`, `QLinearMatMul`, `QLinearConcat` and unary ops, Split), as ORT's inference
    /// carries it.
    pub(crate) fn dim(&self, v: Sym, i: usize, depth: usize) -> Option<Sym> {
        if let Some(d) = self.params.get(&v) {
            return d.get(i).copied().flatten();
        }
        if depth > 200 {
            return None;
        }
        if let Some(hit) = self.memo.borrow().get(&(v, i)) {
            return *hit;
        }
        let g = &self.session.graphs[self.gi];
        let p = (self.producer)(v)?;
        let n = &g.nodes[p];
        let rank = |x: Sym| self.session.shape_of(self.gi, x).map(Vec::len);
        let out_rank = rank(v)?;
        let from = |x: Sym, j: usize| -> Option<Sym> {
            match self
                .session
                .shape_of(self.gi, x)
                .and_then(|s| s.get(j).copied())
            {
                Some(Some(_)) => None,
                _ => self.dim(x, j, depth + 1),
            }
        };
        let sym = match n.op.as_str() {
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Where" | "Equal" | "Less" | "Greater"
            | "And" | "Or" | "BiasGelu" | "Max" | "Min" | "Sum" | "QLinearAdd" | "QLinearMul" => {
                // Broadcast: every input with this dim either 1 or the same symbol
                // (QLinearAdd/QLinearMul: (a, a_scale, a_zero_point, b, ...), inputs 0 and 3).
                let inputs: Vec<Sym> = if n.op.starts_with("QLinear") {
                    vec![*n.inputs.first()?, *n.inputs.get(3)?]
                } else {
                    n.inputs.iter().filter(|x| !x.is_empty()).copied().collect()
                };
                let mut out: Option<Sym> = None;
                for x in inputs {
                    let r = rank(x)?;
                    if i + r < out_rank {
                        continue;
                    }
                    let j = i + r - out_rank;
                    match self
                        .session
                        .shape_of(self.gi, x)
                        .and_then(|s| s.get(j).copied())
                    {
                        Some(Some(1)) => continue,
                        Some(Some(_)) => return None,
                        _ => {}
                    }
                    let s = self.dim(x, j, depth + 1)?;
                    if out.is_some_and(|o| o != s) {
                        return None;
                    }
                    out = Some(s);
                }
                out
            }
            "MatMul"
            | "FusedMatMul"
            | "MatMulInteger"
            | "QLinearMatMul"
            | "MatMulIntegerToFloat"
            | "DynamicQuantizeMatMul" => {
                // QLinearMatMul: (a, a_scale, a_zero_point, b, ...); the fused
                // MatMulIntegerToFloat and DynamicQuantizeMatMul: (a, b, ...).
                let b_at = if n.op == "QLinearMatMul" { 3 } else { 1 };
                let (a, b) = (*n.inputs.first()?, *n.inputs.get(b_at)?);
                let (ra, rb) = (rank(a)?, rank(b)?);
                if i + 1 == out_rank {
                    from(b, rb.checked_sub(1)?)
                } else if i + 2 == out_rank {
                    from(a, ra.checked_sub(2)?)
                } else if i + ra >= out_rank {
                    from(a, i + ra - out_rank)
                } else {
                    None
                }
            }
            "Transpose" => {
                let perm = n.attr_ints("perm")?;
                let j = usize::try_from(*perm.get(i)?).ok()?;
                from(*n.inputs.first()?, j)
            }
            "Reshape" => {
                let shape = self.session.initializer(self.gi, *n.inputs.get(1)?)?;
                let values = crate::session::int_values(&shape.tensor)?;
                if values.get(i) == Some(&0) && n.attr_i("allowzero").unwrap_or(0) == 0 {
                    from(*n.inputs.first()?, i)
                } else {
                    None
                }
            }
            "Concat" => {
                // Off the concat axis every input has the dim; take the first symbol.
                let axis = n.attr_i("axis")?;
                let axis = usize::try_from(if axis < 0 {
                    axis + out_rank as i64
                } else {
                    axis
                })
                .ok()?;
                if i == axis {
                    None
                } else {
                    n.inputs
                        .iter()
                        .filter(|x| !x.is_empty())
                        .find_map(|&x| from(x, i))
                }
            }
            "Gather" => {
                // data[:axis] ++ indices.shape ++ data[axis + 1:]
                let (data, indices) = (*n.inputs.first()?, *n.inputs.get(1)?);
                let rd = rank(data)? as i64;
                let axis = n.attr_i("axis").unwrap_or(0);
                let axis = usize::try_from(if axis < 0 { axis + rd } else { axis }).ok()?;
                let ri = rank(indices)?;
                if i < axis {
                    from(data, i)
                } else if i < axis + ri {
                    from(indices, i - axis)
                } else {
                    from(data, i + 1 - ri)
                }
            }
            "Unsqueeze" => {
                // Axes from the input (opset 13+) or the attribute; the other dims shift.
                let axes: Vec<i64> = match n.inputs.get(1).filter(|a| !a.is_empty()) {
                    Some(a) => {
                        crate::session::int_values(&self.session.initializer(self.gi, *a)?.tensor)?
                    }
                    None => n.attr_ints("axes")?.to_vec(),
                };
                let rank = out_rank as i64;
                let mut axes: Vec<usize> = axes
                    .iter()
                    .map(|&a| usize::try_from(if a < 0 { a + rank } else { a }).ok())
                    .collect::<Option<_>>()?;
                axes.sort_unstable();
                if axes.contains(&i) {
                    None
                } else {
                    from(
                        *n.inputs.first()?,
                        i - axes.iter().filter(|&&a| a < i).count(),
                    )
                }
            }
            // ONNX's `convPoolShapeInference` (and the contrib `FusedConv`'s) keeps the batch dim;
            // the global poolings keep batch and channels.
            "Conv" | "FusedConv" | "MaxPool" | "AveragePool" | "LpPool" if i == 0 => {
                from(*n.inputs.first()?, 0)
            }
            "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
            | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" => {
                // The dims off the reduced axes (from the input at ReduceSum 13 and the others
                // at 18, else the attribute); none when every axis is reduced.
                let x = *n.inputs.first()?;
                let r = rank(x)? as i64;
                let axes: Vec<i64> = match n.inputs.get(1).filter(|a| !a.is_empty()) {
                    Some(a) => {
                        crate::session::int_values(&self.session.initializer(self.gi, *a)?.tensor)?
                    }
                    None => n.attr_ints("axes")?.to_vec(),
                };
                let axes: Vec<usize> = axes
                    .iter()
                    .map(|&a| usize::try_from(if a < 0 { a + r } else { a }).ok())
                    .collect::<Option<_>>()?;
                let kept: Vec<usize> = (0..r as usize).filter(|d| !axes.contains(d)).collect();
                if n.attr_i("keepdims").unwrap_or(1) != 0 {
                    kept.contains(&i).then(|| from(x, i)).flatten()
                } else {
                    kept.get(i).and_then(|&d| from(x, d))
                }
            }
            "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" if i < 2 => {
                from(*n.inputs.first()?, i)
            }
            "Expand" => {
                // ONNX's Expand inference broadcasts against the shape only when the shape is a
                // constant (ORT gives its inference no data propagation): a dim the constant
                // shape gives as 1 keeps the input's symbol; a shape built at run time from
                // `Shape` parts gives unknown dims. CPU wheel 1.31.1 keeps the ReshapeFusion
                // of `Reshape(Add(e, e), Concat(Unsqueeze(Gather(Shape(a), 0)), [-1]))` whose
                // `e = Expand(c, Concat(Unsqueeze(Gather(Shape(q), 0)), ..))` has `q`'s and
                // `a`'s `batch` at dim 0 (tools/realworld/shape_probes.py, `expand_symbol`).
                let shape = self
                    .session
                    .initializer(self.gi, *n.inputs.get(1)?)
                    .filter(|t| !t.overridable)?;
                let values = crate::session::int_values(&shape.tensor)?;
                let part = if i + values.len() >= out_rank {
                    values[i + values.len() - out_rank]
                } else {
                    1
                };
                let x = *n.inputs.first()?;
                let r = rank(x)?;
                (part == 1 && i + r >= out_rank)
                    .then(|| from(x, i + r - out_rank))
                    .flatten()
            }
            "Cast"
            | "Relu"
            | "Clip"
            | "LeakyRelu"
            | "HardSigmoid"
            | "HardSwish"
            | "Elu"
            | "Selu"
            | "Softplus"
            | "Softsign"
            | "BatchNormalization"
            | "Gelu"
            | "FastGelu"
            | "QuickGelu"
            | "Erf"
            | "Tanh"
            | "Sigmoid"
            | "Sqrt"
            | "Neg"
            | "Softmax"
            | "LayerNormalization"
            | "SkipLayerNormalization"
            | "SimplifiedLayerNormalization"
            | "SkipSimplifiedLayerNormalization"
            | "Identity"
            | "Dropout"
            | "BiasSoftmax"
            | "DynamicQuantizeLinear"
            | "QuantizeLinear"
            | "DequantizeLinear"
            | "QLinearSoftmax"
            | "QLinearSigmoid"
            | "QLinearLeakyRelu" => from(*n.inputs.first()?, i),
            "Split" => {
                // Every output keeps the input's dims off the split axis.
                let axis = n.attr_i("axis").unwrap_or(0);
                let axis = usize::try_from(if axis < 0 {
                    axis + out_rank as i64
                } else {
                    axis
                })
                .ok()?;
                if i == axis {
                    None
                } else {
                    from(*n.inputs.first()?, i)
                }
            }
            "QLinearConcat" => {
                // (Y_scale, Y_zero_point, then (x, x_scale, x_zero_point) per input): off the
                // concat axis as Concat.
                let axis = n.attr_i("axis")?;
                let axis = usize::try_from(if axis < 0 {
                    axis + out_rank as i64
                } else {
                    axis
                })
                .ok()?;
                if i == axis {
                    None
                } else {
                    n.inputs
                        .iter()
                        .skip(2)
                        .step_by(3)
                        .filter(|x| !x.is_empty())
                        .find_map(|&x| from(x, i))
                }
            }
            _ => None,
        };
        self.memo.borrow_mut().insert((v, i), sym);
        sym
    }
}
