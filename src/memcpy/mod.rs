//! ORT's `MemcpyTransformer` (`core/optimizer/transformer_memcpy.cc`) over a placement: which
//! values need a `MemcpyFromHost`/`MemcpyToHost` node, per graph, in ORT's order. Initializers
//! used on both sides are duplicated, not copied. Copy nodes are inserted into the session graph
//! (assigned to the provider) so that the final placement lists them as ORT does.
//!
//! ORT runs it once for each provider whose kernels work in device memory (not CPU-based), the
//! placer says which (`providers::Memory`): here a provider is only its key, `Ep`, and
//! every node of another provider is on the host side. Which arguments of the provider's own
//! nodes live in host memory comes from each node's bound kernel row.
//!
//! Pure: no I/O, no printing.

use crate::sym::SymSet as HashSet;

use crate::session::edit::Editor;
use crate::session::{EdgeEnd, NameGen, SNode, Session};
use crate::sym::Sym;
use crate::tables::Ep;

/// Which way a copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → device: a host value read by the provider.
    FromHost,
    /// Device → host: a provider's value read on the host.
    ToHost,
}

/// Why a value needs a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A graph input read by the provider and by host-side consumers.
    GraphInput,
    /// A host node's output (or a provider kernel's host-memory output) read by the provider.
    HostOutput,
    /// A provider's output read by a host node or at a host-memory input of a provider kernel.
    DeviceOutput,
    /// An outer-scope value read inside a subgraph on both sides.
    OuterScope,
}

/// One inserted copy node.
#[derive(Debug, Clone)]
pub struct Copy {
    /// Graph index in the session.
    pub graph: usize,
    /// The copy node's index in its graph.
    pub node: usize,
    pub direction: Direction,
    pub cause: Cause,
    /// The value copied, as ORT names it in its log.
    pub value: Sym,
    /// The copy node's name (`Memcpy`, `Memcpy_token_3`, ...).
    pub node_name: Sym,
    /// The provider the copy is for.
    pub ep: Ep,
}

impl Copy {
    /// ORT's INFO line for this copy.
    pub fn log_line(&self) -> String {
        match self.direction {
            Direction::FromHost => format!(
                "Add MemcpyFromHost after {} for {}",
                self.value,
                self.ep.name()
            ),
            Direction::ToHost => format!(
                "Add MemcpyToHost before {} for {}",
                self.value,
                self.ep.name()
            ),
        }
    }
}

/// Runs the copy pass for provider `ep` (one whose kernels work in device memory) on every
/// graph (main graph first, then subgraphs depth-first in node order) and returns the copies in
/// ORT's order.
pub fn insert(session: &mut Session, ep: Ep) -> Vec<Copy> {
    let mut copies = Vec::new();
    let mut stack = vec![0usize];
    let mut order = Vec::new();
    while let Some(gi) = stack.pop() {
        order.push(gi);
        let subs: Vec<usize> = session.graphs[gi]
            .live_nodes()
            .flat_map(|(_, n)| n.subgraphs.iter().map(|(_, s)| *s).collect::<Vec<_>>())
            .collect();
        stack.extend(subs.into_iter().rev());
    }
    for gi in order {
        graph_pass(session, gi, ep, &mut copies);
    }
    copies
}

/// Host-memory argument positions of a provider node's bound kernel (none without a kernel
/// row of the provider: a node a transformer copied from a CPU node carries that node's CPU
/// row).
fn host_args(n: &SNode, ep: Ep) -> (&'static [usize], &'static [usize]) {
    match n.kernel.filter(|kd| kd.ep == ep) {
        Some(kd) => (&kd.cpu_inputs, &kd.cpu_outputs),
        None => (&[], &[]),
    }
}

