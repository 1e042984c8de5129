//! Why each node landed where it did: one [`Decision`] per node, kept beside the session graph,
//! which holds the assignment itself (`SNode::ep`, the provider, and `SNode::kernel`, the
//! release's kernel row the node is bound to) once: a decision names no provider's kernel that
//! the node runs with, only the reason it runs there (and, for a node the provider before the
//! CPU gave up, what that provider would have run it with or why it could not).
//!
//! The provider lists simulated hold one provider before the CPU at most (`providers::list`):
//! "the provider" below is that one.

use super::Miss;
use crate::session::{NodeRef, Session};
use crate::tables::KernelDef;

/// Why a node landed where it did. The node's provider and bound kernel are on the node; a
/// decision holds only what explains them. Kernels are rows of the release's table,
/// referenced, never copied; the misses, rare, are boxed, so that a decision is three words (a
/// million-node session keeps a million of them).
#[derive(Debug, Clone)]
pub enum Decision {
    /// The provider before the CPU took it.
    Provider,
    /// The provider had a kernel (`kernel`), the shape-subgraph pass moved the node to CPU.
    CpuPreferred { kernel: &'static KernelDef },
    /// The provider's lookup failed (`miss`); the CPU kernel took it.
    CpuFallback { miss: Box<Miss> },
    /// The provider had a kernel but its `GetCapability` declined the node (attributes it
    /// does not support).
    CpuUnsupported { reason: Box<str> },
    /// The provider list was CPU only.
    Cpu,
    /// Inserted by ORT (Memcpy nodes).
    Inserted,
    /// No provider had a float16 kernel: ORT runs it on the CPU in float32 between inserted
    /// Casts (`InsertCastTransformer`).
    Fp32OnCpu {
        provider_miss: Option<Box<Miss>>,
        cpu_miss: Box<Miss>,
    },
    /// No provider has a kernel: session creation fails.
    Unassigned {
        provider_miss: Option<Box<Miss>>,
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

    /// The decision on node `at`.
    pub fn get(&self, at: NodeRef) -> Option<&Decision> {
        self.graphs.get(at.graph())?.get(at.node())?.as_ref()
    }

    /// Whether node `at` has a decision.
    pub fn contains_key(&self, at: NodeRef) -> bool {
        self.get(at).is_some()
    }

    /// Records `decision` on node `at`, returning the one it replaces.
    pub fn insert(&mut self, at: NodeRef, decision: Decision) -> Option<Decision> {
        let (gi, ni) = (at.graph(), at.node());
        if self.graphs.len() <= gi {
            self.graphs.resize_with(gi + 1, Vec::new);
        }
        let slots = &mut self.graphs[gi];
        if slots.len() <= ni {
            slots.resize_with(ni + 1, || None);
        }
        slots[ni].replace(decision)
    }

    /// Takes the decision on node `at` away.
    pub fn remove(&mut self, at: NodeRef) -> Option<Decision> {
        self.graphs.get_mut(at.graph())?.get_mut(at.node())?.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_three_words() {
        assert!(std::mem::size_of::<Option<Decision>>() <= 3 * std::mem::size_of::<usize>());
    }

    #[test]
    fn decisions_behave_as_a_map_by_graph_and_node() {
        let mut d = Decisions::default();
        let at = |g, n| NodeRef::new(g, n);
        assert!(d.get(at(3, 7)).is_none());
        assert!(d.remove(at(3, 7)).is_none());
        assert!(d.insert(at(3, 7), Decision::Inserted).is_none());
        assert!(d.contains_key(at(3, 7)));
        assert!(!d.contains_key(at(3, 6)) && !d.contains_key(at(2, 7)));
        assert!(matches!(
            d.insert(at(3, 7), Decision::Provider),
            Some(Decision::Inserted)
        ));
        assert!(matches!(d.remove(at(3, 7)), Some(Decision::Provider)));
        assert!(!d.contains_key(at(3, 7)));
    }
}
