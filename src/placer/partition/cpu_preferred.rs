//! `GetCpuPreferredNodes` (ORT `core/framework/fallback_cpu_capability.cc`): starting from the
//! CPU-memory outputs of CUDA kernels (`Shape`, `Size`, ...), walk downstream and move to the CPU
//! every tentative CUDA node whose inputs are all CPU values, small initializers or graph inputs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::sym::{SymMap as HashMap, SymSet as HashSet};

use crate::infer::is_cuda_preferred_float;
use crate::session::Session;
use crate::sym::Sym;
use crate::tables::{Ep, KernelDef};

/// Initializers with at most this many elements count as cheap CPU inputs.
const SMALL_INITIALIZER: u64 = 100;

/// The tentative nodes (index, CUDA kernel) of graph `gi` that ORT moves to the CPU.
pub fn cpu_preferred_nodes(
    session: &Session,
    gi: usize,
    topo: &[usize],
    tentative: &[(usize, &KernelDef)],
) -> HashSet<usize> {
    let g = &session.graphs[gi];
    // The walk starts only from CPU-memory outputs: without any, nothing moves.
    if !tentative.iter().any(|(_, kd)| !kd.cpu_outputs.is_empty()) {
        return HashSet::default();
    }
    let mut order: Vec<usize> = vec![usize::MAX; g.nodes.len()];
    for (pos, &ni) in topo.iter().enumerate() {
        order[ni] = pos;
    }
    // Consumers by value name within this graph, explicit and implicit inputs alike (ORT's
    // output edges).
    let mut consumers: HashMap<Sym, Vec<usize>> =
        HashMap::with_capacity_and_hasher(g.values_estimate(), Default::default());
    for (i, n) in g.live_nodes() {
        for name in n.inputs.iter().chain(&n.implicit_inputs) {
            if !name.is_empty() {
                let list = consumers.entry(*name).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
    }
    let kernel: HashMap<usize, &KernelDef> = tentative.iter().map(|(i, k)| (*i, *k)).collect();
    let graph_inputs: HashSet<Sym> = g.inputs.iter().copied().collect();

    let mut cpu_args: HashSet<Sym> = HashSet::default();
    let mut queue: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let push = |queue: &mut BinaryHeap<Reverse<(usize, usize)>>, ni: usize| {
        if let Some(&pos) = order.get(ni).filter(|&&p| p != usize::MAX) {
            queue.push(Reverse((pos, ni)));
        }
    };
    for (ni, kd) in tentative {
        let node = &g.nodes[*ni];
        for (o, name) in node.existing_outputs() {
            if kd.cpu_outputs.contains(&o) {
                cpu_args.insert(name);
                for &c in consumers.get(&name).map(Vec::as_slice).unwrap_or(&[]) {
                    push(&mut queue, c);
                }
            }
        }
    }

    let mut visited: HashSet<usize> = HashSet::default();
    let mut result = HashSet::default();
    while let Some(Reverse((_, cur))) = queue.pop() {
        if !visited.insert(cur) {
            continue;
        }
        let node = &g.nodes[cur];
        let Some(kd) = kernel.get(&cur) else {
            if matches!(node.ep, None | Some(Ep::Cpu)) {
                for (_, name) in node.existing_outputs() {
                    cpu_args.insert(name);
                    for &c in consumers.get(&name).map(Vec::as_slice).unwrap_or(&[]) {
                        push(&mut queue, c);
                    }
                }
            }
            continue;
        };
        let mut place_on_cpu = true;
        for (i, &name) in node.inputs.iter().enumerate() {
            if !name.is_empty()
                && let Some(t) = session.type_of(gi, name)
                && is_cuda_preferred_float(t, true)
            {
                place_on_cpu = false;
                break;
            }
            if !name.is_empty() {
                let small_init = session
                    .initializer(gi, name)
                    .is_some_and(|init| init.elements().is_some_and(|n| n <= SMALL_INITIALIZER));
                if small_init || graph_inputs.contains(&name) {
                    continue;
                }
            }
            if !cpu_args.contains(&name) {
                place_on_cpu = false;
                break;
            }
            if kd.cpu_inputs.contains(&i) {
                place_on_cpu = false;
                break;
            }
        }
        if place_on_cpu {
            result.insert(cur);
            for (_, name) in node.existing_outputs() {
                cpu_args.insert(name);
                for &c in consumers.get(&name).map(Vec::as_slice).unwrap_or(&[]) {
                    push(&mut queue, c);
                }
            }
        }
    }
    result
}
