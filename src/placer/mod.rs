//! ORT's assignment of nodes to execution providers, simulated for one release: load checks,
//! since-version binding, kernel lookup, the CUDA EP's capability checks, the CPU-preferred
//! (shape subgraph) pass, CPU fallback, and the copy insertion that follows.
//!
//! Pure: a function of the model, the release's table and the options. No I/O, no printing.

mod casts;
mod copy_plan_kernels;
mod cpu_preferred;
mod decision;
pub use decision::{Decision, Decisions};
mod dim_symbols;
mod ensure_unique_dq_for_node_unit;
mod functions;
mod fuse_initializers_transformer;

/// Why the last [`place`] on this thread stopped short of a faithful simulation (a budget of
/// the analysis was exhausted), if it did.
pub fn budget_exceeded() -> Option<String> {
    functions::budget_exceeded()
}
mod fusions;
/// The session graph under its old name, for code not yet moved to [`crate::session`].
pub use crate::session as ir;
mod kernel;
mod load;
mod matmul_integer_to_float;
mod nchwc_transformer;
pub use nchwc_transformer::{
    RECORDED_BLOCK as RECORDED_NCHWC_BLOCK, machine_block as machine_nchwc_block,
};
mod nhwc_transformer;
mod optimize;
mod qdq_transformer;
pub mod registry;
mod transpose;

use crate::sym::SymMap as HashMap;

pub use crate::session::types::type_allowed;
pub use kernel::{Miss, lookup};

use crate::infer::{self, SchemaError};
use crate::memcpy::{self, Copy};
use crate::model::Model;
use crate::providers;
use crate::session::build::Header;
use crate::session::{NodeRef, SNode, Session};
use crate::sym::Sym;
use crate::tables::{Ep, KernelDef, KernelTable};

/// Function inlining repeats while it changes something; functions nest only a few deep.
const MAX_INLINE_ROUNDS: usize = 16;

/// ORT's graph optimisation levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OptLevel {
    Disable,
    Basic,
    Extended,
    All,
}

impl OptLevel {
    pub fn name(self) -> &'static str {
        match self {
            OptLevel::Disable => "disable",
            OptLevel::Basic => "basic",
            OptLevel::Extended => "extended",
            OptLevel::All => "all",
        }
    }
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Providers in registration order; CPU is always last (ORT adds it implicitly).
    pub eps: Vec<Ep>,
    pub level: OptLevel,
    /// MLAS's NCHWc block size on the machine the session runs on (`MlasNchwcGetBlockSize`):
    /// 16 with AVX-512F, 8 on other x86-64 CPUs, 0 (or 1) where MLAS has no NCHWc kernels and
    /// ORT registers no `NchwcTransformer`. Only the CPU's level-`all` graph depends on it.
    /// Default [`RECORDED_NCHWC_BLOCK`], that of the machine the CPU-only truth
    /// was recorded on.
    pub nchwc_block: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            eps: crate::providers::default_list(),
            level: OptLevel::All,
            nchwc_block: nchwc_transformer::RECORDED_BLOCK,
        }
    }
}

/// The predicted outcome of session creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The model fails to load (unsupported opset, unknown op or domain, a type error; also one
    /// that a transformer makes, which ORT reports as `INVALID_GRAPH` too).
    LoadFail(String),
    /// Some node has no kernel on any provider.
    NoKernel(String),
    /// Placement and copies are decided, then a kernel refuses its node when session state
    /// creates it (the CUDA `BatchNormalization` in training mode at opset 14+), or the copy
    /// planner finds no kernel for a node a transformer put on CUDA before it adds any copy
    /// (`copy_plan_kernels.rs`: then there are no copies). `init: ...`
    InitFail(String),
    /// Partitioning stops: the body of a function ORT inlined fails its type check (`init: Type
    /// Error ...`). Nothing is placed.
    PartitionFail(String),
}

impl Outcome {
    /// The error text of a failed session (`load: ...`, `no-kernel: ...`, `init: ...`).
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Ok => None,
            Outcome::LoadFail(e)
            | Outcome::NoKernel(e)
            | Outcome::InitFail(e)
            | Outcome::PartitionFail(e) => Some(e),
        }
    }

    /// Whether ORT got as far as placing nodes and inserting copies (the session may still fail
    /// afterwards, when kernels are created).
    pub fn placed(&self) -> bool {
        matches!(self, Outcome::Ok | Outcome::InitFail(_))
    }
}

/// Everything the simulation found, with evidence.
#[derive(Debug)]
pub struct Placement {
    pub ort: String,
    pub level: OptLevel,
    /// The provider list simulated, in registration order (the CPU last).
    pub eps: Vec<Ep>,
    pub outcome: Outcome,
    /// The session graph after optimisations and copy insertion.
    pub session: Session,
    /// Decision per (graph, node) for every live node.
    pub decisions: Decisions,
    /// Copies in ORT's insertion (and log) order.
    pub copies: Vec<Copy>,
    /// The node a load or kernel-initialisation failure names, when it names one.
    pub failed_node: Option<NodeRef>,
}

