//! Symbolic shapes over the session graph: every dim as a polynomial in the model's dim names
//! (`batch`, `seq`, `past+seq`), and the values of small integer tensors (the `Shape → Gather →
//! Concat` arithmetic of exported graphs) in the same terms.
//!
//! Dims are seeded from the main graph's declared inputs (`dim_param` names; an unnamed dim gets
//! an opaque symbol of its own) and carried through the ops exporters put between a `Shape` and
//! the `Reshape` it feeds: MatMul/Gemm, Transpose, elementwise ops, Slice, Gather, Concat,
//! Unsqueeze, Squeeze, Reshape, Split, reductions. Whatever an op does that is not modelled here
//! gets fresh symbols (or the session's static dims): never a wrong equality, only a lost one.
//! Two dims are equal when their polynomials are: dims named alike are the same dim, as ONNX
//! defines `dim_param`.
//!
//! The static inference ORT runs (`shapes.rs`) knows dims as numbers or nothing; this one keeps
//! what a dim is in the model's terms, which the findings need and ORT does not. It lives beside
//! the static one and shares its helpers (axes). Used by OL301 (the proof of a shape constant,
//! `shape_proof.rs`) and by the cost of copies (`bytes_expr`).

use std::collections::BTreeMap;
use std::fmt;

use crate::sym::SymMap as HashMap;

use crate::model::Model;
use crate::model::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::model::proto::type_proto::Value as TypeValue;
use crate::session::{SNode, Session, int_values};
use crate::sym::Sym;

/// Most terms a polynomial keeps; more and the dim is given up (a fresh symbol).
const MAX_TERMS: usize = 8;
/// Most symbols in one term.
const MAX_DEGREE: usize = 8;
/// Longest integer vector whose elements are tracked.
pub const MAX_VALUE_LEN: usize = 64;
/// Highest rank tracked.
const MAX_RANK: usize = 16;

/// A dim: a polynomial with integer coefficients over symbols (sorted monomials).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim(BTreeMap<Vec<String>, i64>);

impl Dim {
    pub fn konst(k: i64) -> Dim {
        let mut m = BTreeMap::new();
        if k != 0 {
            m.insert(Vec::new(), k);
        }
        Dim(m)
    }

    pub fn sym(name: &str) -> Dim {
        let mut m = BTreeMap::new();
        m.insert(vec![name.to_string()], 1);
        Dim(m)
    }

    /// The value when the dim is a constant.
    pub fn as_const(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    fn bounded(self) -> Option<Dim> {
        (self.0.len() <= MAX_TERMS && self.0.keys().all(|m| m.len() <= MAX_DEGREE)).then_some(self)
    }

    pub fn add(&self, o: &Dim) -> Option<Dim> {
        let mut m = self.0.clone();
        for (k, c) in &o.0 {
            let e = m.entry(k.clone()).or_insert(0);
            *e = e.checked_add(*c)?;
            if *e == 0 {
                m.remove(k);
            }
        }
        Dim(m).bounded()
    }

    pub fn neg(&self) -> Option<Dim> {
        let mut m = BTreeMap::new();
        for (k, c) in &self.0 {
            m.insert(k.clone(), c.checked_neg()?);
        }
        Some(Dim(m))
    }

    pub fn sub(&self, o: &Dim) -> Option<Dim> {
        self.add(&o.neg()?)
    }

    pub fn mul(&self, o: &Dim) -> Option<Dim> {
        let mut out = Dim::konst(0);
        for (ka, ca) in &self.0 {
            for (kb, cb) in &o.0 {
                let mut k: Vec<String> = ka.iter().chain(kb).cloned().collect();
                k.sort();
                let mut t = BTreeMap::new();
                t.insert(k, ca.checked_mul(*cb)?);
                out = out.add(&Dim(t).bounded()?)?;
            }
        }
        Some(out)
    }

    /// `self / o` when it divides exactly as polynomials (`o` a single term), as integer
    /// division of non-negative dims does.
    pub fn div_exact(&self, o: &Dim) -> Option<Dim> {
        if o.0.len() != 1 {
            return if self == o { Some(Dim::konst(1)) } else { None };
        }
        let (dk, dc) = o.0.iter().next()?;
        if *dc == 0 {
            return None;
        }
        let mut m = BTreeMap::new();
        for (k, c) in &self.0 {
            if c % dc != 0 {
                return None;
            }
            let mut rest = k.clone();
            for s in dk {
                let i = rest.iter().position(|r| r == s)?;
                rest.remove(i);
            }
            m.insert(rest, c / dc);
        }
        Some(Dim(m))
    }

    /// The value at `dims` (a symbol not given counts `default`); `None` when negative or
    /// overflowing.
    pub fn eval(&self, dims: &dyn Fn(&str) -> u64) -> Option<u64> {
        let mut total: i128 = 0;
        for (k, c) in &self.0 {
            let mut t = i128::from(*c);
            for s in k {
                t = t.checked_mul(i128::from(dims(s)))?;
            }
            total = total.checked_add(t)?;
        }
        u64::try_from(total).ok()
    }

    /// Provably non-negative: every symbol is a dim (≥ 0), so non-negative coefficients suffice.
    pub fn nonneg(&self) -> bool {
        self.0.values().all(|&c| c >= 0)
    }

    /// Whether the dim involves a symbol the analysis made up (an unnamed or lost dim): what
    /// it stands for is unknown.
    pub fn opaque(&self) -> bool {
        self.0.keys().flatten().any(|s| s.starts_with('?'))
    }

    /// Whether the dim has a sum of terms (printed in parentheses inside a product).
    fn is_sum(&self) -> bool {
        self.0.len() > 1
    }
}

/// The symbol's printed name: opaque symbols print as `?`; a name that is not a plain
/// identifier (`past_seq_len + seq_len`, as some exporters name dims) in parentheses.
fn sym_text(s: &str) -> String {
    if s.starts_with('?') {
        "?".into()
    } else if s
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    {
        s.into()
    } else {
        format!("({s})")
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("0");
        }
        // Symbolic terms first (in name order), the constant last: `past+seq`, `seq-1`.
        let mut terms: Vec<(&Vec<String>, &i64)> = self.0.iter().collect();
        terms.sort_by_key(|(k, _)| k.is_empty());
        for (i, (k, c)) in terms.into_iter().enumerate() {
            let neg = *c < 0;
            if i > 0 {
                f.write_str(if neg { "-" } else { "+" })?;
            } else if neg {
                f.write_str("-")?;
            }
            let a = c.unsigned_abs();
            let mut parts: Vec<String> = Vec::new();
            if a != 1 || k.is_empty() {
                parts.push(a.to_string());
            }
            parts.extend(k.iter().map(|s| sym_text(s)));
            f.write_str(&parts.join("·"))?;
        }
        Ok(())
    }
}

