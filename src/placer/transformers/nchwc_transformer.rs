//! ORT's `NchwcTransformer` (`onnxruntime/core/optimizer/nchwc_transformer.cc`): at level `all`
//! (ORT's level 3, after partitioning) the CPU's 2-D convolutions and poolings, and the
//! element-wise nodes between them, move to the blocked `NCHWc` layout of the
//! `com.microsoft.nchwc` domain, with `ReorderInput`/`ReorderOutput` nodes where the layout
//! changes. ORT registers it when MLAS has an NCHWc block size above 1: 16 with AVX-512F, 8 on
//! other x86-64 CPUs (`mlas/lib/platform.cpp`). The block size is
//! [`Options::nchwc_block`](crate::placer::Options::nchwc_block) (`[cpu] nchwc-block` in the
//! configuration), 16 by default, that of the machine the CPU-only truth of
//! `tests/fixtures/realworld/oracle/cpu-*` was recorded on; with 8, convolutions and poolings
//! whose channels are multiples of 8 but not 16 are converted as well, and channels are padded
//! to multiples of 8.
//!
//! Simulated as ORT walks it (one pass in ORT's topological order over the CPU nodes of each
//! graph, then `Finalize`): `Conv`/`FusedConv` with constant float 4-D weights (and bias) whose
//! channels fit the block (`<name>_nchwc`, a `ReorderInput` when the input is not already
//! NCHWc and has at least a block of channels, which must then be a multiple of 4),
//! `MaxPool`/`AveragePool` (and the global ones behind an NCHWc input) with block-aligned
//! channels, and, once all their inputs are NCHWc, `Add`/`Sum` (fused into a single-use
//! convolution, or reshaped when shapes cannot be shown equal: dims from the same source value,
//! or equal by ONNX inference's value or `dim_param`; one split and one unsplit `Reshape` shape
//! per graph, channels `-1`), `Mul` (from 1.25 also by a constant per-channel scale: a depthwise convolution), channel `Concat`, `Relu`/`Sigmoid`/`Tanh` (from 1.25 `HardSigmoid`
//! too; fused into a single-use convolution), from 1.25 the com.microsoft `QuickGelu`/`Gelu`
//! (layout kept, never fused), from 1.31 `HardSigmoid` + `Mul` behind a convolution (its
//! `HardSwish`), `BatchNormalization` (`<name>_bn_nchwc`), an NHWC `Transpose` (a
//! `ReorderOutput`) and nearest `Resize`/`Upsample` with integer scales. A `ReorderInput` whose
//! input comes from an NHWC-to-NCHW `Transpose` read by it alone reads the NHWC tensor instead
//! (`channels_last`) and the Transpose goes. Every NCHWc value still read in NCHW gets a
//! `ReorderOutput`. Names follow ORT's `GenerateNodeName`/
//! `GenerateNodeArgName` calls in order, on the graph's `_token_<k>` counter; the walk's order
//! depends on the indices the level-2 fusions gave their nodes ([`crate::placer::transformers::fusions`] walk
//! ORT's topological order too). Measured with the probes of `tests/fixtures/nchwc/probes/`
//! (`tools/realworld/nchwc_probes.py`, the CPU wheels 1.23.2 to 1.31.1) and the CPU-only truth of
//! the real-world corpora (rapidocr's PyPI models, a dynamo ResNet, the zoo's light Inception;
//! unseen3's timm/torchvision/tf2onnx convnets, whose CPU-only truth is block 16 too).

use crate::sym::SymMap as HashMap;

use crate::infer::Type;
use crate::model::DataType as D;
use crate::model::proto::AttributeProto;
use crate::model::proto::attribute_proto::AttributeType;
use crate::placer::OptLevel;
use crate::session::edit::Editor;
use crate::session::{EdgeEnd, Init, NameGen, SNode, Session};
use crate::sym::Sym;
use crate::tables::{Ep, KernelTable};

/// MLAS's NCHWc block size on the AVX-512 machine the CPU-only truth was recorded on, the
/// default of [`crate::placer::Options::nchwc_block`].
pub const RECORDED_BLOCK: u32 = 16;