impl Placement {
    /// Copies per graph name, as ORT's warning counts them (graphs with none are absent).
    pub fn memcpy_counts(&self) -> Vec<(Sym, usize)> {
        let mut out: Vec<(Sym, usize)> = Vec::new();
        for c in &self.copies {
            let name = self.session.graphs[c.graph].name;
            match out.iter_mut().find(|(n, _)| *n == name) {
                Some((_, k)) => *k += 1,
                None => out.push((name, 1)),
            }
        }
        out
    }
}

/// Simulates ORT's session creation for `model` under `table`.
pub fn place(model: &Model, table: &'static KernelTable, options: &Options) -> Placement {
    let header = Header::of_model(model);
    let session = Session::from_model(model);
    place_built(session, &header, table, options)
}

/// [`place`] for a model the caller no longer needs: the session is built by taking the model
/// apart ([`Session::from_model_owned`]), so that one copy of the graph is left for the
/// simulation instead of three (the protobuf, its index and the session).
pub fn place_owned(model: Model, table: &'static KernelTable, options: &Options) -> Placement {
    let header = Header::of_model(&model);
    place_built(Session::from_model_owned(model), &header, table, options)
}

/// [`place`] for the model file at `path` (the `place` command): the session is built straight
/// from the file's bytes ([`crate::session::build`]), without decoding the whole model or
/// indexing it; a file that path does not read is loaded the general way
/// ([`crate::model::load`]), which reads it or reports why it cannot.
pub fn place_file(
    path: &std::path::Path,
    table: &'static KernelTable,
    options: &Options,
) -> Result<Placement, crate::model::LoadError> {
    place_file_with(path, || table, options)
}

/// [`place_file`] with the release's table asked for only once the model is read: the `place`
/// command decodes the table on another thread meanwhile (reading the model does not need it).
pub fn place_file_with(
    path: &std::path::Path,
    table: impl FnOnce() -> &'static KernelTable,
    options: &Options,
) -> Result<Placement, crate::model::LoadError> {
    place_read(path, crate::session::build::from_file(path), table, options)
}

/// [`place_file_with`] for the model at `path` read already: `read` is what
/// [`crate::session::build::from_file`] answered for it (the `place` command builds the first
/// model's session while the settings are resolved).
pub fn place_read(
    path: &std::path::Path,
    read: Result<Option<crate::session::build::Built>, crate::model::LoadError>,
    table: impl FnOnce() -> &'static KernelTable,
    options: &Options,
) -> Result<Placement, crate::model::LoadError> {
    match read? {
        Some(built) => Ok(place_built(built.session, &built.header, table(), options)),
        None => {
            let model = crate::model::load(path)?;
            Ok(place_owned(model, table(), options))
        }
    }
}

/// The session script for a built session: the load's opset check, then [`place_session`].
fn place_built(
    session: Session,
    header: &Header,
    table: &'static KernelTable,
    options: &Options,
) -> Placement {
    match admit(&session, header, table) {
        Err(fail) => refused(fail, table, options),
        Ok(()) => place_session(
            session,
            header.local_functions.clone(),
            header.main_sorted,
            table,
            options,
        ),
    }
}

/// A fresh placement of `options`' level and `table`'s release.
fn empty_placement(table: &'static KernelTable, options: &Options) -> Placement {
    Placement {
        ort: table.release().ort.clone(),
        level: options.level,
        eps: options.eps.clone(),
        outcome: Outcome::Ok,
        session: Session::default(),
        decisions: Decisions::default(),
        copies: Vec::new(),
        failed_node: None,
    }
}

/// A placement for a model that fails to load with `fail`.
fn refused(fail: String, table: &'static KernelTable, options: &Options) -> Placement {
    let mut placement = empty_placement(table, options);
    placement.outcome = Outcome::LoadFail(fail);
    placement
}

/// What the session script checks of the model besides its graph: the opset check (its failure
/// message). Resets the session's analysis budgets, the inlining one sized by the model.
fn admit(session: &Session, header: &Header, table: &'static KernelTable) -> Result<(), String> {
    // One constant-folding and one inlining budget per session (`infer::eval`, `functions`).
    crate::infer::eval::reset_budget();
    let nodes = session
        .functions
        .values()
        .map(|f| functions::body_size(&f.node))
        .fold(
            header
                .nodes
                .saturating_add(header.subgraphs.saturating_mul(functions::SUBGRAPH_COST)),
            usize::saturating_add,
        );
    functions::reset_budget(nodes);
    match check_opsets(header, table) {
        Some(fail) => Err(fail),
        None => Ok(()),
    }
}

