//! ORT's level-1 `TransposeOptimizer` (`core/optimizer/transpose_optimization/`:
//! `onnx_transpose_optimization.cc` with ORT's graph API `ort_optimizer_api_impl.cc` and its
//! extended handlers `ort_transpose_optimization.cc`), simulated for a graph whose nodes are not
//! yet assigned: every `Transpose` is pushed through the nodes that read it when ORT's rank-based
//! cost estimate says that it pays, cancelling against other Transposes or being merged with them.
//!
//! The simulation follows ORT's editing steps one by one because they decide names: new nodes are
//! named `GenerateNodeName(<op>)` (`Transpose`, `Transpose_token_7`, ...), their outputs
//! `<node>_out0`, a node whose output moves to a new node gets `GenerateNodeArgName(<node name>)`
//! (`_token_4` for an unnamed node), new initializers `const_transpose_optimizer...`; all draw on
//! the graph's one `_token_<k>` counter. The QDQ-specific parts (looking past `DequantizeLinear`,
//! the QDQ fix-up pass) are not simulated: a `DequantizeLinear` output counts as a plain value.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::infer::eval::Tensor;
use crate::infer::shapes::Values;
use crate::infer::{self, Type};
use crate::model::proto::{AttributeProto, attribute_proto::AttributeType};
use crate::session::{Init, NameGen, SNode, Session};
use crate::tables::KernelTable;

/// ORT's `kMinSupportedOpset`: older models are left alone.
const MIN_OPSET: i64 = 7;

/// How a node's inputs are chosen and handled (ORT's `HandlerInfo`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Handler {
    /// All inputs and outputs transposed (unary elementwise ops, `Cast`, ...).
    Simple,
    /// Broadcasting elementwise ops: non-scalar inputs, ranks normalised with `Unsqueeze`.
    Broadcast,
    /// Only the first input (`Clip`, `CastLike`).
    FirstInput,
    Transpose,
    Concat,
    Split,
    Shape,
    Pad,
    Reduce,
    ArgMinMax,
    Squeeze,
    Unsqueeze,
    Slice,
    Tile,
    SoftMax,
    QuantDequant,
    Reshape,
    /// A handler that exists but never pushes at level 1 (provider-dependent ones such as
    /// `MaxPool`/`Resize`, which need a CPU assignment, and the QLinear contrib ops).
    Never,
}

impl Handler {
    fn of(domain: &str, op: &str) -> Option<Handler> {
        use Handler::*;
        if domain == "com.microsoft" {
            return matches!(
                op,
                "QuantizeLinear"
                    | "DequantizeLinear"
                    | "QLinearAdd"
                    | "QLinearAveragePool"
                    | "QLinearConcat"
                    | "QLinearGlobalAveragePool"
                    | "QLinearLeakyRelu"
                    | "QLinearMul"
                    | "QLinearReduceMean"
                    | "QLinearSigmoid"
                    | "QLinearSoftmax"
            )
            .then_some(Never);
        }
        if domain != "ai.onnx" {
            return None;
        }
        Some(match op {
            "Cast" | "Exp" | "Gelu" | "Identity" | "LeakyRelu" | "Log" | "Reciprocal" | "Relu"
            | "Sigmoid" | "Sqrt" | "Tanh" | "Abs" | "Not" | "Ceil" | "Floor" | "Neg" | "Erf"
            | "HardSigmoid" | "Round" | "IsInf" | "IsNaN" | "Selu" | "Shrink" | "Sign"
            | "Softplus" | "Softsign" | "ThresholdedRelu" | "Celu" | "HardSwish" | "Sin"
            | "Cos" | "Tan" | "Sinh" | "Cosh" | "Asin" | "Acos" | "Atan" | "Asinh" | "Acosh"
            | "Atanh" => Simple,
            "Add" | "Max" | "Min" | "Mul" | "Sub" | "Div" | "And" | "Or" | "Xor" | "Mod"
            | "PRelu" | "BitShift" | "Equal" | "Greater" | "Less" | "GreaterOrEqual"
            | "LessOrEqual" | "Mean" | "Sum" | "Pow" | "Where" => Broadcast,
            "Clip" | "CastLike" => FirstInput,
            "Transpose" => Transpose,
            "Concat" => Concat,
            "Split" => Split,
            "Shape" => Shape,
            "Pad" => Pad,
            "ReduceLogSum" | "ReduceLogSumExp" | "ReduceMax" | "ReduceMean" | "ReduceMin"
            | "ReduceProd" | "ReduceSum" | "ReduceSumSquare" | "ReduceL1" | "ReduceL2" => Reduce,
            "ArgMin" | "ArgMax" => ArgMinMax,
            "Squeeze" => Squeeze,
            "Unsqueeze" => Unsqueeze,
            "Slice" => Slice,
            "Tile" => Tile,
            "Softmax" | "Hardmax" | "LogSoftmax" => SoftMax,
            "QuantizeLinear" | "DequantizeLinear" => QuantDequant,
            "Reshape" => Reshape,
            "MaxPool" | "Resize" => Never,
            _ => return None,
        })
    }

    /// Whether pushing through transposes the node's outputs.
    fn transposes_outputs(self) -> bool {
        !matches!(self, Handler::Transpose | Handler::Shape | Handler::Reshape)
    }
}

fn is_valid_perm(perm: &[i64]) -> bool {
    let r = perm.len();
    let mut used = vec![false; r];
    for &p in perm {
        match usize::try_from(p).ok().filter(|&p| p < r) {
            Some(p) if !used[p] => used[p] = true,
            _ => return false,
        }
    }
    true
}

fn invert(perm: &[i64]) -> Vec<i64> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    inv
}

/// `ComposePerm(p1, p2)`: `p1[p2[i]]`.
fn compose(p1: &[i64], p2: &[i64]) -> Vec<i64> {
    p2.iter().map(|&p| p1[p as usize]).collect()
}

fn is_identity(perm: &[i64]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| p == i as i64)
}

fn normalize_axis(axis: i64, rank: usize) -> Option<i64> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a)
}

fn normalize_axes(axes: &[i64], rank: usize) -> Option<Vec<i64>> {
    let mut used = vec![false; rank];
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = normalize_axis(a, rank)?;
        if used[a as usize] {
            return None;
        }
        used[a as usize] = true;
        out.push(a);
    }
    Some(out)
}

fn unsqueeze_perm(axes: &[i64], perm: &[i64]) -> Vec<i64> {
    let new_rank = perm.len() + axes.len();
    let mut added = vec![false; new_rank];
    for &a in axes {
        added[a as usize] = true;
    }
    let map: Vec<i64> = (0..new_rank)
        .filter(|&i| !added[i])
        .map(|i| i as i64)
        .collect();
    let mut j = 0;
    (0..new_rank)
        .map(|i| {
            if added[i] {
                i as i64
            } else {
                let p = perm[j] as usize;
                j += 1;
                map[p]
            }
        })
        .collect()
}