/// This machine's MLAS NCHWc block size, as `MlasNchwcGetBlockSize` would report it for an
/// x86-64 ORT build (`mlas/lib/platform.cpp`: 8 from the SSE2 baseline up, 16 when the CPU and
/// the OS have AVX-512F); `None` on other architectures, where it depends on how ORT was built.
pub fn machine_block() -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        Some(if std::arch::is_x86_feature_detected!("avx512f") {
            16
        } else {
            8
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}
const NCHWC: Sym = Sym::COM_MICROSOFT_NCHWC;

/// One dim of an NCHWc value's symbolic shape: the value that sourced it, and for the spatial
/// dims how many times a stride of 2 halved it.
#[derive(Clone, PartialEq, Eq)]
struct Shape {
    dims: [Sym; 4],
    shifts: [usize; 2],
}

impl Shape {
    fn of(value: Sym) -> Shape {
        Shape {
            dims: [value; 4],
            shifts: [0, 0],
        }
    }

    fn dim_equal(&self, other: &Shape, d: usize) -> bool {
        self.dims[d] == other.dims[d] && (d < 2 || self.shifts[d - 2] == other.shifts[d - 2])
    }
}

/// ORT's `NchwcArgument`: the NCHWc form of an original value.
#[derive(Clone)]
struct Arg {
    /// The node producing the NCHWc value.
    node: usize,
    value: Sym,
    starting_uses: usize,
    remaining_uses: usize,
    channels: i64,
    shape: Shape,
}

struct Impl<'n> {
    gi: usize,
    /// MLAS's NCHWc block size.
    block: i64,
    /// ORT 1.25 or later: the newer since-versions are matched too (see [`Impl::versions`]).
    newer: bool,
    /// ORT 1.31 or later: `HardSigmoid` + `Mul` behind a convolution fuse as its `HardSwish`
    /// (measured: not in 1.28.0, in 1.31.1; 1.29 and 1.30 are taken to behave as 1.31).
    hard_swish: bool,
    /// Nodes an earlier fusion of the walk took (removed at `Finalize`, skipped until then).
    taken: crate::sym::SymSet<usize>,
    /// The graph's editor, built without an index: the walk looks values up in its own counts
    /// of the graph as it was (`reads`, `producers`), as ORT's does.
    ed: Editor,
    names: &'n mut NameGen,
    /// Original value → its NCHWc form, in creation order (ORT's `Finalize` walks a hash map;
    /// the names it generates do not depend on the order).
    args: Vec<(Sym, Arg)>,
    index: HashMap<Sym, usize>,
    reorder_inputs: HashMap<Sym, Sym>,
    filters: HashMap<(Sym, bool), Sym>,
    biases: HashMap<Sym, Sym>,
    /// The split and unsplit shape initializers (`[0, -1, 0, 0, block]`, `[0, -1, 0, 0]`): one
    /// each per graph, whatever the channels.
    reshape_shapes: HashMap<bool, Sym>,
    removed: Vec<usize>,
    /// Reading slots per value (ORT's output edges), of the graph as it was.
    reads: HashMap<Sym, usize>,
    producers: HashMap<Sym, usize>,
    outputs: crate::sym::SymSet<Sym>,
    /// The symbolic dims (`dim_param`) of the inputs of the graph's `Add`/`Sum` nodes, as ORT's
    /// shape inference left them before the walk (see [`symbols_of_sums`]).
    symbols: HashMap<Sym, [Option<Sym>; 4]>,
}

/// Applies the transformer to every graph. Returns whether it changed anything.
pub fn run(session: &mut Session, table: &KernelTable, level: OptLevel, block: u32) -> bool {
    // ORT registers the transformer only when MLAS has a block size above 1.
    if level < OptLevel::All || block <= 1 {
        return false;
    }
    let newer = table.release_at_least(1, 25);
    let mut changed = false;
    for gi in 0..session.graphs.len() {
        let g = &session.graphs[gi];
        if !g.any_live_node(|n| {
            n.ep == Some(Ep::Cpu)
                && matches!(
                    n.op.as_str(),
                    "Conv" | "FusedConv" | "MaxPool" | "AveragePool"
                )
        }) {
            continue;
        }
        let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
        let g = &session.graphs[gi];
        let mut names = NameGen::new(&session.graphs[gi]);
        let mut reads: HashMap<Sym, usize> = HashMap::default();
        let mut producers: HashMap<Sym, usize> = HashMap::default();
        for (ni, n) in g.live_nodes() {
            for i in n.inputs.iter().chain(&n.implicit_inputs) {
                if !i.is_empty() {
                    *reads.entry(*i).or_default() += 1;
                }
            }
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                producers.insert(*o, ni);
            }
        }
        let symbols = symbols_of_sums(session, gi, &producers);
        let mut im = Impl {
            gi,
            block: i64::from(block),
            newer,
            hard_swish: table.release_at_least(1, 29),
            taken: Default::default(),
            ed: Editor::lazy(session, gi),
            names: &mut names,
            args: Vec::new(),
            index: HashMap::default(),
            reorder_inputs: HashMap::default(),
            filters: HashMap::default(),
            biases: HashMap::default(),
            reshape_shapes: HashMap::default(),
            removed: Vec::new(),
            reads,
            producers,
            outputs: session.graphs[gi].outputs.iter().cloned().collect(),
            symbols,
        };
        for ni in order {
            let n = &session.graphs[gi].nodes[ni];
            if n.removed || n.ep != Some(Ep::Cpu) {
                continue;
            }
            im.transform(session, ni);
        }
        changed |= im.finalize(session);
        let counter = names.counter;
        session.graphs[gi].name_counter = counter;
    }
    changed
}

/// The `dim_param`s of the 4-D inputs of the graph's CPU `Add`/`Sum` nodes: declared on the
/// graph's values or carried by ONNX inference ([`crate::placer::transformers::dim_symbols`]). Read before the
/// walk, which rewires the nodes the inference would trace through.
fn symbols_of_sums(
    session: &Session,
    gi: usize,
    producers: &HashMap<Sym, usize>,
) -> HashMap<Sym, [Option<Sym>; 4]> {
    let empty = HashMap::default();
    let params = if gi == 0 {
        &session.graphs[0].dim_params
    } else {
        &empty
    };
    let producer = |v: Sym| producers.get(&v).copied();
    let memo = Default::default();
    let symbols = crate::placer::transformers::dim_symbols::Symbols {
        session,
        gi,
        params,
        producer: &producer,
        memo: &memo,
    };
    let mut out: HashMap<Sym, [Option<Sym>; 4]> = HashMap::default();
    for (_, n) in session.graphs[gi].live_nodes() {
        if n.ep != Some(Ep::Cpu)
            || n.domain != Sym::AI_ONNX
            || !matches!(n.op.as_str(), "Add" | "Sum")
        {
            continue;
        }
        for x in &n.inputs {
            if out.contains_key(x) || session.shape_of(gi, *x).is_none_or(|s| s.len() != 4) {
                continue;
            }
            let dims = std::array::from_fn(|d| symbols.dim(*x, d, 0));
            out.insert(*x, dims);
        }
    }
    out
}