/// The session script from the session graph on.
fn place_session(
    mut session: Session,
    local_functions: Vec<(Sym, Sym)>,
    main_sorted: bool,
    table: &'static KernelTable,
    options: &Options,
) -> Placement {
    let mut placement = empty_placement(table, options);
    // The main graph's Kahn order, for type and shape inference (neither changes an edge): its
    // live nodes in index order where the build found every node after those it reads
    // (`Header::main_sorted`), as the order would come out.
    let order = if session.graphs.is_empty() {
        Vec::new()
    } else if main_sorted {
        session.graphs[0].live_nodes().map(|(i, _)| i).collect()
    } else {
        crate::session::order::topological_order(&session, 0)
    };
    let failures = infer::infer_session_in(&mut session, table, &order);
    for (gi, ni, err) in &failures {
        let node = &session.graphs[*gi].nodes[*ni];
        if local_functions
            .iter()
            .any(|&(d, n)| d == node.domain && n == node.op)
        {
            continue;
        }
        let opset = session.opsets.get(&node.domain).copied().unwrap_or(0);
        let what = match err {
            SchemaError::UnknownDomain => format!("domain `{}` is not registered", node.domain),
            SchemaError::UnknownOp => "is not a registered function/op".to_string(),
            SchemaError::Deprecated(v) => format!("resolves to deprecated schema version {v}"),
        };
        placement.outcome = Outcome::LoadFail(format!(
            "load: {}:{}({opset}) node `{}` {what}",
            node.domain, node.op, node.name
        ));
        placement.session = session;
        return placement;
    }
    if let Some((at, e)) = first_type_conflict(&session, table) {
        placement.outcome = Outcome::LoadFail(format!("load: {e}"));
        placement.failed_node = Some(at);
        placement.session = session;
        return placement;
    }
    if let Some((at, fail)) = check_attributes(&session, table) {
        placement.outcome = Outcome::LoadFail(fail);
        placement.failed_node = Some(at);
        placement.session = session;
        return placement;
    }
    // ONNX shape inference runs at load, whatever the level; its rank errors fail the load.
    let mut values = infer::shapes::Values::default();
    if !session.graphs.is_empty() {
        infer::shapes::infer_graph_in(&mut session, 0, &mut values, &order);
    }
    drop(order);
    if let Some((at, fail)) = load::concat_rank_conflict(&session) {
        placement.outcome = Outcome::LoadFail(fail);
        placement.failed_node = Some(at);
        placement.session = session;
        return placement;
    }
    // A model with local functions gets its unclaimed function nodes inlined first (§4.6);
    // the inlined bodies then need their shapes too.
    let inlined = functions::inline_aot(&mut session, table, &options.eps);
    if ensure_unique_dq_for_node_unit::run(&mut session, 0, 0) {
        session.infer_again();
    }
    optimize::run(&mut session, table, options.level, values, inlined);
    // Partition; inline function nodes nobody took; repeat while anything was inlined.
    for _round in 0..MAX_INLINE_ROUNDS {
        partition(&mut session, table, options, &mut placement.decisions);
        let unassigned: Vec<NodeRef> = unassigned_nodes(&session).collect();
        let mut inlined = false;
        let mut inliner = functions::Inliner::default();
        for at in unassigned {
            if inliner.inline(&mut session, table, at.graph(), at.node()) {
                placement.decisions.remove(at);
                inlined = true;
            }
        }
        if !inlined {
            break;
        }
        infer::infer_session(&mut session, table);
        // ORT's `Graph::Resolve` after the inlining infers the shapes of the inlined bodies'
        // values too (SkipLayerNormFusion's dim checks read them: an fp16 Gelu-20 inlined on
        // the CPU, `tests/fixtures/realworld/unseen2/fp16blk.dyn.bert.onnx`).
        infer::shapes::infer_graph(&mut session, 0, &mut infer::shapes::Values::default());
        if let Some((at, e)) = first_type_conflict(&session, table) {
            placement.outcome = Outcome::PartitionFail(format!("init: {e}"));
            placement.failed_node = Some(at);
            placement.session = session;
            return placement;
        }
    }
    // The QDQ transformers start from a QuantizeLinear or a DequantizeLinear, the integer
    // fusion from a MatMulInteger(ToFloat); none of what runs from here makes one of those
    // where the session has no Q/DQ: a float model skips them all after one scan.
    let [q, dq, integer, to_float] = session.live_ops([
        Sym::QUANTIZE_LINEAR,
        Sym::DEQUANTIZE_LINEAR,
        Sym::new("MatMulInteger"),
        Sym::new("MatMulIntegerToFloat"),
    ]);
    let qdq = q || dq;
    if qdq {
        qdq_transformer::relu_quantizelinear::run(&mut session, options.level);
    }
    transpose::run_cpu(&mut session, table, options.level);
    let fused = qdq && {
        qdq_transformer::qdq_s8_to_u8::run(&mut session, options.level);
        qdq_transformer::selectors_actions::qdq_selector_action_transformer::run(
            &mut session,
            table,
            options.level,
        )
    };
    // ORT resolves the graph after a transformer changed it, checking every node's input types
    // against its schema: a QDQ group of float8 types fused into `QLinearMatMul` at an opset
    // below 21 (int8/uint8 only) fails the session ("Type Error: Type 'tensor(float8e4m3fn)' of
    // input parameter ..."). Measured with the CPU wheels (1.23.2, 1.24.4, 1.31.1) on
    // `tests/fixtures/realworld/unseen3/qdqf8.timm.convnext.onnx`. ORT reports it as it does a
    // model that fails to load (`INVALID_GRAPH : This is an invalid model. Type Error: ...`).
    if fused && let Some((at, e)) = first_type_conflict(&session, table) {
        placement.outcome = Outcome::LoadFail(format!("load: {e}"));
        placement.failed_node = Some(at);
        placement.session = session;
        return placement;
    }
    // Both fusions start from a MatMulInteger or a MatMulIntegerToFloat, the final cleanup
    // from a DequantizeLinear: a session without one skips their edge indices and orders.
    if (qdq || integer || to_float)
        && session.has_live_op(&[Sym::new("MatMulInteger"), Sym::new("MatMulIntegerToFloat")])
    {
        matmul_integer_to_float::run(&mut session, options.level);
    }
    fusions::run(&mut session, table, options.level);
    if qdq && session.has_live_op(&[Sym::DEQUANTIZE_LINEAR]) {
        qdq_transformer::qdq_final_cleanup::run(&mut session, options.level);
    }
    nchwc_transformer::run(&mut session, table, options.level, options.nchwc_block);
    nhwc_transformer::run(&mut session, table, options.level);
    bind_fused_kernels(&mut session, table, &mut placement.decisions);
    for key in casts::run(&mut session, table) {
        if let Some(Decision::Unassigned {
            provider_miss,
            cpu_miss,
        }) = placement.decisions.remove(key)
        {
            placement.decisions.insert(
                key,
                Decision::Fp32OnCpu {
                    provider_miss,
                    cpu_miss,
                },
            );
        }
    }
    // Level4 (`all`): float16 weights the Casts read become float initializers; then the
    // level-2 and level-3 transformers run again over the nodes the Casts moved to the CPU.
    if fuse_initializers_transformer::run(&mut session, options.level) {
        fusions::run(&mut session, table, options.level);
        nchwc_transformer::run(&mut session, table, options.level, options.nchwc_block);
        nhwc_transformer::run(&mut session, table, options.level);
    }
    // No pass that looks values up runs from here on (the copy pass writes its edits through
    // an editor with no index): the kept indices go, rather than stay with the session the
    // rules and the caller hold.
    session.kept = Default::default();
    // Asked of each graph first (a large one's nodes on threads): nearly always none.
    let unassigned = if session
        .graphs
        .iter()
        .any(|g| g.any_live_node(|n| n.ep.is_none()))
    {
        unassigned_nodes(&session).min()
    } else {
        None
    };
    if let Some(at) = unassigned {
        let n = &session.graphs[at.graph()].nodes[at.node()];
        placement.outcome = Outcome::NoKernel(no_kernel_message(table, n));
    }
    // ORT's `MemcpyTransformer`, for each provider whose kernels work in device memory, in
    // the list's order: first the kernel look-up that starts its copy planning, then the copies.
    for &ep in &options.eps {
        if !providers::of(ep).on_device() || placement.outcome != Outcome::Ok {
            continue;
        }
        if let Some((at, fail)) = copy_plan_kernels::missing_provider_kernel(&session, table, ep) {
            placement.outcome = Outcome::InitFail(fail);
            placement.failed_node = Some(at);
            break;
        }
        let copies = memcpy::insert(&mut session, ep);
        for c in &copies {
            placement
                .decisions
                .insert(NodeRef::new(c.graph, c.node), Decision::Inserted);
        }
        placement.copies.extend(copies);
    }
    if placement.outcome == Outcome::Ok
        && let Some((at, fail)) = kernel_init_failure(&session)
    {
        placement.outcome = Outcome::InitFail(fail);
        placement.failed_node = Some(at);
    }
    placement.session = session;
    placement
}