fn squeeze_perm(axes: &[i64], perm: &[i64]) -> Vec<i64> {
    let mut removed = vec![false; perm.len()];
    for &a in axes {
        removed[a as usize] = true;
    }
    let mut map = vec![0i64; perm.len()];
    let mut j = 0;
    for (i, m) in map.iter_mut().enumerate() {
        if !removed[i] {
            *m = j;
            j += 1;
        }
    }
    perm.iter()
        .filter(|&&p| !removed[p as usize])
        .map(|&p| map[p as usize])
        .collect()
}

fn sorted_axes_for_transposed_input(axes: &[i64], perm: &[i64]) -> Vec<i64> {
    let mut include = vec![false; perm.len()];
    for &a in axes {
        include[perm[a as usize] as usize] = true;
    }
    (0..perm.len() as i64)
        .filter(|&a| include[a as usize])
        .collect()
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// `Transpose` of a small dense tensor by `perm` (output dim i is input dim `perm[i]`).
fn transpose_tensor(t: &Tensor, perm: &[i64]) -> Option<Tensor> {
    use crate::infer::eval::Data;
    let r = t.dims.len();
    if perm.len() != r {
        return None;
    }
    let dims: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<_>>()?;
    let mut strides = vec![1usize; r];
    for i in (0..r.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p as usize]).collect();
    let n: usize = out_dims.iter().product();
    let mut src_index = Vec::with_capacity(n);
    let mut idx = vec![0usize; r];
    for _ in 0..n {
        src_index.push(
            idx.iter()
                .enumerate()
                .map(|(k, &i)| i * strides[perm[k] as usize])
                .sum::<usize>(),
        );
        for k in (0..r).rev() {
            idx[k] += 1;
            if idx[k] < out_dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    let data = match &t.data {
        Data::Int(v) => Data::Int(src_index.iter().map(|&i| v[i]).collect()),
        Data::Float(v) => Data::Float(src_index.iter().map(|&i| v[i]).collect()),
    };
    Some(Tensor {
        elem: t.elem,
        dims: out_dims.iter().map(|&d| d as i64).collect(),
        data,
    })
}

/// The optimiser's state over one graph.
struct Opt<'s> {
    session: &'s mut Session,
    gi: usize,
    table: &'s KernelTable,
    versions: &'s HashMap<String, i64>,
    values: &'s mut Values,
    opset: i64,
    /// Built on first use: it reads every name of the graph, and most passes add nothing.
    names: Option<NameGen>,
    generated: Vec<String>,
    producer: HashMap<String, usize>,
    uses: HashMap<String, Vec<usize>>,
    outputs: HashSet<String>,
}

/// Runs the transpose optimizer over graph `gi` and, afterwards, its subgraphs (as ORT's
/// `TransposeOptimizer::ApplyImpl` recurses). Returns whether anything changed.
pub fn run(
    session: &mut Session,
    gi: usize,
    table: &KernelTable,
    versions: &HashMap<String, i64>,
    values: &mut Values,
    order: &[usize],
) -> bool {
    let opset = versions.get("ai.onnx").copied().unwrap_or(0);
    let mut changed = false;
    if (MIN_OPSET..=max_supported_opset(table)).contains(&opset)
        && session.graphs[gi]
            .live_nodes()
            .any(|(_, n)| n.op == "Transpose")
    {
        let mut opt = Opt {
            gi,
            table,
            versions,
            values,
            opset,
            names: None,
            generated: Vec::new(),
            producer: HashMap::default(),
            uses: HashMap::default(),
            outputs: session.graphs[gi].outputs.iter().cloned().collect(),
            session,
        };
        opt.index();
        changed = opt.optimize(order);
        let g = &mut opt.session.graphs[gi];
        if let Some(names) = &opt.names {
            g.name_counter = names.counter;
        }
        g.generated_names.extend(opt.generated);
    }
    changed
}

/// ORT's `kMaxSupportedOpset` for the release: the transpose optimizer skips models above it.
fn max_supported_opset(table: &KernelTable) -> i64 {
    table.max_opset("ai.onnx").unwrap_or(0)
}

impl Opt<'_> {
    fn index(&mut self) {
        let g = &self.session.graphs[self.gi];
        for (i, n) in g.live_nodes() {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                self.producer.insert(o.clone(), i);
            }
            for x in n.inputs.iter().chain(&n.implicit_inputs) {
                if !x.is_empty() {
                    self.uses.entry(x.clone()).or_default().push(i);
                }
            }
        }
    }

    /// The graph's name generator (ORT's `GenerateNodeName`/`GenerateNodeArgName`).
    fn names(&mut self) -> &mut NameGen {
        let (session, gi) = (&*self.session, self.gi);
        self.names.get_or_insert_with(|| {
            let mut names = NameGen::new(&session.graphs[gi]);
            names.reserve_value("");
            names
        })
    }

    fn node(&self, n: usize) -> &SNode {
        &self.session.graphs[self.gi].nodes[n]
    }

    fn node_mut(&mut self, n: usize) -> &mut SNode {
        &mut self.session.graphs[self.gi].nodes[n]
    }

    fn producer(&self, name: &str) -> Option<usize> {
        self.producer
            .get(name)
            .copied()
            .filter(|&p| !self.node(p).removed && self.node(p).outputs.iter().any(|o| o == name))
    }

    /// Live nodes that read `name` explicitly, in index order, and whether that list is all
    /// (ORT's `comprehensive`: no subgraph reads it and it is no graph output).
    fn consumers(&self, name: &str) -> (Vec<usize>, bool) {
        let mut out: Vec<usize> = Vec::new();
        let mut comprehensive = !self.outputs.contains(name);
        if let Some(l) = self.uses.get(name) {
            for &k in l {
                let n = self.node(k);
                if n.removed || out.contains(&k) {
                    continue;
                }
                if n.implicit_inputs.iter().any(|i| i == name) {
                    comprehensive = false;
                }
                if n.inputs.iter().any(|i| i == name) {
                    out.push(k);
                }
            }
        }
        out.sort_unstable();
        (out, comprehensive)
    }

    fn has_consumers(&self, name: &str) -> bool {
        if self.outputs.contains(name) {
            return true;
        }
        self.uses.get(name).is_some_and(|l| {
            l.iter().any(|&k| {
                let n = self.node(k);
                !n.removed && n.inputs.iter().chain(&n.implicit_inputs).any(|i| i == name)
            })
        })
    }

    fn set_input(&mut self, n: usize, i: usize, name: &str) {
        let node = self.node_mut(n);
        while node.inputs.len() <= i {
            node.inputs.push(String::new());
        }
        node.inputs[i] = name.to_string();
        if !name.is_empty() {
            self.uses.entry(name.to_string()).or_default().push(n);
        }
    }

    fn remove_node(&mut self, n: usize) {
        self.node_mut(n).removed = true;
    }

    fn perm_of(&self, n: usize) -> Option<Vec<i64>> {
        let node = self.node(n);
        if node.op != "Transpose" || node.domain != "ai.onnx" {
            return None;
        }
        let perm = node.attr_ints("perm")?.to_vec();
        is_valid_perm(&perm).then_some(perm)
    }

    fn is_transpose(&self, n: usize) -> bool {
        let node = self.node(n);
        node.op == "Transpose" && node.domain == "ai.onnx"
    }

    fn shape(&self, name: &str) -> Option<Vec<Option<i64>>> {
        self.session.shape_of(self.gi, name).cloned()
    }

    /// ORT's `EstimateValueRank`: dims other than 1 (unknown counts), 5 when the rank is unknown.
    fn estimate_rank(&self, name: &str) -> i32 {
        match self.shape(name) {
            Some(s) => s.iter().filter(|d| **d != Some(1)).count() as i32,
            None => 5,
        }
    }

    fn set_shape(&mut self, name: &str, shape: Option<Vec<Option<i64>>>) {
        let g = &mut self.session.graphs[self.gi];
        match shape {
            Some(s) => {
                g.shapes.insert(name.to_string(), s);
            }
            None => {
                g.shapes.remove(name);
            }
        }
    }

    fn copy_value_info(&mut self, src: &str, dst: &str) {
        if let Some(t) = self.session.type_of(self.gi, src).cloned() {
            self.session.graphs[self.gi]
                .types
                .insert(dst.to_string(), t);
            let s = self.shape(src);
            self.set_shape(dst, s);
        }
    }

    fn permute_dims(&mut self, name: &str, perm: &[i64]) {
        if let Some(s) = self.shape(name)
            && s.len() == perm.len()
        {
            let p: Vec<Option<i64>> = perm.iter().map(|&i| s[i as usize]).collect();
            self.set_shape(name, Some(p));
        }
    }

    fn local_constant(&self, name: &str) -> Option<&Init> {
        self.session.graphs[self.gi]
            .initializers
            .get(name)
            .filter(|i| !i.overridable)
    }

    fn constant_ints(&mut self, name: &str) -> Option<Vec<i64>> {
        if name.is_empty() {
            return None;
        }
        self.values
            .get(self.session, self.gi, name)
            .map(|t| t.as_i64())
    }

    fn is_constant(&self, name: &str) -> bool {
        self.producer(name).is_none()
            && self
                .session
                .initializer(self.gi, name)
                .is_some_and(|i| !i.overridable)
    }

    fn add_initializer(&mut self, t: Tensor) -> String {
        let name = self.names().value("const_transpose_optimizer");
        let g = &mut self.session.graphs[self.gi];
        g.types.insert(name.clone(), Type::Tensor(t.elem));
        g.shapes
            .insert(name.clone(), t.dims.iter().map(|&d| Some(d)).collect());
        g.init_order.push(name.clone());
        g.initializers.insert(
            name.clone(),
            Init {
                dims: t.dims.clone(),
                elem: t.elem,
                overridable: false,
                tensor: t.to_proto(&name),
            },
        );
        self.values.set(self.gi, &name, t);
        name
    }

    fn remove_initializer(&mut self, name: &str) {
        self.session.graphs[self.gi].initializers.remove(name);
        self.values.forget(self.gi, name);
    }

    /// Replaces initializer `name` by its transpose (or, when it is too large to hold here, by
    /// a tensor of the transposed shape with the same bytes: only its shape matters later).
    fn transpose_initializer(&mut self, name: &str, perm: &[i64]) {
        let value = self.values.get(self.session, self.gi, name);
        let g = &mut self.session.graphs[self.gi];
        let Some(init) = g.initializers.get_mut(name) else {
            return;
        };
        if init.dims.len() != perm.len() {
            return;
        }
        let dims: Vec<i64> = perm.iter().map(|&p| init.dims[p as usize]).collect();
        match value.and_then(|v| transpose_tensor(&v, perm)) {
            Some(t) => {
                init.tensor = t.to_proto(name);
                self.values.set(self.gi, name, t);
            }
            None => {
                init.tensor.dims = dims.clone();
                self.values.forget(self.gi, name);
            }
        }
        init.dims = dims.clone();
        g.shapes
            .insert(name.to_string(), dims.iter().map(|&d| Some(d)).collect());
    }

    fn reshape_initializer(&mut self, name: &str, dims: Vec<i64>) {
        let g = &mut self.session.graphs[self.gi];
        let Some(init) = g.initializers.get_mut(name) else {
            return;
        };
        init.tensor.dims = dims.clone();
        init.dims = dims.clone();
        g.shapes
            .insert(name.to_string(), dims.iter().map(|&d| Some(d)).collect());
        if let Some(mut v) = self
            .values
            .get(self.session, self.gi, name)
            .map(|t| (*t).clone())
        {
            v.dims = dims;
            self.values.set(self.gi, name, v);
        }
    }

    /// ORT's `ApiGraph::AddNode`: a node named `GenerateNodeName(op)` with outputs
    /// `GenerateNodeArgName(<name>_out<i>)`, appended to the graph.
    fn add_node(&mut self, op: &str, inputs: &[&str], outputs: usize) -> usize {
        let name = self.names().node(op);
        self.generated.push(name.clone());
        let outs: Vec<String> = (0..outputs)
            .map(|i| self.names().value(&format!("{name}_out{i}")))
            .collect();
        let since = infer::resolve_schema(self.table, self.versions, "ai.onnx", op)
            .ok()
            .map(|s| s.since);
        let index = self.session.graphs[self.gi].nodes.len();
        for o in &outs {
            self.producer.insert(o.clone(), index);
        }
        for i in inputs.iter().filter(|i| !i.is_empty()) {
            self.uses.entry(i.to_string()).or_default().push(index);
        }
        self.session.graphs[self.gi].nodes.push(SNode {
            name,
            op: op.to_string(),
            domain: "ai.onnx".into(),
            since,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outs,
            attrs: Vec::new(),
            subgraphs: Vec::new(),
            implicit_inputs: Vec::new(),
            ep: None,
            kernel: None,
            origin: None,
            removed: false,
        });
        index
    }

    fn set_attr(&mut self, n: usize, a: AttributeProto) {
        let node = self.node_mut(n);
        node.attrs.retain(|x| x.name() != a.name());
        node.attrs.push(a);
    }

    fn make_transpose(&mut self, input: &str, perm: &[i64]) -> usize {
        let t = self.add_node("Transpose", &[input], 1);
        self.set_attr(t, ints_attr("perm", perm));
        t
    }

    /// ORT's `MoveOutput`: `dst` takes output `si` of `src`, which gets a fresh name.
    fn move_output(&mut self, src: usize, si: usize, dst: usize, di: usize) {
        let name = self.node(src).outputs[si].clone();
        let fresh = {
            let base = self.node(src).name.clone();
            self.names().value(&base)
        };
        let d = self.node_mut(dst);
        while d.outputs.len() <= di {
            d.outputs.push(String::new());
        }
        d.outputs[di] = name.clone();
        self.producer.insert(name, dst);
        self.node_mut(src).outputs[si] = fresh.clone();
        self.producer.insert(fresh, src);
    }

    fn replace_references(&mut self, nodes: &[usize], old: &str, new: &str) {
        for &n in nodes {
            let positions: Vec<usize> = self
                .node(n)
                .inputs
                .iter()
                .enumerate()
                .filter(|(_, i)| *i == old)
                .map(|(k, _)| k)
                .collect();
            for k in positions {
                self.set_input(n, k, new);
            }
        }
    }

    // ------------------------------------------------------------------ core helpers

    /// ORT's `TransposeInputImpl`: input `i` of `node` becomes its transpose by `perm`.
    fn transpose_input(&mut self, node: usize, i: usize, perm: &[i64], perm_inv: &[i64]) {
        let input = self.node(node).inputs[i].clone();
        if input.is_empty() {
            return;
        }
        let constant = self
            .local_constant(&input)
            .map(|c| (c.dims.clone(), c.elements()));
        self.set_input(node, i, "");
        let (consumers, comprehensive) = self.consumers(&input);
        // Case 1: a constant initializer is transposed in place.
        if let Some((dims, elements)) = constant
            && comprehensive
        {
            if elements == Some(1) {
                self.set_input(node, i, &input);
                return;
            }
            if dims.len() == 1 && dims[0] == perm.len() as i64 {
                // Permute1DConstant: a new, permuted initializer.
                let Some(v) = self.values.get(self.session, self.gi, &input) else {
                    self.set_input(node, i, &input);
                    return;
                };
                let mut t = (*v).clone();
                if let Some(p) = permute_1d(&t, perm) {
                    t = p;
                }
                let name = self.add_initializer(t);
                self.set_input(node, i, &name);
                if !self.has_consumers(&input) {
                    self.remove_initializer(&input);
                }
                return;
            }
            if !consumers.is_empty() {
                let t = self.make_transpose(&input, perm_inv);
                let out = self.node(t).outputs[0].clone();
                self.copy_value_info(&input, &out);
                self.replace_references(&consumers, &input, &out);
            }
            self.transpose_initializer(&input, perm);
            self.set_input(node, i, &input);
            return;
        }
        // Case 2: the input is a Transpose: cancel or compose.
        if let Some(p) = self.producer(&input)
            && let Some(perm2) = self.perm_of(p)
            && perm2.len() == perm.len()
        {
            let pre = self.node(p).inputs.first().cloned().unwrap_or_default();
            if perm2 == perm_inv {
                self.set_input(node, i, &pre);
                if comprehensive && consumers.is_empty() {
                    self.remove_node(p);
                }
                return;
            }
            let combined = compose(&perm2, perm);
            let t = self.make_transpose(&pre, &combined);
            let out = self.node(t).outputs[0].clone();
            self.copy_value_info(&input, &out);
            self.permute_dims(&out, perm);
            if comprehensive && consumers.is_empty() {
                self.remove_node(p);
            }
            self.set_input(node, i, &out);
            return;
        }
        // Case 3: a Transpose with the same perm already reads the input.
        for &c in &consumers {
            if self.perm_of(c).as_deref() == Some(perm) {
                let out = self.node(c).outputs[0].clone();
                self.set_input(node, i, &out);
                return;
            }
        }
        // Case 4: a new Transpose.
        let t = self.make_transpose(&input, perm);
        let out = self.node(t).outputs[0].clone();
        self.copy_value_info(&input, &out);
        self.permute_dims(&out, perm);
        self.set_input(node, i, &out);
    }

    fn transpose_inputs(&mut self, node: usize, perm: &[i64], indices: &[usize]) {
        let inv = invert(perm);
        for &j in indices {
            self.transpose_input(node, j, perm, &inv);
        }
    }

    /// ORT's `TransposeOutput`: a Transpose by `perm` after output `i`, which keeps its name.
    fn transpose_output(
        &mut self,
        node: usize,
        i: usize,
        perm: &[i64],
        perm_inv: &[i64],
    ) -> String {
        let t = self.make_transpose("", perm);
        self.move_output(node, i, t, 0);
        let new_output = self.node(node).outputs[i].clone();
        self.set_input(t, 0, &new_output);
        let old_output = self.node(t).outputs[0].clone();
        self.copy_value_info(&old_output, &new_output);
        self.permute_dims(&new_output, perm_inv);
        old_output
    }

    fn transpose_outputs(&mut self, node: usize, perm: &[i64]) {
        if is_identity(perm) {
            return;
        }
        let inv = invert(perm);
        for j in 0..self.node(node).outputs.len() {
            self.transpose_output(node, j, perm, &inv);
        }
    }

    /// ORT's `UnsqueezeInput`.
    fn unsqueeze_input(&mut self, node: usize, i: usize, axes: &[i64]) {
        let input = self.node(node).inputs[i].clone();
        let constant = self.local_constant(&input).map(|c| c.dims.clone());
        self.set_input(node, i, "");
        let (consumers, comprehensive) = self.consumers(&input);
        if let Some(dims) = constant
            && comprehensive
        {
            if !consumers.is_empty() {
                let sq = self.make_squeeze_or_unsqueeze("Squeeze", &input, axes);
                let out = self.node(sq).outputs[0].clone();
                self.copy_value_info(&input, &out);
                self.replace_references(&consumers, &input, &out);
            }
            let shape: Vec<Option<i64>> = dims.iter().map(|&d| Some(d)).collect();
            if let Some(new) = crate::infer::eval::unsqueeze_dims(&shape, axes) {
                self.reshape_initializer(&input, new.iter().map(|d| d.unwrap_or(1)).collect());
            }
            self.set_input(node, i, &input);
            return;
        }
        let inp_node = self.producer(&input);
        if let Some(p) = inp_node {
            let pn = self.node(p);
            if pn.op == "Squeeze" && pn.domain == "ai.onnx" {
                let pre = pn.inputs.first().cloned().unwrap_or_default();
                let axes_in = pn.inputs.get(1).cloned().unwrap_or_default();
                if self.read_axes(p, 1, 13).as_deref() == Some(axes) {
                    self.set_input(node, i, &pre);
                    if comprehensive && consumers.is_empty() {
                        self.remove_node(p);
                        if self.opset >= 13 && !axes_in.is_empty() && !self.has_consumers(&axes_in)
                        {
                            self.remove_initializer(&axes_in);
                        }
                    }
                    return;
                }
            }
        }
        let unsq = self.make_squeeze_or_unsqueeze("Unsqueeze", &input, axes);
        let out = self.node(unsq).outputs[0].clone();
        self.copy_value_info(&input, &out);
        if let Some(s) = self.shape(&out)
            && let Some(u) = crate::infer::eval::unsqueeze_dims(&s, axes)
        {
            self.set_shape(&out, Some(u));
        }
        if let Some(p) = inp_node
            && let Some(perm) = self.perm_of(p)
        {
            let inv = invert(&perm);
            let new_input = self.help_handle_unsqueeze(unsq, &inv, &perm, axes);
            self.set_input(node, i, &new_input);
            return;
        }
        self.set_input(node, i, &out);
    }

    fn make_squeeze_or_unsqueeze(&mut self, op: &str, input: &str, axes: &[i64]) -> usize {
        if self.opset < 13 {
            let n = self.add_node(op, &[input], 1);
            self.set_attr(n, ints_attr("axes", axes));
            return n;
        }
        let init = self.add_initializer(Tensor::i64_1d(axes.to_vec()));
        self.add_node(op, &[input, &init], 1)
    }

    /// `ReadFromAttrOrInput`: the attribute below `opset`, else the constant input.
    fn read_axes(&mut self, n: usize, input: usize, opset: i64) -> Option<Vec<i64>> {
        if self.opset < opset {
            return self.node(n).attr_ints("axes").map(<[i64]>::to_vec);
        }
        let name = self.node(n).inputs.get(input).cloned()?;
        self.constant_ints(&name)
    }

    fn help_handle_unsqueeze(
        &mut self,
        node: usize,
        perm_inv: &[i64],
        perm: &[i64],
        axes: &[i64],
    ) -> String {
        self.transpose_inputs(node, perm_inv, &[0]);
        let new_perm = unsqueeze_perm(axes, perm);
        let inv = invert(&new_perm);
        self.transpose_output(node, 0, &new_perm, &inv)
    }

    fn normalize_input_ranks(&mut self, node: usize, rank: usize, indices: &[usize]) -> bool {
        let mut ranks = Vec::with_capacity(indices.len());
        for &i in indices {
            let name = self.node(node).inputs[i].clone();
            match self.shape(&name) {
                Some(s) if s.len() <= rank => ranks.push(s.len()),
                _ => return false,
            }
        }
        for (k, &r) in ranks.iter().enumerate() {
            if r < rank {
                let axes: Vec<i64> = (0..(rank - r) as i64).collect();
                self.unsqueeze_input(node, indices[k], &axes);
            }
        }
        true
    }

    // ------------------------------------------------------------------ cost model

    fn can_likely_remove_transpose(&self, t: usize) -> bool {
        let out = &self.node(t).outputs[0];
        let (consumers, comprehensive) = self.consumers(out);
        comprehensive
            && consumers.iter().all(|&c| {
                let n = self.node(c);
                Handler::of(&n.domain, &n.op).is_some()
            })
    }

    fn value_cost(&self, input: &str, perm: &[i64]) -> i32 {
        if self.is_constant(input) {
            return 0;
        }
        if let Some(p) = self.producer(input)
            && self.is_transpose(p)
            && let Some(perm2) = self.perm_of(p)
        {
            return if perm2 == perm && self.can_likely_remove_transpose(p) {
                -self.estimate_rank(input)
            } else {
                0
            };
        }
        self.estimate_rank(input)
    }

    fn push_pays(
        &self,
        node: usize,
        perm: &[i64],
        handler: Handler,
        indices: &[usize],
        leading: &HashSet<String>,
    ) -> bool {
        if self.is_transpose(node) {
            return true;
        }
        let n = self.node(node);
        let mut cost: i32 = indices
            .iter()
            .map(|&j| self.value_cost(&n.inputs[j], perm))
            .sum();
        if cost < 0 && handler.transposes_outputs() {
            let mut out_cost = 0;
            let mut leads = false;
            for o in &n.outputs {
                out_cost = out_cost.max(self.estimate_rank(o));
                leads |= leading.contains(o);
            }
            if !leads {
                cost += out_cost;
            }
        }
        cost < 0
    }

    fn transposable_inputs(&self, node: usize, handler: Handler) -> Vec<usize> {
        let n = self.node(node);
        match handler {
            Handler::Simple | Handler::Concat => (0..n.inputs.len()).collect(),
            Handler::Broadcast => (0..n.inputs.len())
                .filter(|&i| self.shape(&n.inputs[i]).is_none_or(|s| !s.is_empty()))
                .collect(),
            _ => vec![0],
        }
    }

    // ------------------------------------------------------------------ the pass

    fn optimize(&mut self, order: &[usize]) -> bool {
        // Outputs with a path through supported ops to a Transpose (reverse order).
        let mut leading: HashSet<String> = HashSet::default();
        for &k in order.iter().rev() {
            let n = self.node(k);
            if n.removed {
                continue;
            }
            if n.op == "Transpose" && n.domain == "ai.onnx" {
                if let Some(i) = n.inputs.first() {
                    leading.insert(i.clone());
                }
                continue;
            }
            if !n.outputs.iter().any(|o| leading.contains(o)) {
                continue;
            }
            if let Some(h) = Handler::of(&n.domain, &n.op)
                && h.transposes_outputs()
            {
                for j in self.transposable_inputs(k, h) {
                    leading.insert(self.node(k).inputs[j].clone());
                }
            }
        }
        let mut changed = false;
        for &k in order {
            if self.node(k).removed {
                continue;
            }
            let inputs = self.node(k).inputs.clone();
            for (j, inp) in inputs.iter().enumerate() {
                if inp.is_empty() {
                    continue;
                }
                let Some(t) = self.producer(inp) else {
                    continue;
                };
                let Some(perm) = self.perm_of(t) else {
                    continue;
                };
                if self.process(t, k, &perm, j, &leading) {
                    changed = true;
                    break;
                }
            }
        }
        changed
    }

    /// ORT's `ProcessTranspose`.
    fn process(
        &mut self,
        t: usize,
        node: usize,
        perm: &[i64],
        index: usize,
        leading: &HashSet<String>,
    ) -> bool {
        let n = self.node(node);
        let Some(handler) = Handler::of(&n.domain, &n.op) else {
            return false;
        };
        let indices = self.transposable_inputs(node, handler);
        if !indices.contains(&index) {
            return false;
        }
        if !self.push_pays(node, perm, handler, &indices, leading) {
            return false;
        }
        let inv = invert(perm);
        self.handle(handler, t, node, perm, &inv, &indices)
    }

    fn handle(
        &mut self,
        h: Handler,
        t: usize,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        indices: &[usize],
    ) -> bool {
        let rank = perm.len();
        match h {
            Handler::Simple | Handler::FirstInput => self.simple(node, perm, inv, indices, false),
            Handler::Broadcast => self.simple(node, perm, inv, indices, true),
            Handler::Concat | Handler::Split => {
                let default = (h == Handler::Split).then_some(0);
                let Some(axis) = self.node(node).attr_i("axis").or(default) else {
                    return false;
                };
                let Some(axis) = normalize_axis(axis, rank) else {
                    return false;
                };
                if !self.simple(node, perm, inv, indices, false) {
                    return false;
                }
                self.set_attr(node, int_attr("axis", perm[axis as usize]));
                true
            }
            Handler::SoftMax => {
                if self.opset >= 13 {
                    let axis = self.node(node).attr_i("axis").unwrap_or(-1);
                    let Some(axis) = normalize_axis(axis, rank) else {
                        return false;
                    };
                    self.simple(node, perm, inv, indices, false);
                    self.set_attr(node, int_attr("axis", perm[axis as usize]));
                    return true;
                }
                let axis = self.node(node).attr_i("axis").unwrap_or(1);
                let Some(axis) = normalize_axis(axis, rank) else {
                    return false;
                };
                if (0..rank).any(|i| ((i as i64) < axis) != (perm[i] < axis)) {
                    return false;
                }
                self.simple(node, perm, inv, indices, false)
            }
            Handler::Transpose => {
                let Some(node_perm) = self.perm_of(node) else {
                    return false;
                };
                if node_perm.len() != rank {
                    return false;
                }
                self.handle_transpose_impl(t, node, perm, inv, &node_perm)
            }
            Handler::Reshape => self.handle_reshape(t, node, perm, inv),
            Handler::Shape => self.handle_shape(node, perm, inv, indices),
            Handler::Unsqueeze => {
                let Some(axes) = self.read_axes(node, 1, 13) else {
                    return false;
                };
                let Some(axes) = normalize_axes(&axes, rank + axes.len()) else {
                    return false;
                };
                self.help_handle_unsqueeze(node, inv, perm, &axes);
                true
            }
            Handler::Squeeze => {
                let Some(axes) = self.read_axes(node, 1, 13) else {
                    return false;
                };
                let Some(axes) = normalize_axes(&axes, rank) else {
                    return false;
                };
                let new_axes = sorted_axes_for_transposed_input(&axes, perm);
                if self.opset < 13 {
                    self.set_attr(node, ints_attr("axes", &new_axes));
                } else {
                    let old = self.node(node).inputs[1].clone();
                    let c = self.add_initializer(Tensor::i64_1d(new_axes.clone()));
                    self.set_input(node, 1, &c);
                    if !self.has_consumers(&old) {
                        self.remove_initializer(&old);
                    }
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, &squeeze_perm(&new_axes, perm));
                true
            }
            Handler::Reduce => self.handle_reduce(node, perm, inv),
            Handler::ArgMinMax => {
                let keepdims = self.node(node).attr_i("keepdims").unwrap_or(1);
                let axis = self.node(node).attr_i("axis").unwrap_or(0);
                let Some(axis) = normalize_axis(axis, rank) else {
                    return false;
                };
                let new_axis = perm[axis as usize];
                self.set_attr(node, int_attr("axis", new_axis));
                self.transpose_inputs(node, inv, indices);
                if keepdims != 0 {
                    self.transpose_outputs(node, perm);
                } else {
                    self.transpose_outputs(node, &squeeze_perm(&[new_axis], perm));
                }
                true
            }
            Handler::Slice => self.handle_slice(node, perm, inv),
            Handler::Tile => {
                let repeats = self.node(node).inputs.get(1).cloned().unwrap_or_default();
                if let Some(r) = self.constant_ints(&repeats) {
                    if r.len() != rank {
                        return false;
                    }
                    let new: Vec<i64> = inv.iter().map(|&p| r[p as usize]).collect();
                    let c = self.add_initializer(Tensor::i64_1d(new));
                    self.set_input(node, 1, &c);
                    if !self.has_consumers(&repeats) {
                        self.remove_initializer(&repeats);
                    }
                } else {
                    let c = self.add_initializer(Tensor::i64_1d(inv.to_vec()));
                    let g = self.add_node("Gather", &[&repeats, &c], 1);
                    self.set_attr(g, int_attr("axis", 0));
                    let out = self.node(g).outputs[0].clone();
                    self.copy_value_info(&repeats, &out);
                    self.set_input(node, 1, &out);
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, perm);
                true
            }
            Handler::Pad => {
                let mut pads_perm = inv.to_vec();
                pads_perm.extend(inv.iter().map(|&p| p + rank as i64));
                if self.opset < 11 {
                    let Some(pads) = self.node(node).attr_ints("pads").map(<[i64]>::to_vec) else {
                        return false;
                    };
                    if pads.len() != 2 * rank {
                        return false;
                    }
                    let new: Vec<i64> = pads_perm.iter().map(|&i| pads[i as usize]).collect();
                    self.set_attr(node, ints_attr("pads", &new));
                } else {
                    self.permute_input(node, 1, &pads_perm);
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, perm);
                true
            }
            Handler::QuantDequant => {
                if self.opset >= 13 {
                    let scale = self.node(node).inputs.get(1).cloned().unwrap_or_default();
                    let scalar = self.shape(&scale).is_some_and(|s| s.is_empty());
                    if !scalar {
                        let axis = self.node(node).attr_i("axis").unwrap_or(1);
                        let Some(axis) = normalize_axis(axis, rank) else {
                            return false;
                        };
                        self.set_attr(node, int_attr("axis", perm[axis as usize]));
                    }
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, perm);
                true
            }
            Handler::Never => false,
        }
    }

    /// `HandleSimpleNodeBase`.
    fn simple(
        &mut self,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        indices: &[usize],
        broadcast: bool,
    ) -> bool {
        if broadcast && !self.normalize_input_ranks(node, perm.len(), indices) {
            return false;
        }
        self.transpose_inputs(node, inv, indices);
        self.transpose_outputs(node, perm);
        true
    }

    /// `PermuteInput`: a 1-D input permuted, as a new initializer or through a `Gather`.
    fn permute_input(&mut self, node: usize, i: usize, perm: &[i64]) {
        let name = self.node(node).inputs.get(i).cloned().unwrap_or_default();
        if name.is_empty() {
            return;
        }
        if let Some(v) = self.values.get(self.session, self.gi, &name)
            && v.dims.len() == 1
            && (v.dims[0] == perm.len() as i64 || v.dims[0] == 0)
        {
            let t = permute_1d(&v, perm).unwrap_or_else(|| (*v).clone());
            let c = self.add_initializer(t);
            self.set_input(node, i, &c);
            if !self.has_consumers(&name) {
                self.remove_initializer(&name);
            }
            return;
        }
        let c = self.add_initializer(Tensor::i64_1d(perm.to_vec()));
        let g = self.add_node("Gather", &[&name, &c], 1);
        let out = self.node(g).outputs[0].clone();
        self.copy_value_info(&name, &out);
        self.set_attr(g, int_attr("axis", 0));
        self.set_input(node, i, &out);
    }

    fn handle_transpose_impl(
        &mut self,
        t: usize,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        node_perm: &[i64],
    ) -> bool {
        let t_in = self.node(t).inputs.first().cloned().unwrap_or_default();
        if inv == node_perm {
            // RemoveCancelingTransposeNodes.
            let node_out = self.node(node).outputs[0].clone();
            let (consumers, comprehensive) = self.consumers(&node_out);
            if comprehensive {
                self.replace_references(&consumers, &node_out, &t_in);
            } else {
                let (in_consumers, in_comprehensive) = self.consumers(&t_in);
                match self.producer(&t_in) {
                    Some(p) if in_comprehensive => {
                        self.set_input(node, 0, "");
                        self.replace_references(&in_consumers, &t_in, &node_out);
                        let i = self
                            .node(p)
                            .outputs
                            .iter()
                            .position(|o| *o == t_in)
                            .unwrap_or(0);
                        self.move_output(node, 0, p, i);
                    }
                    _ => {
                        let id = self.add_node("Identity", &[""], 1);
                        self.move_output(node, 0, id, 0);
                        self.set_input(id, 0, &t_in);
                    }
                }
            }
            self.remove_node(node);
            let t_out = self.node(t).outputs[0].clone();
            if !self.has_consumers(&t_out) {
                self.remove_node(t);
            }
            return true;
        }
        let new_perm = compose(perm, node_perm);
        let target = if self.node(node).op == "Reshape" {
            let n = self.add_node("Transpose", &[&t_in], 1);
            self.move_output(node, 0, n, 0);
            self.remove_node(node);
            n
        } else {
            self.set_input(node, 0, &t_in);
            node
        };
        self.set_attr(target, ints_attr("perm", &new_perm));
        let t_out = self.node(t).outputs[0].clone();
        if !self.has_consumers(&t_out) {
            self.remove_node(t);
        }
        true
    }

    /// `HandleReshape`: a Reshape that only moves dims of size 1 acts as a Transpose.
    fn handle_reshape(&mut self, t: usize, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let t_in = self.node(t).inputs[0].clone();
        let t_out = self.node(t).outputs[0].clone();
        let (Some(in_shape), Some(out_shape)) = (self.shape(&t_in), self.shape(&t_out)) else {
            return false;
        };
        let requested_name = self.node(node).inputs.get(1).cloned().unwrap_or_default();
        let Some(requested) = self.constant_ints(&requested_name) else {
            return false;
        };
        if requested.is_empty() || in_shape.len() != requested.len() {
            return false;
        }
        let allow_zero = self.node(node).since.unwrap_or(0) > 13
            && self.node(node).attr_i("allowzero").unwrap_or(0) != 0;
        let Some(input_dims) = out_shape.iter().copied().collect::<Option<Vec<i64>>>() else {
            return false;
        };
        let Some(final_shape) = finalize_reshape(&input_dims, &requested, allow_zero) else {
            return false;
        };
        let mut dims = input_dims.clone();
        let mut perms = Vec::with_capacity(final_shape.len());
        for &target in &final_shape {
            let mut cur = 0;
            while dims[cur] != target {
                if dims[cur] != -1 && dims[cur] != 1 && target != 1 {
                    return false;
                }
                cur += 1;
                if cur == dims.len() {
                    return false;
                }
            }
            perms.push(cur as i64);
            dims[cur] = -1;
        }
        self.handle_transpose_impl(t, node, perm, inv, &perms)
    }

    fn handle_shape(&mut self, node: usize, perm: &[i64], inv: &[i64], indices: &[usize]) -> bool {
        self.transpose_inputs(node, inv, indices);
        let rank = perm.len() as i64;
        let new_perm: Vec<i64> = if self.opset >= 15 {
            let n = self.node(node);
            let mut start = n.attr_i("start").unwrap_or(0);
            let mut end = n.attr_i("end").unwrap_or(rank);
            if start < 0 {
                start += rank;
            }
            if end < 0 {
                end += rank;
            }
            let s = start.clamp(0, rank) as usize;
            let e = end.clamp(0, rank) as usize;
            let v = perm
                .get(s..e.max(s))
                .map(<[i64]>::to_vec)
                .unwrap_or_default();
            self.node_mut(node)
                .attrs
                .retain(|a| a.name() != "start" && a.name() != "end");
            v
        } else {
            perm.to_vec()
        };
        let c = self.add_initializer(Tensor::i64_1d(new_perm.clone()));
        let g = self.add_node("Gather", &["", &c], 1);
        self.set_attr(g, int_attr("axis", 0));
        self.move_output(node, 0, g, 0);
        let new_output = self.node(node).outputs[0].clone();
        self.set_input(g, 0, &new_output);
        let g_out = self.node(g).outputs[0].clone();
        self.copy_value_info(&g_out, &new_output);
        if new_perm.len() != perm.len() {
            self.set_shape(&new_output, Some(vec![Some(rank)]));
        }
        true
    }

    fn handle_reduce(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let n = self.node(node);
        let keepdims = n.attr_i("keepdims").unwrap_or(1) != 0;
        let attr_axes =
            (n.op == "ReduceSum" && self.opset < 13) || (n.op != "ReduceSum" && self.opset < 18);
        if attr_axes {
            let axes = n.attr_ints("axes").map(<[i64]>::to_vec);
            let out_perm = match axes {
                None => {
                    if keepdims {
                        perm.to_vec()
                    } else {
                        Vec::new()
                    }
                }
                Some(axes) => {
                    let Some(axes) = normalize_axes(&axes, perm.len()) else {
                        return false;
                    };
                    let new_axes = sorted_axes_for_transposed_input(&axes, perm);
                    self.set_attr(node, ints_attr("axes", &new_axes));
                    if keepdims {
                        perm.to_vec()
                    } else {
                        squeeze_perm(&new_axes, perm)
                    }
                }
            };
            self.transpose_inputs(node, inv, &[0]);
            self.transpose_outputs(node, &out_perm);
            return true;
        }
        let axes_name = n.inputs.get(1).cloned().unwrap_or_default();
        let axes = if axes_name.is_empty() {
            Some(Vec::new())
        } else {
            self.constant_ints(&axes_name)
        };
        let Some(axes) = axes else {
            return false;
        };
        if axes.is_empty() {
            let noop = self.node(node).attr_i("noop_with_empty_axes").unwrap_or(0) != 0;
            self.transpose_inputs(node, inv, &[0]);
            if noop || keepdims {
                self.transpose_outputs(node, perm);
            }
            return true;
        }
        let Some(axes) = normalize_axes(&axes, perm.len()) else {
            return false;
        };
        let new_axes = sorted_axes_for_transposed_input(&axes, perm);
        let c = self.add_initializer(Tensor::i64_1d(new_axes.clone()));
        self.set_input(node, 1, &c);
        if !self.has_consumers(&axes_name) {
            self.remove_initializer(&axes_name);
        }
        self.transpose_inputs(node, inv, &[0]);
        if keepdims {
            self.transpose_outputs(node, perm);
        } else {
            self.transpose_outputs(node, &squeeze_perm(&new_axes, perm));
        }
        true
    }

    fn handle_slice(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let rank = perm.len();
        if self.opset < 10 {
            let n = self.node(node);
            let axes = match n.attr_ints("axes") {
                Some(a) => a.to_vec(),
                None => {
                    let k = n.attr_ints("starts").map_or(0, <[i64]>::len);
                    (0..k as i64).collect()
                }
            };
            let Some(axes) = normalize_axes(&axes, rank) else {
                return false;
            };
            let new_axes: Vec<i64> = axes.iter().map(|&a| perm[a as usize]).collect();
            self.set_attr(node, ints_attr("axes", &new_axes));
            self.transpose_inputs(node, inv, &[0]);
            self.transpose_outputs(node, perm);
            return true;
        }
        let inputs = self.node(node).inputs.clone();
        let axes_name = inputs.get(3).cloned().unwrap_or_default();
        if axes_name.is_empty() {
            let starts = inputs.get(1).cloned().unwrap_or_default();
            let Some(s) = self.shape(&starts) else {
                return false;
            };
            let elem = match self.session.type_of(self.gi, &starts) {
                Some(Type::Tensor(e)) => *e,
                _ => crate::model::DataType::Int64 as i32,
            };
            let [Some(k)] = s[..] else {
                return false;
            };
            let Some(k) = usize::try_from(k).ok().filter(|&k| k <= rank) else {
                return false;
            };
            let new_axes: Vec<i64> = perm[..k].to_vec();
            let c = self.add_initializer(Tensor::ints(elem, vec![k as i64], new_axes));
            self.set_input(node, 3, &c);
        } else {
            let Some(axes) = self.constant_ints(&axes_name) else {
                return false;
            };
            let elem = self
                .session
                .initializer(self.gi, &axes_name)
                .map_or(crate::model::DataType::Int64 as i32, |i| i.elem);
            let Some(axes) = normalize_axes(&axes, rank) else {
                return false;
            };
            let new_axes: Vec<i64> = axes.iter().map(|&a| perm[a as usize]).collect();
            let c = self.add_initializer(Tensor::ints(elem, vec![new_axes.len() as i64], new_axes));
            self.set_input(node, 3, &c);
            if !self.has_consumers(&axes_name) {
                self.remove_initializer(&axes_name);
            }
        }
        self.transpose_inputs(node, inv, &[0]);
        self.transpose_outputs(node, perm);
        true
    }
}

