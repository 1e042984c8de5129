//! ORT's `GraphPartitioner::Partition` with the providers of the list: each provider in order
//! (`crate::providers`), every graph bottom-up; a provider takes the nodes it has a kernel for
//! (`kernel.rs`: `KernelRegistry::TryFindKernel`) and does not decline (its `GetCapability`,
//! `Provider::rejects`), but those ORT's CPU-preferred pass moves to the CPU
//! (`cpu_preferred.rs`, for the providers that run it); the CPU, last, takes what it has a
//! kernel for. Why each node landed where it did is recorded as a [`Decision`].

mod cpu_preferred;
pub(super) mod kernel;

use crate::infer;
use crate::providers;
use crate::session::{NodeRef, Session};
use crate::sym::SymMap as HashMap;
use crate::tables::{Ep, KernelDef, KernelTable};

use super::{Decision, Decisions, Miss, Options};

/// `GraphPartitioner::Partition`: each EP in order, every graph bottom-up.
pub(super) fn partition(
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