/// A kernel whose constructor rejects its node once placement is done, so that session creation
/// fails after the copies are inserted (the node's provider says which: `refuses_at_init`).
fn kernel_init_failure(session: &Session) -> Option<(NodeRef, String)> {
    let refused = |n: &SNode| n.ep.and_then(|ep| (providers::of(ep).refuses_at_init)(n));
    for (gi, g) in session.graphs.iter().enumerate() {
        // Asked of the whole graph first (a large one's nodes on threads): nearly always none.
        if !g.any_live_node(|n| refused(n).is_some()) {
            continue;
        }
        for (ni, n) in g.live_nodes() {
            if let Some(fail) = refused(n) {
                return Some((NodeRef::new(gi, ni), fail));
            }
        }
    }
    None
}

/// The first live node whose inputs bind a type parameter to two types (ORT's type check, which
/// runs at load and again on every function body it inlines).
fn first_type_conflict(session: &Session, table: &KernelTable) -> Option<(NodeRef, String)> {
    let versions = infer::domain_versions(session, table);
    (0..session.graphs.len()).find_map(|gi| {
        first_in_graph(
            session,
            gi,
            || infer::Resolver::with_versions(table, versions.clone()),
            |resolver, ni| infer::type_conflict(session, resolver, gi, ni),
        )
    })
}