/// The initializers graph `gi` reads on both sides (in the order provider nodes first read
/// them) and the copies it needs, in ORT's order.
///
/// ORT collects four sets: values read and written on the provider side, values read and
/// written on the host side (non-provider nodes, and the host-memory arguments of provider
/// nodes), and plans from their intersections. Every question asked of the provider-side
/// sets is about a value of a host-side set, so only the host-side sets are built whole (few
/// values, where most nodes are on the provider); the provider side's reads and writes are
/// listed as they are met and held against them afterwards. A million-node graph builds no
/// set of a million values.
fn plan(session: &Session, gi: usize, ep: Ep) -> (Vec<Sym>, Vec<(Direction, Cause, Sym)>) {
    let g = &session.graphs[gi];
    let mut npi: HashSet<Sym> = HashSet::default();
    let mut npo: HashSet<Sym> = HashSet::default();
    // The provider side's reads (explicit inputs in device memory) and writes (outputs in
    // device memory), in node order.
    let mut device_reads: Vec<Sym> = Vec::with_capacity(g.values_estimate());
    let mut device_writes: Vec<Sym> = Vec::with_capacity(g.nodes.len());
    for (_, n) in g.live_nodes() {
        if n.ep == Some(ep) {
            let (cpu_in, cpu_out) = host_args(n, ep);
            for (i, name) in n.existing_inputs() {
                if cpu_in.contains(&i) {
                    npi.insert(name);
                } else {
                    device_reads.push(name);
                }
            }
            for (o, name) in n.existing_outputs() {
                if cpu_out.contains(&o) {
                    npo.insert(name);
                } else {
                    device_writes.push(name);
                }
            }
        } else {
            npi.extend(n.existing_inputs().map(|(_, name)| name));
            npo.extend(n.existing_outputs().map(|(_, name)| name));
        }
    }
    // The provider side's reads of values the host side reads or writes: all that is asked of
    // them.
    let mut pi: HashSet<Sym> = device_reads
        .iter()
        .copied()
        .filter(|v| npi.contains(v) || npo.contains(v))
        .collect();
    drop(device_reads);

    // Initializers read on both sides: the provider side gets a duplicate (below), whose
    // fresh name takes the initializer's place among the provider-side reads. A fresh name
    // is read by no node on the host side, so for planning the copies the duplicate only
    // removes the initializer from the provider side.
    let shared: HashSet<Sym> = npi
        .iter()
        .copied()
        .filter(|v| pi.contains(v) && session.initializer(gi, *v).is_some())
        .collect();
    let mut both: Vec<Sym> = Vec::new();
    if !shared.is_empty() {
        // In the order provider nodes first consume them (explicit inputs, then the values
        // their subgraphs read).
        let mut seen: HashSet<Sym> = HashSet::default();
        for (_, n) in g.live_nodes().filter(|(_, n)| n.ep == Some(ep)) {
            let consumed = n
                .existing_inputs()
                .map(|(_, name)| name)
                .chain(n.implicit_inputs.iter().copied());
            for name in consumed {
                if shared.contains(&name) && seen.insert(name) {
                    both.push(name);
                }
            }
        }
    }
    for init in &both {
        pi.remove(init);
    }

    let mut planned: Vec<(Direction, Cause, Sym)> = Vec::new();
    for input in &g.inputs {
        if pi.contains(input) && npi.contains(input) {
            planned.push((Direction::FromHost, Cause::GraphInput, *input));
        }
    }
    // Sorted by name (the texts: `Sym`'s order), as ORT walks its `std::set`s; the sets'
    // own order never reaches the plan.
    let mut host_outputs: Vec<Sym> = npo.iter().copied().filter(|v| pi.contains(v)).collect();
    host_outputs.sort_unstable();
    for v in host_outputs {
        planned.push((Direction::FromHost, Cause::HostOutput, v));
    }
    let mut device_outputs: Vec<Sym> = device_writes
        .into_iter()
        .filter(|v| npi.contains(v))
        .collect();
    device_outputs.sort_unstable();
    device_outputs.dedup();
    for v in device_outputs {
        planned.push((Direction::ToHost, Cause::DeviceOutput, v));
    }
    if let Some(p) = g.parent {
        for v in &session.graphs[p.graph()].nodes[p.node()].implicit_inputs {
            if pi.contains(v) && npi.contains(v) {
                planned.push((Direction::FromHost, Cause::OuterScope, *v));
            }
        }
    }
    (both, planned)
}

