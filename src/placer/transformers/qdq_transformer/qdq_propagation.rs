//! ORT's `QDQPropagationTransformer` (`qdq_transformer/qdq_propagation.cc`), a level-1
//! transformer on every provider (unless `session.disable_quant_qdq` is set; it is not by
//! default).
//!
//! The nodes that only move data (`MaxPool` 12, `Reshape` 5/13/14/19, `Transpose` 1/13,
//! `Squeeze` and `Unsqueeze` 1/11/13, `Slice` 1/10/11/13, ai.onnx) get the quantization of
//! their neighbours copied across them, as `Q -> DQ` pairs ORT inserts:
//! - backward, from each `QuantizeLinear` with constant scalar scale (and zero point): while the
//!   edge before it comes, as the only edge of a value that is no graph output, from such a
//!   node, a pair goes on that node's input edge (input 0), up to a `DequantizeLinear`;
//! - forward, from each `DequantizeLinear` with constant scalar scale (and zero point) and one
//!   output edge: while its consumer is such a node, a `Q` goes after that node and a `DQ` on
//!   each of its output edges, one node further each time (breadth first), unless one of those
//!   edges already ends in a `Q` (the whole group is left alone then: measured on
//!   `tests/fixtures/realworld/qop.tsd.gpt_neox.L2`, whose `Slice` feeds a `Q` and three nodes).
//!
//! Names as ORT makes them from the edge's value `v` with the graph's name generator: values
//! `v_pre_q` (the source's new output; `v` itself when it is a graph input or initializer),
//! `v_q_to_dq`, `v_post_dq<k>` (`v` itself on a graph output); nodes `v_q` and `v_dq<k>`
//! (`k` empty for the first edge, then 1, 2, ...). Nodes are visited in the topological order
//! of the graph as it was when the pass began, backward first, then forward; subgraphs first.

use super::{MAX_DEPTH, constant_scalar_scale_and_zp, is_dq, is_q, zero_point_elem};
use crate::infer::Type;
use crate::model::DataType as D;
use crate::session::edit::Editor;
use crate::session::{EdgeEnd, NameGen, SNode, Session};
use crate::sym::Sym;

/// One edge of the graph as ORT's `ExtendedGraphEdge`: from a node's output slot or a graph
/// input/initializer (`src: None`), to a node's input slot or a graph output (`dst: None`).
#[derive(Debug, Clone)]
struct Edge {
    src: Option<EdgeEnd>,
    dst: Option<EdgeEnd>,
    arg: Sym,
}

/// Applies the transformer to graph `gi` (its subgraphs first); whether it inserted anything.
pub fn run(session: &mut Session, gi: usize) -> bool {
    run_at(session, gi, 0)
}

fn run_at(session: &mut Session, gi: usize, depth: usize) -> bool {
    if depth > MAX_DEPTH || gi >= session.graphs.len() {
        return false;
    }
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    let mut modified = false;
    for &ni in &order {
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for s in subs {
            modified |= run_at(session, s, depth + 1);
        }
    }
    let mut p = Propagation {
        // Built once; each insertion keeps it current.
        ed: Editor::open(session, gi),
        names: NameGen::new(&session.graphs[gi]),
        gi,
    };
    // Each step walks one node further through the graph: never more steps than nodes.
    let budget = session.graphs[gi].nodes.len() * 4 + 16;
    let mut steps = 0usize;
    for &ni in &order {
        let n = &session.graphs[gi].nodes[ni];
        if !is_q(n) {
            continue;
        }
        let Some(has_zp) = constant_scalar_scale_and_zp(session, gi, n) else {
            continue;
        };
        let qdq = QuantParams::of(session, gi, n, has_zp);
        let Some(mut edge) = p.previous_edge(session, ni) else {
            continue;
        };
        while let Some(cur) = p.previous_propagation_edge(session, &edge) {
            steps += 1;
            if steps > budget {
                break;
            }
            if let Some(EdgeEnd { node: src, .. }) = cur.src
                && is_dq(&session.graphs[gi].nodes[src])
            {
                break;
            }
            p.insert(session, std::slice::from_ref(&cur), &qdq);
            modified = true;
            edge = cur;
        }
    }
    for &ni in &order {
        let n = &session.graphs[gi].nodes[ni];
        if !is_dq(n) || p.ed.produces_graph_output(n) || p.ed.node_output_edges(session, n, 1) != 1
        {
            continue;
        }
        let Some(has_zp) = constant_scalar_scale_and_zp(session, gi, n) else {
            continue;
        };
        let qdq = QuantParams::of(session, gi, n, has_zp);
        let Some(after) = p.next_edge(session, ni) else {
            continue;
        };
        let mut groups: std::collections::VecDeque<Vec<Edge>> = Default::default();
        groups.push_back(p.next_propagation_edges(session, &after));
        while let Some(group) = groups.pop_front() {
            let g = &session.graphs[gi];
            if group.is_empty()
                || group
                    .iter()
                    .any(|e| e.dst.is_some_and(|d| is_q(&g.nodes[d.node])))
            {
                continue;
            }
            steps += 1;
            if steps > budget {
                break;
            }
            p.insert(session, &group, &qdq);
            modified = true;
            for e in &group {
                groups.push_back(p.next_propagation_edges(session, e));
            }
        }
    }
    session.graphs[gi].name_counter = p.names.counter;
    p.ed.keep(session);
    modified
}

