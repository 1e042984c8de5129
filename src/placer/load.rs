//! Load-time checks that need shapes: ONNX shape inference runs inside ORT's `Graph::Resolve`
//! at every optimisation level, and some of its errors fail the load (`Load model from ...
//! failed: Node (...) Op (...) [ShapeInferenceError] ...`).
//!
//! Pure: no I/O, no printing.

use crate::infer;
use crate::session::build::Header;
use crate::session::{NodeRef, SNode, Session};
use crate::sym::Sym;
use crate::tables::KernelTable;

/// ONNX's Concat shape inference (`onnx/defs/tensor/defs.cc`): when every input's rank is known,
/// all must equal input 0's. The first such Concat (graph by graph, in Kahn order, as `Resolve`
/// visits them) with its load error; measured with onnxruntime 1.31.1 (CPU):
/// `Node (cat) Op (Concat) [ShapeInferenceError] All inputs to Concat must have same rank.
/// Input 1 has rank 1 != 2`.
pub fn concat_rank_conflict(session: &Session) -> Option<(crate::session::NodeRef, String)> {
    for gi in 0..session.graphs.len() {
        // The order only decides which conflict comes first: built when there is one.
        if !session.graphs[gi].any_live_node(|n| ranks_conflict(session, gi, n).is_some()) {
            continue;
        }
        for ni in crate::infer::topological_order(session, gi) {
            if let Some(found) = conflict(session, gi, ni) {
                return Some(found);
            }
        }
    }
    None
}

/// Node `ni`'s Concat rank conflict, if it is a Concat with one.
fn conflict(session: &Session, gi: usize, ni: usize) -> Option<(crate::session::NodeRef, String)> {
    let n = session.graphs[gi].nodes.get(ni)?;
    if n.removed {
        return None;
    }
    let (i, r, rank) = ranks_conflict(session, gi, n)?;
    Some((
        crate::session::NodeRef::new(gi, ni),
        format!(
            "load: Node ({}) Op (Concat) [ShapeInferenceError] All inputs to Concat must have \
             same rank. Input {i} has rank {r} != {rank}",
            n.name
        ),
    ))
}

/// Node `n`'s Concat rank conflict, if it is a Concat with one: the input, its rank and the
/// first input's.
fn ranks_conflict(
    session: &Session,
    gi: usize,
    n: &crate::session::SNode,
) -> Option<(usize, usize, usize)> {
    if n.op != "Concat" || n.domain != Sym::AI_ONNX {
        return None;
    }
    let ranks: Vec<usize> = n
        .inputs
        .iter()
        .map(|&name| {
            (!name.is_empty())
                .then(|| session.shape_of(gi, name).map(Vec::len))
                .flatten()
        })
        .collect::<Option<_>>()?;
    let &rank = ranks.first()?;
    let (i, r) = ranks.iter().enumerate().find(|(_, r)| **r != rank)?;
    Some((i, *r, rank))
}

/// A domain imported at a version above what the release accepts fails the load (§2.1).
pub(super) fn check_opsets(header: &Header, table: &KernelTable) -> Option<String> {
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

/// The first live node whose inputs bind a type parameter to two types (ORT's type check, which
/// runs at load and again on every function body it inlines).
pub(super) fn first_type_conflict(
    session: &Session,
    table: &KernelTable,
) -> Option<(NodeRef, String)> {
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
pub(super) fn first_in_graph<S, T: Send>(
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
pub(super) fn check_attributes(
    session: &Session,
    table: &KernelTable,
) -> Option<(NodeRef, String)> {
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