/// Graphs of at least this many nodes have a load check run on several threads.
const PARALLEL_CHECK_NODES: usize = 16_384;

/// Nodes one thread checks at a time.
const CHECK_CHUNK: usize = 4_096;

/// The first live node of graph `gi`, in index order, that `check` finds fault with (with the
/// fault), as one walk would find it. A large graph is checked on several threads, a chunk of
/// nodes at a time, each chunk with its own `state` (a schema resolver, say): the checks only
/// read the session.
fn first_in_graph<S, T: Send>(
    session: &Session,
    gi: usize,
    state: impl Fn() -> S + Sync,
    check: impl Fn(&mut S, usize) -> Option<T> + Sync,
) -> Option<(NodeRef, T)> {
    let g = &session.graphs[gi];
    let walk = |from: usize, to: usize| {
        let mut st = state();
        (from..to)
            .filter(|&ni| !g.nodes[ni].removed)
            .find_map(|ni| check(&mut st, ni).map(|t| (NodeRef::new(gi, ni), t)))
    };
    let threads = crate::threads::threads();
    if g.nodes.len() < PARALLEL_CHECK_NODES || threads < 2 {
        return walk(0, g.nodes.len());
    }
    let starts: Vec<usize> = (0..g.nodes.len()).step_by(CHECK_CHUNK).collect();
    crate::threads::map_chunks(&starts, 1, threads, "load-check", |chunk| {
        walk(chunk[0], (chunk[0] + CHECK_CHUNK).min(g.nodes.len()))
    })
    .into_iter()
    .flatten()
    .next()
}

/// Errors that ONNX shape inference raises for a node whatever its inputs, which fail the load:
/// `DFT` with both `onesided` and `inverse` set, up to ORT 1.24 (the ONNX bundled from 1.25 on
/// accepts it: measured with the oracle on 1.23.2, 1.24.4 and 1.25.1–1.31.1).
fn shape_inference_failure(n: &SNode, table: &KernelTable) -> Option<String> {
    if table.release_at_least(1, 25) {
        return None;
    }
    let int = |name: &str| {
        n.attrs
            .iter()
            .find(|a| a.name() == name)
            .map_or(0, |a| a.i())
    };
    if n.op == "DFT" && n.domain == Sym::AI_ONNX && int("onesided") == 1 && int("inverse") == 1 {
        return Some(format!(
            "load: Node ({}) Op (DFT) [ShapeInferenceError] is_onesided and inverse attributes cannot be enabled at the same time",
            n.name
        ));
    }
    None
}

/// ORT's load-time check of every node's attributes against its schema (ONNX's
/// `OpSchema::Verify`, run by `Graph::Resolve`): the first node with an attribute its schema does
/// not declare, or without a required one, fails the load.
fn check_attributes(session: &Session, table: &KernelTable) -> Option<(NodeRef, String)> {
    let attributes = crate::tables::attributes_of(&table.release().ort);
    (0..session.graphs.len()).find_map(|gi| {
        first_in_graph(
            session,
            gi,
            || (),
            |(), ni| attribute_fault(session, table, attributes, gi, ni),
        )
    })
}

/// What [`check_attributes`] finds wrong with node `ni` of graph `gi` (`attributes`: the
/// release's schema attributes, where bundled).
fn attribute_fault(
    session: &Session,
    table: &KernelTable,
    attributes: Option<&crate::tables::attributes::SchemaAttributes>,
    gi: usize,
    ni: usize,
) -> Option<String> {
    let n = &session.graphs[gi].nodes[ni];
    let since = n.since?;
    if let Some(fail) = shape_inference_failure(n, table) {
        return Some(fail);
    }
    let attributes = attributes?;
    let names = n
        .attrs
        .iter()
        .map(|a| a.name())
        .chain(n.subgraphs.iter().map(|(attr, _)| attr.as_str()));
    let err = attributes.verify_of(n.domain, n.op, since, names)?;
    let domain = if n.domain == Sym::AI_ONNX {
        ""
    } else {
        n.domain.as_str()
    };
    let what = match err {
        crate::tables::attributes::AttributeError::Unrecognized(a) => {
            format!("Unrecognized attribute: {a} for operator {}", n.op)
        }
        crate::tables::attributes::AttributeError::MissingRequired(a) => {
            format!("Required attribute '{a}' is missing.")
        }
    };
    Some(format!(
        "load: This is an invalid model. In Node, (\"{}\", {}, \"{domain}\", -1) : Error {what}",
        n.name, n.op
    ))
}

