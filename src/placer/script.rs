//! The session script: ORT's `InferenceSession::Initialize` for one model, step by step, in
//! ORT's order (load checks, inference, function inlining, the level-1 transformers,
//! partitioning, the level-2 and level-3 transformers, the casts, Level4, the copies), and the
//! entry points that build the session graph first. `ARCHITECTURE.md` lists the steps.

use crate::infer::{self, SchemaError};
use crate::memcpy;
use crate::model::Model;
use crate::providers;
use crate::session::build::Header;
use crate::session::{NodeRef, SNode, Session};
use crate::sym::Sym;
use crate::tables::{Ep, KernelTable};

use super::load::{check_attributes, check_opsets, first_type_conflict};
use super::partition::partition;
use super::transformers::{
    casts, ensure_unique_dq_for_node_unit, fuse_initializers_transformer, fusions,
    matmul_integer_to_float, nchwc_transformer, nhwc_transformer, optimize, qdq_transformer,
    transpose,
};
use super::{Decision, Decisions, Options, Outcome, Placement, copy_plan_kernels};
use super::{functions, load, lookup};

/// Why the last [`place`] on this thread stopped short of a faithful simulation (a budget of
/// the analysis was exhausted), if it did.
pub fn budget_exceeded() -> Option<String> {
    functions::budget_exceeded()
}

/// Function inlining repeats while it changes something; functions nest only a few deep.
const MAX_INLINE_ROUNDS: usize = 16;

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