/// A product of dims as text: `2·batch·seq·64` (sums in parentheses).
pub fn product_text(factors: &[Dim]) -> String {
    factors
        .iter()
        .map(|d| {
            if d.is_sum() {
                format!("({d})")
            } else {
                d.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("·")
}

/// What is known of one value.
#[derive(Debug, Clone, Default)]
pub struct Info {
    pub shape: Option<Vec<Dim>>,
    /// The elements of a small integer tensor (scalar or 1-D), symbolically.
    pub value: Option<Vec<Dim>>,
}

/// Symbolic shapes and values of every value of every session graph.
#[derive(Debug, Default)]
pub struct Shapes {
    graphs: Vec<HashMap<Sym, Info>>,
    parents: Vec<Option<usize>>,
}

impl Shapes {
    pub fn info(&self, gi: usize, name: Sym) -> Option<&Info> {
        let mut g = gi;
        loop {
            if let Some(i) = self.graphs.get(g)?.get(&name) {
                return Some(i);
            }
            g = (*self.parents.get(g)?)?;
        }
    }

    pub fn shape(&self, gi: usize, name: Sym) -> Option<&[Dim]> {
        self.info(gi, name)?.shape.as_deref()
    }

    pub fn value(&self, gi: usize, name: Sym) -> Option<&[Dim]> {
        self.info(gi, name)?.value.as_deref()
    }
}

/// Infers the symbolic shapes of a session.
pub fn infer(model: &Model, s: &Session) -> Shapes {
    let mut out = Shapes {
        graphs: vec![HashMap::default(); s.graphs.len()],
        parents: s
            .graphs
            .iter()
            .map(|g| g.parent.map(|p| p.graph()))
            .collect(),
    };
    // Declared dims of the main graph's inputs.
    let mut declared: HashMap<Sym, Vec<Dim>> = HashMap::default();
    if let Some(g) = model.proto.graph.as_ref() {
        for vi in &g.input {
            let Some(TypeValue::TensorType(tt)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref())
            else {
                continue;
            };
            let Some(shape) = tt.shape.as_ref() else {
                continue;
            };
            if shape.dim.len() > MAX_RANK {
                continue;
            }
            let dims = shape
                .dim
                .iter()
                .enumerate()
                .map(|(i, d)| match &d.value {
                    Some(DimValue::DimValue(v)) if *v >= 0 => Dim::konst(*v),
                    Some(DimValue::DimParam(p)) if !p.is_empty() => Dim::sym(p),
                    _ => Dim::sym(&format!("?{}#{i}", vi.name())),
                })
                .collect();
            declared.insert(Sym::new(vi.name()), dims);
        }
    }
    for gi in 0..s.graphs.len() {
        let g = &s.graphs[gi];
        let mut map: HashMap<Sym, Info> = HashMap::default();
        for &name in &g.inputs {
            let shape = if gi == 0 {
                declared.get(&name).cloned()
            } else {
                None
            }
            .or_else(|| session_shape(s, gi, name));
            map.insert(name, Info { shape, value: None });
        }
        // Map inserts only: the order of the walk cannot reach the map's contents.
        for (&name, init) in &g.initializers {
            if init.overridable || init.dims.len() > MAX_RANK {
                continue;
            }
            let value = if init.dims.len() <= 1 {
                int_values(&init.tensor)
                    .filter(|v| v.len() <= MAX_VALUE_LEN)
                    .map(|v| v.into_iter().map(Dim::konst).collect())
            } else {
                None
            };
            map.insert(
                name,
                Info {
                    shape: Some(init.dims.iter().map(|&d| Dim::konst(d)).collect()),
                    value,
                },
            );
        }
        out.graphs[gi] = map;
        for ni in crate::infer::topological_order(s, gi) {
            let node = &g.nodes[ni];
            let infos = node_infos(&out, gi, node);
            for (k, &o) in node.outputs.iter().enumerate() {
                if o.is_empty() {
                    continue;
                }
                let mut info = infos.get(k).cloned().unwrap_or_default();
                info.shape = reconcile(info.shape, s.shape_of(gi, o), o);
                if let Some(graph) = out.graphs.get_mut(gi) {
                    graph.insert(o, info);
                }
            }
        }
    }
    out
}

/// Our shape against the session's static inference: a static dim the session knows wins over
/// a symbol; a shape only the session has gets fresh symbols for its unknown dims.
fn reconcile(
    ours: Option<Vec<Dim>>,
    session: Option<&Vec<Option<i64>>>,
    name: Sym,
) -> Option<Vec<Dim>> {
    match (ours, session) {
        (Some(mut d), Some(st)) if d.len() == st.len() => {
            for (x, y) in d.iter_mut().zip(st) {
                if let (None, Some(k)) = (x.as_const(), y) {
                    *x = Dim::konst(*k);
                }
            }
            Some(d)
        }
        (Some(d), None) => Some(d),
        (_, Some(st)) => Some(fresh(st, name)),
        (None, None) => None,
    }
}

fn fresh(st: &[Option<i64>], name: Sym) -> Vec<Dim> {
    st.iter()
        .enumerate()
        .map(|(i, d)| match d {
            Some(k) => Dim::konst(*k),
            None => Dim::sym(&format!("?{name}#{i}")),
        })
        .collect()
}

fn session_shape(s: &Session, gi: usize, name: Sym) -> Option<Vec<Dim>> {
    s.shape_of(gi, name)
        .filter(|d| d.len() <= MAX_RANK)
        .map(|d| fresh(d, name))
}

/// ONNX multidirectional broadcasting of two symbolic shapes; a pair it cannot decide (two
/// different symbols) gets `None` for that dim.
fn broadcast(shapes: &[&[Dim]]) -> Vec<Option<Dim>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let one = Dim::konst(1);
    (0..rank)
        .map(|i| {
            let mut acc: Option<Dim> = Some(one.clone());
            for s in shapes {
                let Some(d) = (i + s.len()).checked_sub(rank).and_then(|j| s.get(j)) else {
                    continue;
                };
                acc = match acc {
                    Some(a) if a == one => Some(d.clone()),
                    Some(a) if *d == one || *d == a => Some(a),
                    _ => None,
                };
            }
            acc
        })
        .collect()
}

/// An axis of a rank-`rank` shape, negative ones counted from the end (shared with the static
/// inference).
use super::shapes::norm_axis as normalize_axis;

const PASS_THROUGH: &[&str] = &[
    "Identity",
    "MemcpyFromHost",
    "MemcpyToHost",
    "Relu",
    "Gelu",
    "Erf",
    "Sqrt",
    "Neg",
    "Abs",
    "Exp",
    "Log",
    "Tanh",
    "Sigmoid",
    "Softmax",
    "LogSoftmax",
    "Not",
    "IsNaN",
    "IsInf",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Sin",
    "Cos",
    "Clip",
    "Dropout",
    "Cast",
    "CastLike",
    "LeakyRelu",
    "Elu",
    "Selu",
    "Celu",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Softsign",
    "Mish",
    "Trilu",
    "CumSum",
    "LayerNormalization",
    "SimplifiedLayerNormalization",
    "RMSNormalization",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "FastGelu",
    "BiasGelu",
    "QuickGelu",
    "RotaryEmbedding",
    "BatchNormalization",
    "InstanceNormalization",
    "Hardmax",
    "Shrink",
    "ThresholdedRelu",
    "BiasSoftmax",
];

const BROADCAST: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Where",
    "Max",
    "Min",
    "Mod",
    "Sum",
    "Mean",
    "PRelu",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
];

/// Whether a Cast keeps an integer value (a cast to an integer type).
fn int_type(to: i64) -> bool {
    use crate::model::DataType as D;
    [
        D::Int64,
        D::Int32,
        D::Int16,
        D::Int8,
        D::Uint64,
        D::Uint32,
        D::Uint16,
        D::Uint8,
    ]
    .iter()
    .any(|t| *t as i64 == to)
}

/// The outputs' infos of one node.
fn node_infos(sh: &Shapes, gi: usize, node: &SNode) -> Vec<Info> {
    let input = |i: usize| -> Option<&Info> {
        node.inputs
            .get(i)
            .filter(|n| !n.is_empty())
            .and_then(|n| sh.info(gi, *n))
    };
    let shape = |i: usize| input(i).and_then(|x| x.shape.clone());
    let value = |i: usize| input(i).and_then(|x| x.value.clone());
    let consts = |i: usize| -> Option<Vec<i64>> {
        value(i)?
            .iter()
            .map(Dim::as_const)
            .collect::<Option<Vec<_>>>()
    };
    let fresh_dim = |k: usize| {
        Dim::sym(&format!(
            "?{}#{k}",
            node.outputs.first().copied().unwrap_or(Sym::EMPTY)
        ))
    };
    let one = |shape: Option<Vec<Dim>>, value: Option<Vec<Dim>>| vec![Info { shape, value }];
    let op = node.op.as_str();
    if PASS_THROUGH.contains(&op) {
        let keep_value = match op {
            "Identity" | "MemcpyFromHost" | "MemcpyToHost" => true,
            "Cast" => node.attr_i("to").is_some_and(int_type),
            _ => false,
        };
        let v = if op == "Neg" {
            value(0).and_then(|v| v.iter().map(Dim::neg).collect())
        } else if keep_value {
            value(0)
        } else {
            None
        };
        if op.starts_with("Skip") {
            // Output 3 is the sum of the input and the skip, shaped like the input.
            let mut out = vec![Info::default(); node.outputs.len().max(1)];
            out[0].shape = shape(0);
            if let Some(o) = out.get_mut(3) {
                o.shape = shape(0);
            }
            return out;
        }
        return one(shape(0), v);
    }
    if BROADCAST.contains(&op) {
        let shapes: Option<Vec<Vec<Dim>>> = (0..node.inputs.len()).map(shape).collect();
        let out_shape = shapes.as_ref().map(|v| {
            let refs: Vec<&[Dim]> = v.iter().map(Vec::as_slice).collect();
            broadcast(&refs)
                .into_iter()
                .enumerate()
                .map(|(k, d)| d.unwrap_or_else(|| fresh_dim(k)))
                .collect::<Vec<_>>()
        });
        let v = elementwise_value(op, node, &value);
        return one(out_shape, v);
    }
    match op {
        "Shape" => {
            let Some(x) = shape(0) else {
                return one(None, None);
            };
            let rank = x.len() as i64;
            let clamp = |v: i64| {
                let v = if v < 0 { v + rank } else { v };
                v.clamp(0, rank) as usize
            };
            let start = clamp(node.attr_i("start").unwrap_or(0));
            let end = clamp(node.attr_i("end").unwrap_or(rank));
            let v: Vec<Dim> = x.get(start..end.max(start)).unwrap_or(&[]).to_vec();
            one(Some(vec![Dim::konst(v.len() as i64)]), Some(v))
        }
        "Size" => {
            let v = shape(0).and_then(|x| x.iter().try_fold(Dim::konst(1), |acc, d| acc.mul(d)));
            one(Some(Vec::new()), v.map(|d| vec![d]))
        }
        "MatMul" | "FusedMatMul" => {
            if op == "FusedMatMul"
                && (node.attr_i("transBatchA").unwrap_or(0) != 0
                    || node.attr_i("transBatchB").unwrap_or(0) != 0)
            {
                return one(None, None);
            }
            let (Some(mut a), Some(mut b)) = (shape(0), shape(1)) else {
                return one(None, None);
            };
            if op == "FusedMatMul" {
                if node.attr_i("transA").unwrap_or(0) != 0 && a.len() >= 2 {
                    let n = a.len();
                    a.swap(n - 1, n - 2);
                }
                if node.attr_i("transB").unwrap_or(0) != 0 && b.len() >= 2 {
                    let n = b.len();
                    b.swap(n - 1, n - 2);
                }
            }
            one(matmul(&a, &b, &fresh_dim), None)
        }
        "Gemm" => {
            let (Some(a), Some(b)) = (shape(0), shape(1)) else {
                return one(None, None);
            };
            if a.len() != 2 || b.len() != 2 {
                return one(None, None);
            }
            let m = if node.attr_i("transA").unwrap_or(0) != 0 {
                &a[1]
            } else {
                &a[0]
            };
            let n = if node.attr_i("transB").unwrap_or(0) != 0 {
                &b[0]
            } else {
                &b[1]
            };
            one(Some(vec![m.clone(), n.clone()]), None)
        }
        "Transpose" => {
            let Some(x) = shape(0) else {
                return one(None, None);
            };
            let perm: Vec<i64> = match node.attr_ints("perm") {
                Some(p) => p.to_vec(),
                None => (0..x.len() as i64).rev().collect(),
            };
            if perm.len() != x.len() {
                return one(None, None);
            }
            let out: Option<Vec<Dim>> = perm
                .iter()
                .map(|&p| usize::try_from(p).ok().and_then(|p| x.get(p).cloned()))
                .collect();
            one(out, None)
        }
        "Reshape" => {
            let target = value(1);
            let out = match (shape(0), target) {
                (Some(x), Some(t)) => reshape(&x, &t, node.attr_i("allowzero").unwrap_or(0) != 0),
                _ => None,
            };
            // A reshaped integer vector keeps its elements.
            let v = value(0).filter(|_| out.as_ref().is_some_and(|o| o.len() <= 1));
            one(out, v)
        }
        "Flatten" => {
            let Some(x) = shape(0) else {
                return one(None, None);
            };
            let axis = node.attr_i("axis").unwrap_or(1);
            let r = x.len() as i64;
            let a = if axis < 0 { axis + r } else { axis };
            if !(0..=r).contains(&a) {
                return one(None, None);
            }
            let (l, rr) = x.split_at(a as usize);
            let p = |d: &[Dim]| d.iter().try_fold(Dim::konst(1), |acc, x| acc.mul(x));
            one(p(l).zip(p(rr)).map(|(a, b)| vec![a, b]), None)
        }
        "Unsqueeze" | "Squeeze" => {
            let axes: Option<Vec<i64>> = match node.attr_ints("axes") {
                Some(a) => Some(a.to_vec()),
                None if node.inputs.get(1).is_some_and(|n| !n.is_empty()) => consts(1),
                None => Some(Vec::new()),
            };
            let (Some(x), Some(axes)) = (shape(0), axes) else {
                return one(None, value(0));
            };
            let out = if op == "Unsqueeze" {
                let r = x.len() + axes.len();
                let mut pos: Vec<usize> = Vec::new();
                for a in &axes {
                    match normalize_axis(*a, r) {
                        Some(p) if !pos.contains(&p) => pos.push(p),
                        _ => return one(None, value(0)),
                    }
                }
                let mut it = x.into_iter();
                (0..r)
                    .map(|i| {
                        if pos.contains(&i) {
                            Some(Dim::konst(1))
                        } else {
                            it.next()
                        }
                    })
                    .collect::<Option<Vec<_>>>()
            } else if axes.is_empty() {
                x.iter().all(|d| d.as_const().is_some()).then(|| {
                    x.iter()
                        .filter(|d| d.as_const() != Some(1))
                        .cloned()
                        .collect()
                })
            } else {
                let pos: Option<Vec<usize>> =
                    axes.iter().map(|a| normalize_axis(*a, x.len())).collect();
                pos.map(|p| {
                    x.iter()
                        .enumerate()
                        .filter(|(i, _)| !p.contains(i))
                        .map(|(_, d)| d.clone())
                        .collect()
                })
            };
            one(out, value(0))
        }
        "Concat" => {
            let shapes: Option<Vec<Vec<Dim>>> = (0..node.inputs.len()).map(shape).collect();
            let axis = node.attr_i("axis").unwrap_or(0);
            let out = shapes.and_then(|v| {
                let first = v.first()?.clone();
                let a = normalize_axis(axis, first.len())?;
                let mut out = first;
                for other in v.iter().skip(1) {
                    if other.len() != out.len() {
                        return None;
                    }
                    out[a] = out[a].add(other.get(a)?)?;
                }
                Some(out)
            });
            let v = (0..node.inputs.len())
                .map(value)
                .collect::<Option<Vec<_>>>()
                .map(|vs| vs.concat())
                .filter(|v| v.len() <= MAX_VALUE_LEN);
            one(out, v)
        }
        "Split" => {
            let n = node.outputs.len();
            let Some(x) = shape(0) else {
                return vec![Info::default(); n];
            };
            let Some(a) = normalize_axis(node.attr_i("axis").unwrap_or(0), x.len()) else {
                return vec![Info::default(); n];
            };
            let sizes: Option<Vec<Dim>> = match node.attr_ints("split") {
                Some(s) if !s.is_empty() => Some(s.iter().map(|&k| Dim::konst(k)).collect()),
                _ if node.inputs.get(1).is_some_and(|n| !n.is_empty()) => {
                    consts(1).map(|v| v.into_iter().map(Dim::konst).collect())
                }
                _ => i64::try_from(n)
                    .ok()
                    .and_then(|k| x.get(a)?.div_exact(&Dim::konst(k)))
                    .map(|d| vec![d; n]),
            };
            // A split integer vector (ORT's GatherToSplitFusion splits a `Shape`) keeps its
            // elements, piece by piece.
            let whole = value(0).filter(|v| x.len() == 1 && v.len() <= MAX_VALUE_LEN);
            // Where the next piece starts; lost at the first piece of unknown length.
            let mut at = Some(0usize);
            match sizes.filter(|s| s.len() == n) {
                Some(sizes) => sizes
                    .into_iter()
                    .map(|d| {
                        let start = at;
                        let end = start.zip(d.as_const().and_then(|k| usize::try_from(k).ok()));
                        at = end.and_then(|(s, len)| s.checked_add(len));
                        let piece = whole
                            .as_ref()
                            .zip(start.zip(at))
                            .and_then(|(v, (s, e))| v.get(s..e))
                            .map(<[Dim]>::to_vec);
                        let mut o = x.clone();
                        o[a] = d;
                        Info {
                            shape: Some(o),
                            value: piece,
                        }
                    })
                    .collect(),
                None => vec![Info::default(); n],
            }
        }
        "Slice" => slice(node, &shape, &value, &consts, &fresh_dim),
        "Gather" => {
            let (Some(x), Some(idx)) = (shape(0), shape(1)) else {
                return one(None, None);
            };
            let Some(a) = normalize_axis(node.attr_i("axis").unwrap_or(0), x.len()) else {
                return one(None, None);
            };
            let mut out = x[..a].to_vec();
            out.extend(idx.iter().cloned());
            out.extend(x[a + 1..].iter().cloned());
            let v = (a == 0 && x.len() == 1)
                .then(|| {
                    let data = value(0)?;
                    let ids = consts(1)?;
                    ids.iter()
                        .map(|&i| {
                            let len = data.len() as i64;
                            let i = if i < 0 { i + len } else { i };
                            usize::try_from(i).ok().and_then(|i| data.get(i).cloned())
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .flatten();
            one(Some(out), v)
        }
        "Range" => {
            let (Some(start), Some(limit), Some(delta)) = (value(0), value(1), value(2)) else {
                return one(None, None);
            };
            let (Some(start), Some(limit), Some(delta)) =
                (start.first(), limit.first(), delta.first())
            else {
                return one(None, None);
            };
            match (start.as_const(), limit.as_const(), delta.as_const()) {
                (Some(a), Some(b), Some(d)) if d != 0 => {
                    let n = if d > 0 {
                        (b - a + d - 1) / d
                    } else {
                        (a - b - d - 1) / (-d)
                    }
                    .max(0);
                    let v = (n <= MAX_VALUE_LEN as i64)
                        .then(|| (0..n).map(|i| Dim::konst(a + i * d)).collect());
                    one(Some(vec![Dim::konst(n)]), v)
                }
                // Step 1 over a provably non-negative span: `limit - start` elements.
                (_, _, Some(1)) => {
                    let n = limit.sub(start).filter(Dim::nonneg);
                    one(n.map(|n| vec![n]), None)
                }
                _ => one(None, None),
            }
        }
        "GatherElements" => one(shape(1), None),
        "Attention" if node.domain == Sym::AI_ONNX => attention(node, &shape),
        "Expand" => {
            let (Some(x), Some(t)) = (shape(0), value(1)) else {
                // The target's length gives the rank.
                let rank = shape(1)
                    .and_then(|t| t.first().and_then(Dim::as_const))
                    .zip(shape(0))
                    .and_then(|(n, x)| usize::try_from(n).ok().map(|n| n.max(x.len())))
                    .filter(|&r| r <= MAX_RANK);
                return one(rank.map(|r| (0..r).map(fresh_dim).collect()), None);
            };
            let out = broadcast(&[&x, &t])
                .into_iter()
                .enumerate()
                .map(|(k, d)| d.unwrap_or_else(|| fresh_dim(k)))
                .collect();
            one(Some(out), None)
        }
        "ConstantOfShape" => {
            let out = value(0);
            let v = out
                .as_ref()
                .filter(|o| o.len() == 1)
                .and_then(|o| o[0].as_const())
                .filter(|&n| (0..=MAX_VALUE_LEN as i64).contains(&n))
                .and_then(|n| {
                    let fill = node
                        .attr("value")
                        .and_then(|a| a.t.as_deref())
                        .and_then(int_values)
                        .and_then(|v| v.first().copied())?;
                    Some(vec![Dim::konst(fill); n as usize])
                });
            one(out, v)
        }
        "Tile" => {
            let (Some(x), Some(r)) = (shape(0), consts(1)) else {
                return one(None, None);
            };
            if r.len() != x.len() {
                return one(None, None);
            }
            let out = x
                .iter()
                .zip(&r)
                .map(|(d, k)| d.mul(&Dim::konst(*k)))
                .collect();
            one(out, None)
        }
        op if op.starts_with("Reduce") || op == "ArgMax" || op == "ArgMin" => {
            let Some(x) = shape(0) else {
                return one(None, None);
            };
            let keep = node.attr_i("keepdims").unwrap_or(1) != 0;
            let axes: Option<Vec<i64>> = match node.attr_ints("axes") {
                Some(a) => Some(a.to_vec()),
                None if op == "ArgMax" || op == "ArgMin" => {
                    Some(vec![node.attr_i("axis").unwrap_or(0)])
                }
                None if node.inputs.get(1).is_some_and(|n| !n.is_empty()) => consts(1),
                None => Some((0..x.len() as i64).collect()),
            };
            let Some(axes) = axes else {
                return one(None, None);
            };
            let pos: Option<Vec<usize>> =
                axes.iter().map(|a| normalize_axis(*a, x.len())).collect();
            let Some(pos) = pos else {
                return one(None, None);
            };
            let out = x
                .iter()
                .enumerate()
                .filter_map(|(i, d)| match (pos.contains(&i), keep) {
                    (false, _) => Some(d.clone()),
                    (true, true) => Some(Dim::konst(1)),
                    (true, false) => None,
                })
                .collect();
            one(Some(out), None)
        }
        _ => vec![Info::default(); node.outputs.len()],
    }
}

/// ONNX `Attention` (opset 23+): the output as Q with V's head size; the present key and value
/// as the past ones with the new sequence appended.
fn attention(node: &SNode, shape: &dyn Fn(usize) -> Option<Vec<Dim>>) -> Vec<Info> {
    let n = node.outputs.len();
    let mut out = vec![Info::default(); n];
    let (Some(q), Some(k), Some(v)) = (shape(0), shape(1), shape(2)) else {
        return out;
    };
    let heads = |name: &str| node.attr_i(name).map(Dim::konst);
    // [B, H, S, D] from a 3-D [B, S, H·D] input.
    let split = |x: &[Dim], h: Option<Dim>| -> Option<Vec<Dim>> {
        match x.len() {
            4 => Some(x.to_vec()),
            3 => {
                let h = h?;
                Some(vec![
                    x[0].clone(),
                    h.clone(),
                    x[1].clone(),
                    x[2].div_exact(&h)?,
                ])
            }
            _ => None,
        }
    };
    let (q4, k4, v4) = (
        split(&q, heads("q_num_heads")),
        split(&k, heads("kv_num_heads")),
        split(&v, heads("kv_num_heads")),
    );
    if let (Some(q4), Some(v4)) = (&q4, &v4) {
        out[0].shape = if q.len() == 4 {
            Some(vec![
                q4[0].clone(),
                q4[1].clone(),
                q4[2].clone(),
                v4[3].clone(),
            ])
        } else {
            q4[1]
                .mul(&v4[3])
                .map(|hd| vec![q[0].clone(), q[1].clone(), hd])
        };
    }
    for (o, new, past) in [(1usize, &k4, 4usize), (2, &v4, 5)] {
        if o >= n {
            continue;
        }
        let Some(new) = new else { continue };
        let total = match shape(past) {
            Some(p) if p.len() == 4 => p[2].add(&new[2]),
            Some(_) => None,
            None => Some(new[2].clone()),
        };
        out[o].shape = total.map(|t| vec![new[0].clone(), new[1].clone(), t, new[3].clone()]);
    }
    out
}

/// Elements of an elementwise op over integer vectors.
fn elementwise_value(
    op: &str,
    node: &SNode,
    value: &dyn Fn(usize) -> Option<Vec<Dim>>,
) -> Option<Vec<Dim>> {
    if op == "Where" {
        let (c, a, b) = (value(0)?, value(1)?, value(2)?);
        let n = c.len().max(a.len()).max(b.len());
        let pick = |v: &Vec<Dim>, i: usize| v.get(if v.len() == 1 { 0 } else { i }).cloned();
        return (0..n)
            .map(|i| match pick(&c, i)?.as_const()? {
                0 => pick(&b, i),
                _ => pick(&a, i),
            })
            .collect();
    }
    if node.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (value(0)?, value(1)?);
    if a.len() != b.len() && a.len() != 1 && b.len() != 1 {
        return None;
    }
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = a.get(if a.len() == 1 { 0 } else { i })?;
            let y = b.get(if b.len() == 1 { 0 } else { i })?;
            match op {
                "Add" => x.add(y),
                "Sub" => x.sub(y),
                "Mul" => x.mul(y),
                "Div" => match (x.as_const(), y.as_const()) {
                    (Some(p), Some(q)) if q != 0 => p.checked_div(q).map(Dim::konst),
                    _ => x.div_exact(y),
                },
                "Max" | "Min" | "Equal" | "Mod" => {
                    let (p, q) = (x.as_const(), y.as_const());
                    match (op, p, q) {
                        ("Max", Some(p), Some(q)) => Some(Dim::konst(p.max(q))),
                        ("Min", Some(p), Some(q)) => Some(Dim::konst(p.min(q))),
                        ("Equal", Some(p), Some(q)) => Some(Dim::konst(i64::from(p == q))),
                        ("Equal", _, _) if x == y => Some(Dim::konst(1)),
                        // A dim never equals a negative constant (`Equal(shape, -1)`).
                        ("Equal", None, Some(q)) if q < 0 && x.nonneg() => Some(Dim::konst(0)),
                        ("Equal", Some(p), None) if p < 0 && y.nonneg() => Some(Dim::konst(0)),
                        ("Mod", Some(p), Some(q)) if q != 0 => Some(Dim::konst(p.rem_euclid(q))),
                        _ => None,
                    }
                }
                _ => None,
            }
        })
        .collect()
}

fn matmul(a: &[Dim], b: &[Dim], fresh_dim: &dyn Fn(usize) -> Dim) -> Option<Vec<Dim>> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let a2: Vec<Dim> = if a.len() == 1 {
        vec![Dim::konst(1), a[0].clone()]
    } else {
        a.to_vec()
    };
    let b2: Vec<Dim> = if b.len() == 1 {
        vec![b[0].clone(), Dim::konst(1)]
    } else {
        b.to_vec()
    };
    let (ab, am) = a2.split_at(a2.len() - 2);
    let (bb, bn) = b2.split_at(b2.len() - 2);
    let batch = broadcast(&[ab, bb]);
    let mut out: Vec<Dim> = batch
        .into_iter()
        .enumerate()
        .map(|(k, d)| d.unwrap_or_else(|| fresh_dim(k)))
        .collect();
    if a.len() > 1 {
        out.push(am.first()?.clone());
    }
    if b.len() > 1 {
        out.push(bn.get(1)?.clone());
    }
    Some(out)
}

/// `Reshape`'s output shape: `0` copies the input's dim (unless `allowzero`), `-1` is what is
/// left of the total size.
pub fn reshape(x: &[Dim], target: &[Dim], allowzero: bool) -> Option<Vec<Dim>> {
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, t) in target.iter().enumerate() {
        match t.as_const() {
            Some(-1) => {
                if infer_at.replace(i).is_some() {
                    return None;
                }
                out.push(None);
            }
            Some(0) if !allowzero => out.push(Some(x.get(i)?.clone())),
            Some(k) if k < 0 => return None,
            _ => out.push(Some(t.clone())),
        }
    }
    if let Some(i) = infer_at {
        let total = x.iter().try_fold(Dim::konst(1), |acc, d| acc.mul(d))?;
        let known = out
            .iter()
            .flatten()
            .try_fold(Dim::konst(1), |acc, d| acc.mul(d))?;
        let d = total.div_exact(&known).or_else(|| {
            // Divide term by term when the known part is a product of single-term dims.
            out.iter()
                .flatten()
                .try_fold(total.clone(), |acc, d| acc.div_exact(d))
        })?;
        out[i] = Some(d);
    }
    out.into_iter().collect()
}

fn slice(
    node: &SNode,
    shape: &dyn Fn(usize) -> Option<Vec<Dim>>,
    value: &dyn Fn(usize) -> Option<Vec<Dim>>,
    consts: &dyn Fn(usize) -> Option<Vec<i64>>,
    fresh_dim: &dyn Fn(usize) -> Dim,
) -> Vec<Info> {
    let none = vec![Info::default()];
    let Some(x) = shape(0) else {
        return none;
    };
    let (starts, ends, axes, steps) = if node.attr_ints("starts").is_some() {
        (
            node.attr_ints("starts").map(<[i64]>::to_vec),
            node.attr_ints("ends").map(<[i64]>::to_vec),
            node.attr_ints("axes").map(<[i64]>::to_vec),
            None,
        )
    } else {
        let opt = |i: usize| {
            if node.inputs.get(i).is_some_and(|n| !n.is_empty()) {
                consts(i).map(Some)
            } else {
                Some(None)
            }
        };
        let (Some(st), Some(en), Some(ax), Some(sp)) = (consts(1), consts(2), opt(3), opt(4))
        else {
            // Bounds known only at run time: the sliced axes (all, when not given) are unknown,
            // the rank stays.
            let sliced: Option<Vec<usize>> = match opt(3) {
                Some(Some(ax)) => ax.iter().map(|&a| normalize_axis(a, x.len())).collect(),
                _ => None,
            };
            let out = (0..x.len())
                .map(|i| match &sliced {
                    Some(s) if !s.contains(&i) => x[i].clone(),
                    _ => fresh_dim(i),
                })
                .collect();
            return vec![Info {
                shape: Some(out),
                value: None,
            }];
        };
        (Some(st), Some(en), ax, sp)
    };
    let (Some(starts), Some(ends)) = (starts, ends) else {
        return none;
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if axes.len() != starts.len() || ends.len() != starts.len() || steps.len() != starts.len() {
        return none;
    }
    let mut out = x.clone();
    let mut val = value(0).filter(|_| x.len() == 1);
    for k in 0..starts.len() {
        let Some(a) = normalize_axis(axes[k], x.len()) else {
            return none;
        };
        let (st, en, sp) = (starts[k], ends[k], steps[k]);
        if sp == 0 {
            return none;
        }
        match out[a].as_const() {
            Some(len) => {
                // Static dim: ORT's clamping.
                let clamp = |v: i64, lo: i64, hi: i64| {
                    let v = if v < 0 { v.saturating_add(len) } else { v };
                    v.clamp(lo, hi)
                };
                let (b, e) = if sp > 0 {
                    (clamp(st, 0, len), clamp(en, 0, len))
                } else {
                    (clamp(st, 0, len - 1), clamp(en, -1, len - 1))
                };
                let n = if sp > 0 {
                    if e > b { (e - b + sp - 1) / sp } else { 0 }
                } else if b > e {
                    (b - e + (-sp) - 1) / (-sp)
                } else {
                    0
                };
                out[a] = Dim::konst(n);
                if let Some(v) = val.as_mut() {
                    let picked: Vec<Dim> = (0..n)
                        .filter_map(|i| {
                            let j = b + i * sp;
                            usize::try_from(j).ok().and_then(|j| v.get(j).cloned())
                        })
                        .collect();
                    *v = picked;
                }
            }
            None => {
                // Symbolic dim: only the whole range is exact.
                out[a] = if sp == 1 && st == 0 && en >= i64::from(i32::MAX) {
                    out[a].clone()
                } else {
                    fresh_dim(a)
                };
                val = None;
            }
        }
    }
    vec![Info {
        shape: Some(out),
        value: val,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomials() {
        let b = Dim::sym("batch");
        let s = Dim::sym("seq");
        let bs = b.mul(&s).expect("small polynomials");
        assert_eq!(bs.div_exact(&s), Some(b.clone()));
        assert_eq!(bs.div_exact(&Dim::konst(2)), None);
        let p = Dim::sym("past").add(&s).expect("small polynomials");
        assert_eq!(p.to_string(), "past+seq");
        assert_eq!(
            product_text(&[Dim::konst(2), b.clone(), p, Dim::konst(64)]),
            "2·batch·(past+seq)·64"
        );
        assert_eq!(
            s.sub(&Dim::konst(1))
                .expect("small polynomials")
                .to_string(),
            "seq-1"
        );
        let dims = |n: &str| if n == "seq" { 7 } else { 1 };
        assert_eq!(
            bs.mul(&Dim::konst(64))
                .expect("small polynomials")
                .eval(&dims),
            Some(448)
        );
    }

    #[test]
    fn equal_of_a_dim_and_a_negative_constant_is_false() {
        let node = SNode::plain(
            "eq".into(),
            "Equal".into(),
            Sym::AI_ONNX,
            Some(19),
            vec!["a".into(), "b".into()],
            vec!["y".into()],
        );
        let value = |i: usize| match i {
            0 => Some(vec![Dim::sym("batch"), Dim::konst(-1)]),
            _ => Some(vec![Dim::konst(-1)]),
        };
        assert_eq!(
            elementwise_value("Equal", &node, &value),
            Some(vec![Dim::konst(0), Dim::konst(1)])
        );
    }

    #[test]
    fn reshape_infers_minus_one_symbolically() {
        let x = [Dim::sym("b"), Dim::sym("s")];
        let t = [Dim::konst(-1), Dim::sym("s")];
        assert_eq!(
            reshape(&x, &t, false),
            Some(vec![Dim::sym("b"), Dim::sym("s")])
        );
        let t = [Dim::konst(0), Dim::konst(0), Dim::konst(0)];
        assert_eq!(reshape(&x, &t, false), None);
    }
}