/// The failure of a session with a node no provider took, worded as the release words it:
/// up to 1.22 session state finds no kernel to create; 1.23 fails in `MemcpyTransformer` on the
/// node's empty provider; from 1.24 that check names the node.
fn no_kernel_message(table: &KernelTable, n: &SNode) -> String {
    let since = n.since.unwrap_or(0);
    if table.release_at_least(1, 24) {
        format!(
            "no-kernel: Exception during initialization: Provider type for {} node with name '{}' \
             is not set ({}({since}) has no kernel on any provider)",
            n.op, n.name, n.op
        )
    } else if table.release_at_least(1, 23) {
        format!(
            "no-kernel: Exception during initialization: Unable to get provider associated with \
             provider type  ({}({since}) node with name '{}' has no kernel on any provider)",
            n.op, n.name
        )
    } else {
        format!(
            "no-kernel: Could not find an implementation for {}({since}) node with name '{}'",
            n.op, n.name
        )
    }
}

/// The nodes the fusions created carry their provider but no kernel yet: ORT looks their
/// kernels up when it plans the copies, and a kernel's host-memory arguments (a CUDA `Slice`'s
/// starts and ends, say) decide copies. Binds each to its schema's since-version and kernel.
fn bind_fused_kernels(
    session: &mut Session,
    table: &'static KernelTable,
    decisions: &mut Decisions,
) {
    let versions = infer::domain_versions(session, table);
    for gi in 0..session.graphs.len() {
        for ni in 0..session.graphs[gi].nodes.len() {
            let node = &session.graphs[gi].nodes[ni];
            let Some(ep) = node.ep.filter(|&e| e != Ep::Cpu) else {
                continue;
            };
            if node.removed || decisions.contains_key(NodeRef::new(gi, ni)) {
                continue;
            }
            let Ok(schema) = infer::resolve_schema(table, &versions, node.domain, node.op) else {
                continue;
            };
            session.graphs[gi].nodes[ni].since = Some(schema.since);
            let node = &session.graphs[gi].nodes[ni];
            if let Ok(kd) = lookup(table, ep, session, gi, node, Some(schema)) {
                session.graphs[gi].nodes[ni].kernel = Some(kd);
                decisions.insert(NodeRef::new(gi, ni), Decision::Provider);
            }
        }
    }
}

/// Live nodes that no provider has taken.
fn unassigned_nodes(session: &Session) -> impl Iterator<Item = NodeRef> + '_ {
    session.graphs.iter().enumerate().flat_map(|(gi, g)| {
        g.live_nodes()
            .filter(|(_, n)| n.ep.is_none())
            .map(move |(ni, _)| NodeRef::new(gi, ni))
    })
}

/// A domain imported at a version above what the release accepts fails the load (§2.1).
fn check_opsets(header: &Header, table: &KernelTable) -> Option<String> {
    // Model-local functions carry their own imports, and ORT validates those too.
    for (domain, v) in header.opsets.iter().chain(&header.function_opsets) {
        if let Some(max) = table.max_opset(domain)
            && *v > max
        {
            return Some(format!(
                "load: Opset {v} is under development and support for this is limited. \
                 Current official support for domain {domain} is till opset {max}."
            ));
        }
    }
    None
}