/// The scale, zero point, domain and since-version of the Q or DQ whose quantization is
/// copied.
struct QuantParams {
    scale: Sym,
    zero_point: Option<Sym>,
    /// The quantized type (the zero point's; `uint8` without one).
    zero_point_elem: Option<i32>,
    domain: Sym,
    since: Option<i64>,
}

impl QuantParams {
    fn of(session: &Session, gi: usize, n: &SNode, has_zp: bool) -> QuantParams {
        QuantParams {
            zero_point_elem: zero_point_elem(session, gi, n),
            scale: n.inputs[1],
            zero_point: has_zp.then(|| n.inputs[2]),
            domain: n.domain,
            since: n.since,
        }
    }
}

/// `CanNodePropagate`.
fn can_propagate(n: &SNode) -> bool {
    if n.removed || n.domain != Sym::AI_ONNX {
        return false;
    }
    let versions: &[i64] = match n.op.as_str() {
        // ORT 1.23+ lists the opset-21+ versions too (a 16-bit QDQ model is opset 21).
        "MaxPool" => &[12, 22],
        "Reshape" => &[5, 13, 14, 19, 21, 23, 24, 25],
        "Transpose" => &[1, 13, 21, 23, 24, 25],
        "Squeeze" | "Unsqueeze" => &[1, 11, 13, 21, 23, 24, 25],
        "Slice" => &[1, 10, 11, 13],
        _ => return false,
    };
    n.since.is_some_and(|v| versions.contains(&v))
}

struct Propagation {
    ed: Editor,
    names: NameGen,
    gi: usize,
}

impl Propagation {
    /// `GetPreviousEdge`: the edge into input 0 of node `ni`, when its source value has that one
    /// edge and is no graph output, or comes from a graph input or initializer.
    fn previous_edge(&self, session: &Session, ni: usize) -> Option<Edge> {
        let g = &session.graphs[self.gi];
        let arg = *g.nodes[ni].inputs.first().filter(|a| !a.is_empty())?;
        match self.ed.producer_slot(session, arg) {
            Some(src) => (!self.ed.is_output(arg) && self.ed.edge_count(session, arg, 1) == 1)
                .then_some(Edge {
                    src: Some(src),
                    dst: Some(EdgeEnd::new(ni, 0)),
                    arg,
                }),
            None => {
                (g.inputs.contains(&arg) || g.initializers.contains_key(&arg)).then_some(Edge {
                    src: None,
                    dst: Some(EdgeEnd::new(ni, 0)),
                    arg,
                })
            }
        }
    }

    /// `GetPreviousPropagationEdge`.
    fn previous_propagation_edge(&self, session: &Session, edge: &Edge) -> Option<Edge> {
        let EdgeEnd { node: src, .. } = edge.src?;
        if !can_propagate(&session.graphs[self.gi].nodes[src]) {
            return None;
        }
        self.previous_edge(session, src)
    }