fn permute_1d(t: &Tensor, perm: &[i64]) -> Option<Tensor> {
    use crate::infer::eval::Data;
    if t.dims.len() != 1 || t.len() != perm.len() {
        return None;
    }
    let data = match &t.data {
        Data::Int(v) => Data::Int(perm.iter().map(|&p| v[p as usize]).collect()),
        Data::Float(v) => Data::Float(perm.iter().map(|&p| v[p as usize]).collect()),
    };
    Some(Tensor {
        elem: t.elem,
        dims: t.dims.clone(),
        data,
    })
}

/// `FinalizeReshapeShape`: the Reshape's output dims for a concrete input shape.
fn finalize_reshape(input: &[i64], requested: &[i64], allow_zero: bool) -> Option<Vec<i64>> {
    if input.iter().any(|&d| d < 0) || input.len() != requested.len() {
        return None;
    }
    let total: i64 = input.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?;
    let mut out = requested.to_vec();
    let mut unknown = None;
    let mut size = 1i64;
    for i in 0..requested.len() {
        if requested[i] == -1 {
            if unknown.is_some() {
                return None;
            }
            unknown = Some(i);
        } else {
            if !allow_zero && requested[i] == 0 {
                out[i] = input[i];
            }
            size = size.checked_mul(out[i])?;
        }
    }
    match unknown {
        Some(u) => {
            if size == 0 || total % size != 0 {
                return None;
            }
            out[u] = total / size;
        }
        None if size != total => return None,
        None => {}
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perms() {
        assert_eq!(invert(&[0, 2, 1, 3]), vec![0, 2, 1, 3]);
        assert_eq!(invert(&[2, 0, 1]), vec![1, 2, 0]);
        assert_eq!(unsqueeze_perm(&[0, 3], &[2, 0, 1]), vec![0, 4, 1, 3, 2]);
        assert_eq!(
            sorted_axes_for_transposed_input(&[0, 1], &[2, 0, 1]),
            vec![0, 2]
        );
        assert!(!is_valid_perm(&[0, 0]));
        assert_eq!(
            finalize_reshape(&[1, 512, 4, 1], &[1, 1, 512, 4], false),
            Some(vec![1, 1, 512, 4])
        );
    }

    #[test]
    fn transpose_small_tensor() {
        let t = Tensor::ints(7, vec![2, 3], vec![0, 1, 2, 3, 4, 5]);
        let r = transpose_tensor(&t, &[1, 0]).map(|t| (t.dims.clone(), t.as_i64()));
        assert_eq!(r, Some((vec![3, 2], vec![0, 3, 1, 4, 2, 5])));
    }
}
