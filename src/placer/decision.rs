//! Why each node landed where it did: one [`Decision`] per node, kept beside the session graph
//! (which holds the assignment itself, `SNode::ep` and `SNode::kernel`) for the rules and the
//! output to explain it.

use super::Miss;
use crate::session::Session;
use crate::tables::KernelDef;

/// Why a node landed where it did. Kernels are rows of the release's table, referenced, never
/// copied; the misses, rare, are boxed, so that a decision is four words (a million-node
/// session keeps a million of them).
#[derive(Debug, Clone)]
pub enum Decision {
    /// CUDA took it with this registration.
    Cuda(&'static KernelDef),
    /// CUDA had a kernel, the shape-subgraph pass moved it to CPU.
    CpuPreferred {
        cuda: &'static KernelDef,
        cpu: Option<&'static KernelDef>,
    },
    /// CUDA's lookup failed (`cuda_miss`); the CPU kernel took it.
    CpuFallback {
        cuda_miss: Box<Miss>,
        cpu: &'static KernelDef,
    },
    /// CUDA had a kernel but rejected the node (attributes it does not support).
    CpuUnsupported {
        reason: String,
        cpu: &'static KernelDef,
    },
    /// The provider list was CPU only.
    Cpu(&'static KernelDef),
    /// Inserted by ORT (Memcpy nodes).
    Inserted,
    /// No provider had a float16 kernel: ORT runs it on the CPU in float32 between inserted
    /// Casts (`InsertCastTransformer`).
    Fp32OnCpu {
        cuda_miss: Option<Box<Miss>>,
        cpu_miss: Box<Miss>,
    },
    /// No provider has a kernel: session creation fails.
    Unassigned {
        cuda_miss: Option<Box<Miss>>,
        cpu_miss: Box<Miss>,
    },
}

/// The decisions of a session, by (graph, node): one slot per node of each graph, in node
/// order, rather than a hash map (whose buckets for a million nodes took 220 MB; the vectors take
/// 34 MB, and nothing is hashed).
#[derive(Debug, Default, Clone)]
pub struct Decisions {
    graphs: Vec<Vec<Option<Decision>>>,
}

impl Decisions {
    /// Room for a decision on every node `session` has now.
    pub fn reserve(&mut self, session: &Session) {
        if self.graphs.len() < session.graphs.len() {
            self.graphs.resize_with(session.graphs.len(), Vec::new);
        }
        for (slots, g) in self.graphs.iter_mut().zip(&session.graphs) {
            slots.reserve(g.nodes.len().saturating_sub(slots.len()));
        }
    }

    /// The decision on node `ni` of graph `gi`.
    pub fn get(&self, &(gi, ni): &(usize, usize)) -> Option<&Decision> {
        self.graphs.get(gi)?.get(ni)?.as_ref()
    }

    /// Whether node `ni` of graph `gi` has a decision.
    pub fn contains_key(&self, key: &(usize, usize)) -> bool {
        self.get(key).is_some()
    }

    /// Records `decision` on node `ni` of graph `gi`, returning the one it replaces.
    pub fn insert(&mut self, (gi, ni): (usize, usize), decision: Decision) -> Option<Decision> {
        if self.graphs.len() <= gi {
            self.graphs.resize_with(gi + 1, Vec::new);
        }
        let slots = &mut self.graphs[gi];
        if slots.len() <= ni {
            slots.resize_with(ni + 1, || None);
        }
        slots[ni].replace(decision)
    }

    /// Takes the decision on node `ni` of graph `gi` away.
    pub fn remove(&mut self, &(gi, ni): &(usize, usize)) -> Option<Decision> {
        self.graphs.get_mut(gi)?.get_mut(ni)?.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_four_words() {
        assert!(std::mem::size_of::<Option<Decision>>() <= 4 * std::mem::size_of::<usize>());
    }

    #[test]
    fn decisions_behave_as_a_map_by_graph_and_node() {
        let mut d = Decisions::default();
        assert!(d.get(&(3, 7)).is_none());
        assert!(d.remove(&(3, 7)).is_none());
        assert!(d.insert((3, 7), Decision::Inserted).is_none());
        assert!(d.contains_key(&(3, 7)));
        assert!(!d.contains_key(&(3, 6)) && !d.contains_key(&(2, 7)));
        assert!(matches!(
            d.insert((3, 7), Decision::Inserted),
            Some(Decision::Inserted)
        ));
        assert!(matches!(d.remove(&(3, 7)), Some(Decision::Inserted)));
        assert!(!d.contains_key(&(3, 7)));
    }
}