    /// `GetNextEdges`: the edges out of output 0 of node `ni`, then one to the graph output when
    /// the value is one.
    fn next_edges(&self, session: &Session, ni: usize) -> Vec<Edge> {
        let g = &session.graphs[self.gi];
        let Some(arg) = g.nodes[ni].outputs.first().filter(|a| !a.is_empty()) else {
            return Vec::new();
        };
        let slots = self.ed.reader_slots(session, *arg);
        // A subgraph's read is an edge this simulation does not rewire: leave the value alone.
        if slots.iter().any(|e| e.arg == usize::MAX) {
            return Vec::new();
        }
        let mut out: Vec<Edge> = slots
            .into_iter()
            .map(|dst| Edge {
                src: Some(EdgeEnd::new(ni, 0)),
                dst: Some(dst),
                arg: *arg,
            })
            .collect();
        if self.ed.is_output(*arg) {
            out.push(Edge {
                src: Some(EdgeEnd::new(ni, 0)),
                dst: None,
                arg: *arg,
            });
        }
        out
    }

    /// The one edge out of output 0 of node `ni`, if it has one.
    fn next_edge(&self, session: &Session, ni: usize) -> Option<Edge> {
        let mut all = self.next_edges(session, ni);
        if all.len() == 1 { all.pop() } else { None }
    }

    /// `GetNextPropagationEdges`: past the destination of `edge` when it can propagate, its
    /// output edges.
    fn next_propagation_edges(&self, session: &Session, edge: &Edge) -> Vec<Edge> {
        let Some(EdgeEnd { node: dst, .. }) = edge.dst else {
            return Vec::new();
        };
        if !can_propagate(&session.graphs[self.gi].nodes[dst]) {
            return Vec::new();
        }
        self.next_edges(session, dst)
    }

    /// `InsertQDQPairs`: a `Q` after the edges' common source, a `DQ` before each destination.
    fn insert(&mut self, session: &mut Session, edges: &[Edge], qp: &QuantParams) {
        let Some(first) = edges.first() else { return };
        let gi = self.gi;
        let base = first.arg;
        let pre_q = if first.src.is_none() {
            base
        } else {
            self.names.value(&format!("{base}_pre_q"))
        };
        let q_to_dq = self.names.value(&format!("{base}_q_to_dq"));
        let q_name = self.names.node(&format!("{base}_q"));
        let g = &mut session.graphs[gi];
        let base_type = g.types.get(&base).cloned();
        let base_shape = g.shapes.get(&base).cloned();
        let zp_elem = qp.zero_point_elem.unwrap_or(D::Uint8 as i32);
        let set_meta = |g: &mut crate::session::SGraph, v: Sym, t: Option<Type>| {
            if let Some(t) = t {
                g.types.insert(v, t);
            }
            if let Some(s) = &base_shape {
                g.shapes.insert(v, s.clone());
            }
        };
        set_meta(g, pre_q, base_type.clone());
        set_meta(g, q_to_dq, Some(Type::Tensor(zp_elem)));
        let qdq_inputs = |data: Sym| {
            let mut v = vec![data, qp.scale];
            if let Some(z) = qp.zero_point {
                v.push(z);
            }
            v
        };
        let node = |name: Sym, op: Sym, inputs: Vec<Sym>, output: Sym| {
            SNode::plain(name, op, qp.domain, qp.since, inputs, vec![output])
        };
        g.generated_names.insert(q_name);
        self.ed.add(
            session,
            node(q_name, Sym::QUANTIZE_LINEAR, qdq_inputs(pre_q), q_to_dq),
        );
        // The edges' ends come from the editor's own lookups: each names an existing slot.
        if let Some(src) = first.src {
            self.ed.set_output(session, src, pre_q);
        }
        for (k, e) in edges.iter().enumerate() {
            let suffix = if k == 0 { String::new() } else { k.to_string() };
            let post_dq = if e.dst.is_none() {
                base
            } else {
                self.names.value(&format!("{base}_post_dq{suffix}"))
            };
            let dq_name = self.names.node(&format!("{base}_dq{suffix}"));
            let g = &mut session.graphs[gi];
            set_meta(g, post_dq, base_type.clone());
            g.generated_names.insert(dq_name);
            self.ed.add(
                session,
                node(
                    dq_name,
                    Sym::DEQUANTIZE_LINEAR,
                    qdq_inputs(q_to_dq),
                    post_dq,
                ),
            );
            if let Some(dst) = e.dst {
                self.ed.set_input(session, dst, post_dq);
            }
        }
    }
}

/// `QDQPropagationTransformer` as its registry entry runs it (level 1): only where the session
/// has a QuantizeLinear or a DequantizeLinear.
pub(crate) const LEVEL1: crate::placer::transformers::optimize::Level1 =
    crate::placer::transformers::optimize::Level1(|step, session| {
        (step.q || step.dq) && step.edited(session, run)
    });