/// `GraphPartitioner::Partition`: each EP in order, every graph bottom-up.
fn partition(
    session: &mut Session,
    table: &'static KernelTable,
    options: &Options,
    decisions: &mut Decisions,
) {
    let mut resolver = infer::Resolver::new(session, table);
    let mut kernels = kernel::Kernels::new(table);
    decisions.reserve(session);
    // What the provider before the CPU found of the nodes it did not take: its miss, or the
    // kernel it had for a node the CPU-preferred pass moved.
    let mut provider_miss: HashMap<NodeRef, Miss> = HashMap::default();
    let mut provider_kernel: HashMap<NodeRef, &'static KernelDef> = HashMap::default();
    let mut unsupported: HashMap<NodeRef, String> = HashMap::default();
    let mut preferred: crate::sym::SymSet<NodeRef> = Default::default();
    // Partitioning assigns providers but never changes the graph: one order per graph serves
    // every provider's pass. A large session's kernels are looked up ahead on threads of their
    // own, each taking a part of a graph's nodes for one provider at a time, while another
    // thread builds the orders.
    let shared: &Session = session;
    let order_all = || -> Vec<Vec<usize>> {
        (0..shared.graphs.len())
            // From the producers of the editor the optimiser kept, where it is current.
            .map(|gi| crate::session::edit::Order::Kahn.compute(shared, gi))
            .collect()
    };
    let nodes: usize = shared.graphs.iter().map(|g| g.nodes.len()).sum();
    let (orders, mut found): (Vec<Vec<usize>>, Vec<Option<Found>>) =
        if nodes < PARALLEL_PARTITION_NODES {
            (order_all(), options.eps.iter().map(|_| None).collect())
        } else {
            std::thread::scope(|scope| {
                let orders = std::thread::Builder::new()
                    .name("orders".into())
                    .spawn_scoped(scope, order_all)
                    .ok();
                let found = found_kernels(shared, table, &options.eps);
                let orders = match orders.map(|t| t.join()) {
                    Some(Ok(orders)) => orders,
                    // A bug of the order itself, not of the input: it would panic here too.
                    Some(Err(panic)) => std::panic::resume_unwind(panic),
                    // No thread to build them on: built here.
                    None => order_all(),
                };
                (orders, found)
            })
        };
    for (e, &ep) in options.eps.iter().enumerate() {
        let provider = providers::of(ep);
        // The kernel found ahead for node `ni` of graph `gi`, else looked up here.
        let mut kernel_of = |session: &Session,
                             kernels: &mut kernel::Kernels<'static>,
                             resolver: &mut infer::Resolver<'_>,
                             gi: usize,
                             ni: usize|
         -> Result<&'static KernelDef, Miss> {
            if let Some(kd) = found[e]
                .as_mut()
                .and_then(|f| f.get_mut(gi)?.get_mut(ni)?.take())
            {
                return Ok(kd);
            }
            let node = &session.graphs[gi].nodes[ni];
            let resolved = resolver.resolve(node.domain, node.op).ok();
            let schema = resolved.as_ref().map(|r| r.schema);
            kernels.lookup(ep, session, gi, node, schema)
        };
        for gi in bottom_up(session) {
            match ep {
                // The provider ORT always registers last: it takes what it has a kernel for.
                Ep::Cpu => {
                    for &ni in &orders[gi] {
                        let node = &session.graphs[gi].nodes[ni];
                        if node.ep.is_some() {
                            continue;
                        }
                        let key = NodeRef::new(gi, ni);
                        let (decision, cpu) =
                            match kernel_of(session, &mut kernels, &mut resolver, gi, ni) {
                                Ok(cpu) => {
                                    let why = if let Some(kernel) = provider_kernel
                                        .remove(&key)
                                        .filter(|_| preferred.contains(&key))
                                    {
                                        Decision::CpuPreferred { kernel }
                                    } else if let Some(reason) = unsupported.remove(&key) {
                                        Decision::CpuUnsupported {
                                            reason: reason.into(),
                                        }
                                    } else if let Some(m) = provider_miss.remove(&key) {
                                        Decision::CpuFallback { miss: Box::new(m) }
                                    } else {
                                        Decision::Cpu
                                    };
                                    (why, cpu)
                                }
                                Err(cpu_miss) => {
                                    decisions.insert(
                                        key,
                                        Decision::Unassigned {
                                            provider_miss: provider_miss
                                                .get(&key)
                                                .cloned()
                                                .map(Box::new),
                                            cpu_miss: Box::new(cpu_miss),
                                        },
                                    );
                                    continue;
                                }
                            };
                        session.graphs[gi].nodes[ni].ep = Some(Ep::Cpu);
                        session.graphs[gi].nodes[ni].kernel = Some(cpu);
                        decisions.insert(key, decision);
                    }
                }
                // A provider before it: what it has a kernel for and does not decline, but
                // what ORT's CPU-preferred pass moves to the CPU (where the provider runs it).
                _ => {
                    let mut tentative: Vec<(usize, &'static KernelDef)> = Vec::new();
                    for &ni in &orders[gi] {
                        let node = &session.graphs[gi].nodes[ni];
                        if node.ep.is_some() {
                            continue;
                        }
                        match kernel_of(session, &mut kernels, &mut resolver, gi, ni) {
                            Err(m) => {
                                provider_miss.insert(NodeRef::new(gi, ni), m);
                            }
                            Ok(kd) => {
                                if let Some(reason) = (provider.rejects)(node) {
                                    unsupported.insert(NodeRef::new(gi, ni), reason);
                                } else {
                                    tentative.push((ni, kd));
                                }
                            }
                        }
                    }
                    let cpu = if provider.cpu_preferred {
                        cpu_preferred::cpu_preferred_nodes(session, gi, &orders[gi], &tentative)
                    } else {
                        Default::default()
                    };
                    for (ni, kd) in tentative {
                        let at = NodeRef::new(gi, ni);
                        if cpu.contains(&ni) {
                            preferred.insert(at);
                            provider_kernel.insert(at, kd);
                        } else {
                            session.graphs[gi].nodes[ni].ep = Some(ep);
                            session.graphs[gi].nodes[ni].kernel = Some(kd);
                            decisions.insert(at, Decision::Provider);
                        }
                    }
                }
            }
        }
    }
}

/// The sessions from which [`partition`] looks kernels up on threads of their own.
const PARALLEL_PARTITION_NODES: usize = 8192;

/// The nodes one thread looks kernels up for at a time, ahead of [`partition`].
const FOUND_CHUNK: usize = 16 * 1024;

/// Per graph, per node: the kernel one provider's pass would find for it, looked up ahead
/// (`None` for a removed or assigned node, and for a miss, which the pass looks up again to
/// say why: a miss is rare, and keeping only kernels keeps the table at a pointer per node).
type Found = Vec<Vec<Option<&'static KernelDef>>>;