fn is(n: &SNode, domain: &str, op: &str, since: &[i64]) -> bool {
    n.domain == domain && n.op == op && n.since.is_some_and(|v| since.contains(&v))
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

/// Channels rounded up to a whole number of blocks.
fn aligned(channels: i64, block: i64) -> i64 {
    (channels + block - 1) / block * block
}

/// A constant initializer of `g` (not a graph input).
fn constant(session: &Session, gi: usize, name: Sym) -> Option<&Init> {
    session
        .initializer(gi, name)
        .filter(|i| !i.overridable && !name.is_empty())
}

/// The values of a small constant float tensor.
fn floats(init: &Init) -> Option<Vec<f32>> {
    if init.elem != D::Float as i32 || init.elements()? > 64 {
        return None;
    }
    let t = &init.tensor;
    if let Some(raw) = t.raw_data.as_ref().filter(|r| !r.is_empty()) {
        return Some(
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        );
    }
    Some(t.float_data.clone())
}

impl Impl<'_> {
    fn arg(&self, value: Sym) -> Option<&Arg> {
        self.index.get(&value).map(|&k| &self.args[k].1)
    }

    fn arg_mut(&mut self, value: Sym) -> Option<&mut Arg> {
        self.index.get(&value).map(|&k| &mut self.args[k].1)
    }

    /// `RemoveOutputEdges`: the original uses of the node's outputs (a graph output counts one).
    fn original_uses(&self, n: &SNode) -> usize {
        let mut k: usize = n
            .outputs
            .iter()
            .map(|o| self.reads.get(o).copied().unwrap_or(0))
            .sum();
        if n.outputs.iter().any(|o| self.outputs.contains(o)) {
            k += 1;
        }
        k
    }

    /// `CreateNchwcArgument`: `nchwc_node`'s first output becomes a new NCHWc value standing for
    /// `original`'s first output.
    fn create_arg(
        &mut self,
        session: &mut Session,
        original: usize,
        nchwc_node: usize,
        channels: i64,
        shape: Shape,
    ) {
        let g = &session.graphs[self.gi];
        let uses = self.original_uses(&g.nodes[original]);
        let Some(out) = g.nodes[nchwc_node].outputs.first().cloned() else {
            return;
        };
        let value = self.names.value("reorder");
        session.graphs[self.gi]
            .types
            .insert(value, Type::Tensor(D::Float as i32));
        if let Some(o) = session.graphs[self.gi].nodes[nchwc_node]
            .outputs
            .first_mut()
        {
            *o = value;
        }
        self.insert_arg(
            out,
            Arg {
                node: nchwc_node,
                value,
                starting_uses: uses,
                remaining_uses: uses,
                channels,
                shape,
            },
        );
    }

    fn insert_arg(&mut self, original: Sym, arg: Arg) {
        match self.index.get(&original) {
            Some(&k) => self.args[k].1 = arg,
            None => {
                self.index.insert(original, self.args.len());
                self.args.push((original, arg));
            }
        }
    }

    /// `FuseNchwcArgument`: `node` (removed) now stands for the NCHWc value of `into`.
    fn fuse_arg(&mut self, session: &Session, node: usize, into: &Arg) {
        let n = &session.graphs[self.gi].nodes[node];
        let uses = self.original_uses(n);
        let Some(out) = n.outputs.first().cloned() else {
            return;
        };
        self.insert_arg(
            out,
            Arg {
                starting_uses: uses,
                remaining_uses: uses,
                ..into.clone()
            },
        );
    }

    fn add_node(&mut self, session: &mut Session, node: SNode) -> usize {
        session.graphs[self.gi].generated_names.insert(node.name);
        self.ed.add(session, node)
    }

    fn new_node(name: Sym, op: &str, domain: Sym, inputs: Vec<Sym>, outputs: Vec<Sym>) -> SNode {
        SNode {
            name,
            op: Sym::new(op),
            domain,
            since: Some(1),
            inputs,
            outputs,
            attrs: thin_vec::ThinVec::new(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: Some(Ep::Cpu),
            kernel: None,
            origin: None,
            removed: false,
        }
    }

    /// `InsertReorderInput`: the node's first input, reordered once per value.
    fn reorder_input(&mut self, session: &mut Session, ni: usize) {
        let Some(x) = session.graphs[self.gi].nodes[ni].inputs.first().cloned() else {
            return;
        };
        let value = match self.reorder_inputs.get(&x) {
            Some(v) => *v,
            None => {
                let v = self.names.value("reorder");
                self.reorder_inputs.insert(x, v);
                let name = self.names.node("ReorderInput");
                // An NHWC-to-NCHW `Transpose` read by this node alone is folded into the
                // reorder (`channels_last`), which reads the NHWC tensor itself.
                let folded = self.nhwc_transpose_of(session, x);
                let source = match folded {
                    Some(t) => session.graphs[self.gi].nodes[t]
                        .inputs
                        .first()
                        .cloned()
                        .unwrap_or_default(),
                    None => x,
                };
                let mut node = Self::new_node(name, "ReorderInput", NCHWC, vec![source], vec![v]);
                node.origin = session.graphs[self.gi].nodes[ni].origin;
                if let Some(t) = folded {
                    node.attrs = thin_vec::thin_vec![int_attr("channels_last", 1)];
                    self.removed.push(t);
                }
                self.add_node(session, node);
                v
            }
        };
        if let Some(i) = session.graphs[self.gi].nodes[ni].inputs.first_mut() {
            *i = value;
        }
    }

    /// The CPU `Transpose` (perm `[0, 3, 1, 2]`) producing `value` when its output has one reading
    /// slot and is no graph output: `InsertReorderInput` then reorders its NHWC input directly.
    fn nhwc_transpose_of(&self, session: &Session, value: Sym) -> Option<usize> {
        let &t = self.producers.get(&value)?;
        let n = &session.graphs[self.gi].nodes[t];
        let folds = !n.removed
            && n.ep == Some(Ep::Cpu)
            && self.versions(n, "Transpose")
            && n.attr_ints("perm") == Some(&[0, 3, 1, 2][..])
            && n.outputs.len() == 1
            && n.inputs.first().is_some_and(|i| !i.is_empty())
            && self.reads.get(&value).copied() == Some(1)
            && !self.outputs.contains(&value);
        folds.then_some(t)
    }

    /// The dims of the spatial output that keep the NCHWc input's symbolic source
    /// (`ConvPoolShapeInference`).
    fn conv_pool_shape(n: &SNode, input: &Shape, out: &mut Shape, kernel: Option<&[i64]>) {
        out.dims[0] = input.dims[0];
        let pads = n.attr_ints("pads");
        let strides = n.attr_ints("strides");
        let dilations = n.attr_ints("dilations");
        if pads.is_some_and(|p| p.len() != 4)
            || strides.is_some_and(|s| s.len() != 2)
            || dilations.is_some_and(|d| d.len() != 2)
        {
            return;
        }
        let kernel_shape = match kernel {
            Some(k) => k.to_vec(),
            None => match n.attr_ints("kernel_shape") {
                Some(k) if k.len() == 2 => k.to_vec(),
                _ => return,
            },
        };
        let mut pads = pads;
        let mut same = false;
        if let Some(p) = n.attr_s("auto_pad").filter(|p| p != "NOTSET") {
            if p == "SAME_UPPER" || p == "SAME_LOWER" {
                same = true;
            } else if p != "VALID" {
                return;
            }
            pads = None;
        }
        for i in 0..2 {
            if dilations.is_some_and(|d| d[i] != 1) {
                continue;
            }
            let stride = strides.map_or(1, |s| s[i]);
            if stride != 1 && stride != 2 {
                continue;
            }
            let padding = pads.map_or(0, |p| p[i] + p[i + 2]);
            if padding + 1 == kernel_shape[i] || same {
                out.dims[2 + i] = input.dims[2 + i];
                out.shifts[i] = input.shifts[i] + usize::try_from(stride - 1).unwrap_or(0);
            }
        }
    }

    /// Whether `n` is the ai.onnx `op` at a since-version ORT's NCHWc transformer matches.
    /// Measured with the CPU wheels on opsets 13, 14, 17, 21 and 22: 1.23.2 and 1.24.4 match the
    /// versions up to opset 18 (Relu-14, Add-14 and Mul-14 included, BatchNormalization-15,
    /// Transpose-21, Resize-18/19, AveragePool-19 and every opset-22 version not), 1.31.1 all of
    /// them; the releases between are taken to behave as 1.31.1.
    fn versions(&self, n: &SNode, op: &str) -> bool {
        let (old, new): (&[i64], &[i64]) = match op {
            "Conv" => (&[1, 11], &[22]),
            "MaxPool" => (&[1, 8, 10, 11, 12], &[22]),
            "AveragePool" => (&[1, 7, 10, 11], &[19, 22]),
            "GlobalMaxPool" | "GlobalAveragePool" => (&[1], &[22]),
            "Add" | "Mul" => (&[7, 13, 14], &[]),
            "Sum" => (&[6, 8, 13], &[]),
            "Concat" => (&[4, 11, 13], &[]),
            "Relu" => (&[6, 13, 14], &[]),
            "Sigmoid" | "Tanh" => (&[6, 13], &[]),
            "HardSigmoid" => (&[], &[6, 22]),
            "BatchNormalization" => (&[7, 9, 14], &[15]),
            "Transpose" => (&[1, 13], &[21]),
            "Upsample" => (&[9], &[]),
            "Resize" => (&[10, 11, 13], &[18, 19]),
            _ => (&[], &[]),
        };
        n.domain == Sym::AI_ONNX
            && n.op == op
            && n.since
                .is_some_and(|v| old.contains(&v) || (self.newer && new.contains(&v)))
    }

    fn transform(&mut self, session: &mut Session, ni: usize) {
        if self.taken.contains(&ni) {
            return;
        }
        let n = &session.graphs[self.gi].nodes[ni];
        let v = |op: &str| self.versions(n, op);
        if v("Conv") || is(n, "com.microsoft", "FusedConv", &[1]) {
            return self.conv(session, ni);
        }
        if v("MaxPool") || v("AveragePool") {
            return self.pool(session, ni);
        }
        // The rest only once every input a node produces is NCHWc (ORT: no input edge left).
        if n.inputs.is_empty()
            || n.inputs
                .iter()
                .chain(&n.implicit_inputs)
                .any(|i| self.producers.contains_key(i) && !self.index.contains_key(i))
        {
            return;
        }
        if v("Add") || v("Sum") {
            self.binary(session, ni, true);
        } else if v("Mul") {
            if !(self.newer && self.scale_mul(session, ni)) {
                self.binary(session, ni, false);
            }
        } else if v("Concat") {
            self.concat(session, ni);
        } else if v("Relu") || v("Sigmoid") || v("Tanh") || v("HardSigmoid") {
            self.activation(session, ni, true);
        } else if self.newer
            && (is(n, "com.microsoft", "QuickGelu", &[1]) || is(n, "com.microsoft", "Gelu", &[1]))
        {
            self.activation(session, ni, false);
        } else if v("BatchNormalization") {
            self.batch_norm(session, ni);
        } else if v("Transpose") {
            self.transpose(session, ni);
        } else if v("Upsample") || v("Resize") {
            self.resize(session, ni);
        } else if v("GlobalMaxPool") || v("GlobalAveragePool") {
            self.pool(session, ni);
        }
    }

    fn conv(&mut self, session: &mut Session, ni: usize) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        let (Some(x), Some(w), Some(y)) = (n.inputs.first(), n.inputs.get(1), n.outputs.first())
        else {
            return;
        };
        let Some(weights) =
            constant(session, gi, *w).filter(|i| i.elem == D::Float as i32 && i.dims.len() == 4)
        else {
            return;
        };
        let (out_channels, in_channels) = (weights.dims[0], weights.dims[1]);
        let kernel = [weights.dims[2], weights.dims[3]];
        let group = n.attr_i("group").unwrap_or(1);
        let nchwc_out = aligned(out_channels, self.block);
        let mut reorder_input = true;
        let mut oihwbo = false;
        // Measured with the CPU wheel (1.31.1): a depthwise convolution needs its channels a
        // multiple of 4, another grouped one block-aligned channels per group; an ungrouped one
        // reads its NCHW input directly below a block of input channels and pads the rest.
        if group > 1 {
            if in_channels == 1 && out_channels == group {
                if out_channels % 4 != 0 {
                    return;
                }
                oihwbo = true;
            } else if in_channels % self.block != 0
                || out_channels % group != 0
                || (out_channels / group) % self.block != 0
            {
                return;
            }
        } else if in_channels < self.block {
            oihwbo = true;
            reorder_input = false;
        } else if in_channels % 4 != 0 {
            // MLAS reorders (and pads) input channels that are a multiple of 4.
            return;
        }
        let bias = n.inputs.get(2).filter(|b| !b.is_empty()).cloned();
        if let Some(b) = &bias {
            let ok = constant(session, gi, *b).is_some_and(|i| {
                i.elem == D::Float as i32 && i.dims.len() == 1 && i.dims[0] == out_channels
            });
            if !ok {
                return;
            }
        }
        let filter = match self.filters.get(&(*w, oihwbo)) {
            Some(f) => *f,
            None => {
                let f = self.names.value("reorder");
                self.filters.insert((*w, oihwbo), f);
                f
            }
        };
        let new_bias = match &bias {
            Some(b) if out_channels != nchwc_out => Some(match self.biases.get(b) {
                Some(v) => *v,
                None => {
                    let v = self.names.value("reorder");
                    self.biases.insert(*b, v);
                    v
                }
            }),
            _ => None,
        };
        let name = self.names.node(&format!("{y}_nchwc"));
        let mut inputs = n.inputs.clone();
        inputs[1] = filter;
        if let Some(b) = new_bias {
            inputs[2] = b;
        }
        let mut node = Self::new_node(name, "Conv", NCHWC, inputs, n.outputs.clone());
        node.attrs = n.attrs.clone();
        node.origin = n.origin;
        let new = self.add_node(session, node);
        let mut shape = Shape::of(*y);
        if reorder_input {
            match self.arg(*x).cloned() {
                None => self.reorder_input(session, new),
                Some(a) => {
                    if let Some(i) = session.graphs[gi].nodes[new].inputs.first_mut() {
                        *i = a.value;
                    }
                    if let Some(a) = self.arg_mut(*x) {
                        a.remaining_uses = a.remaining_uses.saturating_sub(1);
                    }
                    Self::conv_pool_shape(&n, &a.shape, &mut shape, Some(&kernel));
                }
            }
        }
        self.create_arg(session, ni, new, out_channels, shape);
        self.removed.push(ni);
    }

    fn pool(&mut self, session: &mut Session, ni: usize) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        if n.outputs.len() > 1 {
            return;
        }
        let (Some(x), Some(y)) = (n.inputs.first(), n.outputs.first()) else {
            return;
        };
        if session.type_of(gi, *x) != Some(&Type::Tensor(D::Float as i32)) {
            return;
        }
        let Some(shape) = session.shape_of(gi, *x).filter(|s| s.len() == 4) else {
            return;
        };
        let Some(channels) = shape[1] else {
            return;
        };
        if channels % self.block != 0 {
            return;
        }
        let name = self.names.node(&format!("{y}_nchwc"));
        let mut node = Self::new_node(name, &n.op, NCHWC, n.inputs.clone(), n.outputs.clone());
        node.attrs = n.attrs.clone();
        node.origin = n.origin;
        let new = self.add_node(session, node);
        let mut out_shape = Shape::of(*y);
        match self.arg(*x).cloned() {
            None => self.reorder_input(session, new),
            Some(a) => {
                if let Some(i) = session.graphs[gi].nodes[new].inputs.first_mut() {
                    *i = a.value;
                }
                if let Some(a) = self.arg_mut(*x) {
                    a.remaining_uses = a.remaining_uses.saturating_sub(1);
                }
                Self::conv_pool_shape(&n, &a.shape, &mut out_shape, None);
            }
        }
        self.create_arg(session, ni, new, channels, out_shape);
        self.removed.push(ni);
    }

    fn binary(&mut self, session: &mut Session, ni: usize, add: bool) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        let Some(inputs) = n
            .inputs
            .iter()
            .map(|i| self.arg(*i).cloned())
            .collect::<Option<Vec<Arg>>>()
        else {
            return;
        };
        let Some(first) = inputs.first().cloned() else {
            return;
        };
        let channels = first.channels;
        let mut all_match = true;
        let shape0 = session.shape_of(gi, n.inputs[0]).cloned();
        for (k, a) in inputs.iter().enumerate().skip(1) {
            if a.channels != channels {
                return;
            }
            for d in 0..4 {
                if first.shape.dim_equal(&a.shape, d) {
                    continue;
                }
                // ONNX inference's dims: equal positive values, or the same `dim_param`.
                let shape_n = session.shape_of(gi, n.inputs[k]);
                let symbol = |x: Sym| self.symbols.get(&x).and_then(|s| s[d].as_ref());
                let known = match (&shape0, shape_n) {
                    (Some(s0), Some(sn)) => {
                        matches!(
                            (s0.get(d).copied().flatten(), sn.get(d).copied().flatten()),
                            (Some(a), Some(b)) if a > 0 && a == b
                        ) || matches!(
                            (symbol(n.inputs[0]), symbol(n.inputs[k])),
                            (Some(a), Some(b)) if a == b
                        )
                    }
                    _ => false,
                };
                if !known {
                    all_match = false;
                }
            }
        }
        if all_match {
            for (k, a) in inputs.iter().enumerate() {
                self.ed.set_input(session, EdgeEnd::new(ni, k), a.value);
                if let Some(x) = self.arg_mut(n.inputs[k]) {
                    x.remaining_uses = x.remaining_uses.saturating_sub(1);
                }
            }
            if add && inputs.len() == 2 {
                for k in 0..2 {
                    let a = &inputs[k];
                    let conv = &session.graphs[gi].nodes[a.node];
                    if conv.op == "Conv"
                        && conv.domain == NCHWC
                        && conv.inputs.len() < 4
                        && a.starting_uses == 1
                        && conv.attr("activation").is_none()
                    {
                        let other = session.graphs[gi].nodes[inputs[k ^ 1].node]
                            .outputs
                            .first()
                            .cloned()
                            .unwrap_or_default();
                        // In place, as ORT: the Conv's uses are counted in the graph as
                        // it was (see the module's doc); no editor kept is current after.
                        let g = &mut session.graphs[gi];
                        g.touch();
                        let conv = &mut g.nodes[a.node];
                        conv.inputs.resize(4, Sym::EMPTY);
                        conv.inputs[3] = other;
                        let a = a.clone();
                        self.fuse_arg(session, ni, &a);
                        self.removed.push(ni);
                        return;
                    }
                }
            }
            self.create_arg(session, ni, ni, channels, first.shape);
            return;
        }
        if !add {
            return;
        }
        // Shapes not provably equal: Reshape each input to the blocked shape, and back.
        for (k, a) in inputs.iter().enumerate() {
            let v = self.names.value("reshape");
            self.reshape(session, a.value, v, true);
            self.ed.set_input(session, EdgeEnd::new(ni, k), v);
            if let Some(x) = self.arg_mut(n.inputs[k]) {
                x.remaining_uses = x.remaining_uses.saturating_sub(1);
            }
        }
        let out = self.names.value("reshape");
        let Some(y) = n.outputs.first().cloned() else {
            return;
        };
        let back = self.reshape(session, out, y, false);
        self.create_arg(session, ni, back, channels, Shape::of(y));
        if let Some(o) = session.graphs[gi].nodes[ni].outputs.first_mut() {
            *o = out;
        }
    }

    /// `InsertReshape`: a CPU Reshape from `input` to `output` with a shared shape initializer.
    fn reshape(&mut self, session: &mut Session, input: Sym, output: Sym, split: bool) -> usize {
        let shape = match self.reshape_shapes.get(&split) {
            Some(s) => *s,
            None => {
                let s = self.names.value("Reshape");
                self.reshape_shapes.insert(split, s);
                s
            }
        };
        let name = self.names.node("Reshape");
        let mut node = Self::new_node(
            name,
            "Reshape",
            Sym::AI_ONNX,
            vec![input, shape],
            vec![output],
        );
        node.since = None;
        self.add_node(session, node)
    }

    fn concat(&mut self, session: &mut Session, ni: usize) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        if n.attr_i("axis") != Some(1) {
            return;
        }
        let Some(inputs) = n
            .inputs
            .iter()
            .map(|i| self.arg(*i).cloned())
            .collect::<Option<Vec<Arg>>>()
        else {
            return;
        };
        if inputs.iter().any(|a| a.channels % self.block != 0) {
            return;
        }
        let total: i64 = inputs.iter().map(|a| a.channels).sum();
        for (k, a) in inputs.iter().enumerate() {
            self.ed.set_input(session, EdgeEnd::new(ni, k), a.value);
            if let Some(x) = self.arg_mut(n.inputs[k]) {
                x.remaining_uses = x.remaining_uses.saturating_sub(1);
            }
        }
        let Some(y) = n.outputs.first() else {
            return;
        };
        let mut shape = inputs[0].shape.clone();
        shape.dims[1] = *y;
        self.create_arg(session, ni, ni, total, shape);
    }

    /// `TransformActivation`; `fusable`: the activations an NCHWc convolution takes as its
    /// `activation` (from 1.25 `HardSigmoid` too; `QuickGelu` and `Gelu` only keep the layout).
    fn activation(&mut self, session: &mut Session, ni: usize, fusable: bool) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        let Some(x) = n.inputs.first() else {
            return;
        };
        let Some(a) = self.arg(*x).cloned() else {
            return;
        };
        self.ed.set_input(session, EdgeEnd::new(ni, 0), a.value);
        if let Some(x) = self.arg_mut(*x) {
            x.remaining_uses = x.remaining_uses.saturating_sub(1);
        }
        if fusable && self.hard_swish_fusion(session, ni, *x, &a) {
            return;
        }
        let conv = &session.graphs[gi].nodes[a.node];
        if fusable
            && conv.op == "Conv"
            && conv.domain == NCHWC
            && a.starting_uses == 1
            && conv.attr("activation").is_none()
        {
            // An attribute set in place (`SGraph::edited`), not through the editor.
            session.graphs[gi].edited = true;
            session.graphs[gi].nodes[a.node].attrs.push(AttributeProto {
                name: Some("activation".into()),
                r#type: Some(AttributeType::String as i32),
                s: Some(n.op.as_bytes().to_vec().into()),
                ..Default::default()
            });
            self.fuse_arg(session, ni, &a);
            self.removed.push(ni);
        } else {
            self.create_arg(session, ni, ni, a.channels, a.shape);
        }
    }

    /// From 1.31: a `HardSigmoid` (alpha 1/6, beta 0.5) of an NCHWc convolution read only by it
    /// and by a `Mul` of the two, which alone reads the `HardSigmoid` and is no graph output,
    /// becomes the convolution's `HardSwish` activation; the `Mul`'s output is then the
    /// convolution's NCHWc value. No name is generated. Measured with the CPU wheels
    /// (`tools/realworld/nchwc_probes.py`'s `hard_swish.onnx`).
    fn hard_swish_fusion(&mut self, session: &mut Session, ni: usize, x: Sym, a: &Arg) -> bool {
        let gi = self.gi;
        let g = &session.graphs[gi];
        let n = &g.nodes[ni];
        let conv = &g.nodes[a.node];
        let near = |name: &str, v: f32| {
            n.attr(name)
                .and_then(|x| x.f)
                .is_some_and(|f| (f - v).abs() <= 1e-6)
        };
        if !self.hard_swish
            || n.op != "HardSigmoid"
            || !near("alpha", 1.0 / 6.0)
            || !near("beta", 0.5)
            || conv.op != "Conv"
            || conv.domain != NCHWC
            || a.starting_uses != 2
            || conv.attr("activation").is_some()
        {
            return false;
        }
        let Some(h) = n.outputs.first().cloned() else {
            return false;
        };
        if self.reads.get(&h).copied() != Some(1) || self.outputs.contains(&h) {
            return false;
        }
        let Some(mul) = g
            .live_nodes()
            .find_map(|(mi, m)| m.inputs.contains(&h).then_some(mi))
        else {
            return false;
        };
        let m = &g.nodes[mul];
        let pair = m.inputs.len() == 2
            && ((m.inputs[0] == x && m.inputs[1] == h) || (m.inputs[0] == h && m.inputs[1] == x));
        if m.ep != Some(Ep::Cpu)
            || !self.versions(m, "Mul")
            || !pair
            || m.outputs.first().is_none_or(|y| self.outputs.contains(y))
        {
            return false;
        }
        // An attribute set in place (`SGraph::edited`), not through the editor.
        session.graphs[gi].edited = true;
        session.graphs[gi].nodes[a.node].attrs.push(AttributeProto {
            name: Some("activation".into()),
            r#type: Some(AttributeType::String as i32),
            s: Some(b"HardSwish".to_vec().into()),
            ..Default::default()
        });
        if let Some(x) = self.arg_mut(x) {
            x.remaining_uses = x.remaining_uses.saturating_sub(1);
        }
        self.fuse_arg(session, mul, a);
        self.taken.insert(mul);
        self.removed.push(ni);
        self.removed.push(mul);
        true
    }

    fn batch_norm(&mut self, session: &mut Session, ni: usize) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        if n.outputs.len() > 1 || n.inputs.len() < 5 {
            return;
        }
        let Some(a) = self.arg(n.inputs[0]).cloned() else {
            return;
        };
        if n.attr_i("spatial").is_some_and(|s| s != 1) || n.attr("epsilon").is_none() {
            return;
        }
        let param_ok = |name: Sym| {
            constant(session, gi, name).is_some_and(|i| {
                i.elem == D::Float as i32 && i.dims.len() == 1 && i.dims[0] == a.channels
            })
        };
        if !n.inputs[1..5].iter().all(|p| param_ok(*p)) {
            return;
        }
        let scale = self.names.value("bn_scale");
        let bias = self.names.value("bn_B");
        let Some(y) = n.outputs.first() else {
            return;
        };
        let name = self.names.node(&format!("{y}_bn_nchwc"));
        let mut node = Self::new_node(
            name,
            "Conv",
            NCHWC,
            vec![a.value, scale, bias],
            n.outputs.clone(),
        );
        node.attrs = thin_vec::thin_vec![int_attr("group", aligned(a.channels, self.block))];
        node.origin = n.origin;
        let new = self.add_node(session, node);
        if let Some(x) = self.arg_mut(n.inputs[0]) {
            x.remaining_uses = x.remaining_uses.saturating_sub(1);
        }
        self.create_arg(session, ni, new, a.channels, a.shape);
        self.removed.push(ni);
    }

    /// ORT 1.25 and later: a `Mul` of an NCHWc value by a constant float per-channel tensor
    /// (`C,1,1` or `1,C,1,1`, either side) becomes a depthwise NCHWc `Conv` (`<y>_mul_nchwc`,
    /// weights `mul_scale`, one group per aligned channel), which a following activation or
    /// `Add` can fuse into as into any NCHWc convolution. Measured with the CPU wheels: 1.24.4
    /// leaves such a `Mul` in NCHW; an `Add` of a constant stays in NCHW in both.
    fn scale_mul(&mut self, session: &mut Session, ni: usize) -> bool {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        let ([x0, x1], Some(y)) = (n.inputs.as_slice(), n.outputs.first()) else {
            return false;
        };
        let (x, other) = match (self.arg(*x0).is_some(), self.arg(*x1).is_some()) {
            (true, false) => (x0, x1),
            (false, true) => (x1, x0),
            _ => return false,
        };
        let Some(a) = self.arg(*x).cloned() else {
            return false;
        };
        let per_channel = constant(session, gi, *other).is_some_and(|i| {
            i.elem == D::Float as i32
                && (i.dims == [a.channels, 1, 1] || i.dims == [1, a.channels, 1, 1])
        });
        if !per_channel {
            return false;
        }
        let scale = self.names.value("mul_scale");
        let name = self.names.node(&format!("{y}_mul_nchwc"));
        let mut node = Self::new_node(name, "Conv", NCHWC, vec![a.value, scale], n.outputs.clone());
        node.attrs = thin_vec::thin_vec![int_attr("group", aligned(a.channels, self.block))];
        node.origin = n.origin;
        let new = self.add_node(session, node);
        if let Some(x) = self.arg_mut(*x) {
            x.remaining_uses = x.remaining_uses.saturating_sub(1);
        }
        self.create_arg(session, ni, new, a.channels, a.shape);
        self.removed.push(ni);
        true
    }

    fn transpose(&mut self, session: &mut Session, ni: usize) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        let Some(a) = n.inputs.first().and_then(|x| self.arg(*x)).cloned() else {
            return;
        };
        if n.attr_ints("perm") != Some(&[0, 2, 3, 1][..]) {
            return;
        }
        let name = self.names.node("ReorderOutput");
        let mut node = Self::new_node(
            name,
            "ReorderOutput",
            NCHWC,
            vec![a.value],
            n.outputs.clone(),
        );
        node.attrs = thin_vec::thin_vec![
            int_attr("channels", a.channels),
            int_attr("channels_last", 1),
        ];
        node.origin = n.origin;
        self.add_node(session, node);
        if let Some(x) = self.arg_mut(n.inputs[0]) {
            x.remaining_uses = x.remaining_uses.saturating_sub(1);
        }
        self.removed.push(ni);
    }

    fn resize(&mut self, session: &mut Session, ni: usize) {
        let gi = self.gi;
        let n = session.graphs[gi].nodes[ni].clone();
        let Some(a) = n.inputs.first().and_then(|x| self.arg(*x)).cloned() else {
            return;
        };
        if n.attr_s("mode").is_some_and(|m| m != "nearest") {
            return;
        }
        let scales = if n.since.is_some_and(|v| v >= 11) {
            if n.inputs.len() != 3
                || n.attr_s("coordinate_transformation_mode").as_deref() != Some("asymmetric")
                || n.attr_s("nearest_mode").as_deref() != Some("floor")
            {
                return;
            }
            n.inputs[2]
        } else {
            match n.inputs.get(1) {
                Some(s) => *s,
                None => return,
            }
        };
        let Some(values) = constant(session, gi, scales)
            .filter(|i| i.dims.len() == 1 && i.dims[0] == 4)
            .and_then(floats)
        else {
            return;
        };
        if values.len() != 4 {
            return;
        }
        let mut ints = Vec::with_capacity(4);
        for v in values {
            let k = v as i64;
            if k <= 0 || k as f32 != v {
                return;
            }
            ints.push(k);
        }
        if ints[0] != 1 || ints[1] != 1 {
            return;
        }
        let Some(y) = n.outputs.first() else {
            return;
        };
        let name = self.names.node(&format!("{y}_nchwc"));
        let mut node = Self::new_node(name, "Upsample", NCHWC, vec![a.value], n.outputs.clone());
        node.attrs = thin_vec::thin_vec![AttributeProto {
            name: Some("scales".into()),
            r#type: Some(AttributeType::Ints as i32),
            ints,
            ..Default::default()
        }];
        node.origin = n.origin;
        let new = self.add_node(session, node);
        if let Some(x) = self.arg_mut(n.inputs[0]) {
            x.remaining_uses = x.remaining_uses.saturating_sub(1);
        }
        self.create_arg(session, ni, new, a.channels, Shape::of(*y));
        self.removed.push(ni);
    }

    /// `Finalize`: a `ReorderOutput` for every NCHWc value still read in NCHW; the replaced
    /// nodes go.
    fn finalize(&mut self, session: &mut Session) -> bool {
        let pending: Vec<(Sym, Arg)> = self
            .args
            .iter()
            .filter(|(_, a)| a.remaining_uses > 0)
            .cloned()
            .collect();
        for (original, a) in pending {
            let name = self.names.node("ReorderOutput");
            let origin = session.graphs[self.gi].nodes[a.node].origin;
            let mut node =
                Self::new_node(name, "ReorderOutput", NCHWC, vec![a.value], vec![original]);
            node.attrs = thin_vec::thin_vec![int_attr("channels", a.channels)];
            node.origin = origin;
            self.add_node(session, node);
        }
        for &ni in &self.removed {
            self.ed.remove(session, ni);
        }
        !self.args.is_empty() || !self.removed.is_empty()
    }
}