fn graph_pass(session: &mut Session, gi: usize, ep: Ep, copies: &mut Vec<Copy>) {
    // Which values are read and written on each side, as names borrowed from the graph: the
    // initializers read on both sides and the copies to plan are decided here, before the
    // graph is edited.
    let (both, planned) = plan(session, gi, ep);
    // The copies are the last edit: they rewire only the positions found below, so the
    // editor never needs its index.
    let mut ed = Editor::lazy(session, gi);

    // The name generator indexes every name of the graph: built only when a name is needed
    // (a duplicated initializer or a copy), from the graph as it stands here (nothing below
    // changes the graph before the generator is first needed).
    let mut names: Option<NameGen> = None;

    if !both.is_empty() {
        let names = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        let wanted: HashSet<Sym> = both.iter().copied().collect();
        let mut uses: crate::sym::SymMap<Sym, Vec<EdgeEnd>> = Default::default();
        for (ni, n) in session.graphs[gi].live_nodes() {
            if n.ep != Some(ep) {
                continue;
            }
            let cpu_in = host_args(n, ep).0;
            for (i, name) in n.inputs.iter().enumerate() {
                if wanted.contains(name) && !cpu_in.contains(&i) {
                    uses.entry(*name).or_default().push(EdgeEnd::new(ni, i));
                }
            }
        }
        for init in both {
            let dup = names.value(&init);
            if let Some(tensor) = session.initializer(gi, init).cloned() {
                let g = &mut session.graphs[gi];
                if let Some(t) = g.types.get(&init).cloned() {
                    g.types.insert(dup, t);
                }
                g.initializers.insert(dup, tensor);
            }
            for &at in uses.get(&init).map(Vec::as_slice).unwrap_or(&[]) {
                ed.set_input(session, at, dup);
            }
        }
    }

    // Where each value is read in device memory by a provider node, and which provider node
    // writes it in device memory: the uses a copy takes over.
    let mut device_reads: crate::sym::SymMap<Sym, Vec<EdgeEnd>> = Default::default();
    let mut device_writes: crate::sym::SymMap<Sym, Vec<EdgeEnd>> = Default::default();
    if !planned.is_empty() {
        let wanted: HashSet<Sym> = planned.iter().map(|(_, _, v)| *v).collect();
        for (ni, n) in session.graphs[gi].live_nodes() {
            if n.ep != Some(ep) {
                continue;
            }
            let (cpu_in, cpu_out) = host_args(n, ep);
            for (i, name) in n.inputs.iter().enumerate() {
                if wanted.contains(name) && !cpu_in.contains(&i) {
                    device_reads
                        .entry(*name)
                        .or_default()
                        .push(EdgeEnd::new(ni, i));
                }
            }
            for (o, name) in n.outputs.iter().enumerate() {
                if wanted.contains(name) && !cpu_out.contains(&o) {
                    device_writes
                        .entry(*name)
                        .or_default()
                        .push(EdgeEnd::new(ni, o));
                }
            }
        }
    }
    let mut names = match names {
        Some(names) => names,
        None if planned.is_empty() => return,
        None => NameGen::new(&session.graphs[gi]),
    };
    for (direction, cause, value) in planned {
        let node_name = names.node("Memcpy");
        let new_value = names.value(&format!("{value}_{}", ep.name()));
        // Device-memory reads of the value now read the copy (FromHost) or the provider's
        // renamed output (ToHost); a ToHost copy produces the original name on the host.
        for &at in device_reads.get(&value).map(Vec::as_slice).unwrap_or(&[]) {
            ed.set_input(session, at, new_value);
        }
        if direction == Direction::ToHost {
            for &at in device_writes.get(&value).map(Vec::as_slice).unwrap_or(&[]) {
                ed.set_output(session, at, new_value);
            }
        }
        let (input, output, op) = match direction {
            Direction::FromHost => (value, new_value, Sym::MEMCPY_FROM_HOST),
            Direction::ToHost => (new_value, value, Sym::MEMCPY_TO_HOST),
        };
        let g = &mut session.graphs[gi];
        if let Some(t) = g.types.get(&value).cloned() {
            g.types.insert(
                if direction == Direction::FromHost {
                    output
                } else {
                    input
                },
                t,
            );
        }
        let node = ed.add(
            session,
            SNode {
                name: node_name,
                op,
                domain: Sym::AI_ONNX,
                since: Some(1),
                inputs: vec![input],
                outputs: vec![output],
                attrs: thin_vec::ThinVec::new(),
                subgraphs: thin_vec::ThinVec::new(),
                implicit_inputs: thin_vec::ThinVec::new(),
                ep: Some(ep),
                kernel: None,
                origin: None,
                removed: false,
            },
        );
        copies.push(Copy {
            graph: gi,
            node,
            direction,
            cause,
            value,
            node_name,
            ep,
        });
    }
    session.graphs[gi].name_counter = names.counter;
}