/// [`Found`] for each provider of `eps`, on up to [`crate::threads::threads`] threads, each
/// taking the next part of a graph's nodes for one provider: a lookup's answer depends on the
/// node and the types it reads, never on the providers of other nodes, so it can be asked
/// before the pass, in any order.
fn found_kernels(session: &Session, table: &'static KernelTable, eps: &[Ep]) -> Vec<Option<Found>> {
    // (provider, graph, first node): every part of every graph, for each provider.
    let parts: Vec<(usize, usize, usize)> = (0..eps.len())
        .flat_map(|e| {
            session.graphs.iter().enumerate().flat_map(move |(gi, g)| {
                (0..g.nodes.len())
                    .step_by(FOUND_CHUNK)
                    .map(move |start| (e, gi, start))
            })
        })
        .collect();
    let answers =
        crate::threads::map_chunks(&parts, 1, crate::threads::threads(), "kernels", |part| {
            let mut resolver = infer::Resolver::new(session, table);
            let mut kernels = kernel::Kernels::new(table);
            part.iter()
                .map(|&(e, gi, start)| {
                    let nodes = &session.graphs[gi].nodes;
                    let end = nodes.len().min(start + FOUND_CHUNK);
                    nodes
                        .get(start..end)
                        .unwrap_or_default()
                        .iter()
                        .map(|node| {
                            if node.removed || node.ep.is_some() {
                                return None;
                            }
                            let resolved = resolver.resolve(node.domain, node.op).ok();
                            let schema = resolved.as_ref().map(|r| r.schema);
                            kernels.lookup(eps[e], session, gi, node, schema).ok()
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        });
    // The parts come back in order: provider by provider, graph by graph, node by node.
    let mut found: Vec<Found> = eps
        .iter()
        .map(|_| {
            session
                .graphs
                .iter()
                .map(|g| Vec::with_capacity(g.nodes.len()))
                .collect()
        })
        .collect();
    for (&(e, gi, _), answer) in parts.iter().zip(answers.into_iter().flatten()) {
        found[e][gi].extend(answer);
    }
    // Every part comes back (`map_chunks` answers each chunk once); checked all the same,
    // since a short table would misplace every later node's answer.
    found
        .into_iter()
        .map(|f| {
            let whole = f
                .iter()
                .zip(&session.graphs)
                .all(|(kinds, g)| kinds.len() == g.nodes.len());
            whole.then_some(f)
        })
        .collect()
}

/// Graphs in partition order: every subgraph before the graph holding it.
fn bottom_up(session: &Session) -> Vec<usize> {
    fn visit(session: &Session, gi: usize, out: &mut Vec<usize>) {
        for (_, n) in session.graphs[gi].live_nodes() {
            for (_, sg) in &n.subgraphs {
                visit(session, *sg, out);
            }
        }
        out.push(gi);
    }
    let mut out = Vec::new();
    if !session.graphs.is_empty() {
        visit(session, 0, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A main graph of `n` Relu nodes, `removed` marked removed.
    fn relus(n: usize, removed: &[usize]) -> Session {
        let relu = Sym::new("Relu");
        let nodes = (0..n)
            .map(|k| SNode {
                removed: removed.contains(&k),
                ..SNode::plain(
                    Sym::new(&format!("n{k}")),
                    relu,
                    Sym::AI_ONNX,
                    Some(14),
                    vec![Sym::new(&format!("v{k}"))],
                    vec![Sym::new(&format!("v{}", k + 1))],
                )
            })
            .collect();
        Session::of_nodes(nodes)
    }

    /// A large graph's load check, run a chunk per thread, finds the fault one walk finds: the
    /// first live node in index order, whichever chunk finishes first.
    #[test]
    fn a_check_on_threads_finds_the_first_fault_of_one_walk() {
        let n = PARALLEL_CHECK_NODES + 3 * CHECK_CHUNK + 17;
        let faulty = [2 * CHECK_CHUNK + 5, CHECK_CHUNK + 1, n - 1];
        for removed in [
            vec![],
            vec![CHECK_CHUNK + 1],
            vec![CHECK_CHUNK + 1, 2 * CHECK_CHUNK + 5],
        ] {
            let session = relus(n, &removed);
            let one_walk = (0..n)
                .filter(|k| !removed.contains(k))
                .find(|k| faulty.contains(k));
            let states = std::sync::atomic::AtomicUsize::new(0);
            let found = first_in_graph(
                &session,
                0,
                || states.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                |_, ni| faulty.contains(&ni).then(|| format!("fault at {ni}")),
            );
            assert_eq!(
                found.map(|(at, _)| at),
                one_walk.map(|k| NodeRef::new(0, k))
            );
            // One state per chunk: the graph was checked a chunk at a time (in one walk where
            // the machine gives no second thread).
            let chunks = if crate::threads::threads() < 2 {
                1
            } else {
                n.div_ceil(CHECK_CHUNK)
            };
            assert_eq!(states.into_inner(), chunks, "removed {removed:?}");
        }
        let clean = relus(n, &[]);
        assert_eq!(first_in_graph(&clean, 0, || (), |(), _| None::<()>), None);
    }
}
