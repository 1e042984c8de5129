//! ORT's name generation (`Graph::GenerateNodeName`, `Graph::GenerateNodeArgName`): one counter
//! per graph, shared by node and value names.

use super::{SGraph, SNode};
use crate::sym::{Sym, SymMap, SymSet};

/// ORT's `GenerateNodeName`/`GenerateNodeArgName`: the base name if free, else
/// `<base>_token_<k>`, with one counter per graph shared by both.
pub struct NameGen {
    nodes: crate::sym::SymSet<Sym>,
    values: crate::sym::SymSet<Sym>,
    pub counter: usize,
}

impl NameGen {
    pub fn new(g: &SGraph) -> NameGen {
        let mut values: crate::sym::SymSet<Sym> =
            g.inputs.iter().chain(&g.outputs).copied().collect();
        values.extend(g.initializers.keys().copied());
        let mut nodes: crate::sym::SymSet<Sym> = g.generated_names.iter().copied().collect();
        for (_, n) in g.live_nodes() {
            nodes.insert(n.name);
            values.extend(
                n.inputs
                    .iter()
                    .chain(&n.outputs)
                    .filter(|s| !s.is_empty())
                    .copied(),
            );
        }
        NameGen {
            nodes,
            values,
            counter: g.name_counter,
        }
    }

    fn fresh(set: &mut SymSet<Sym>, counter: &mut usize, base: &str) -> Sym {
        let name = fresh_by(counter, base, |s| set.contains(&s));
        set.insert(name);
        name
    }

    pub fn node(&mut self, base: &str) -> Sym {
        Self::fresh(&mut self.nodes, &mut self.counter, base)
    }

    pub fn value(&mut self, base: &str) -> Sym {
        Self::fresh(&mut self.values, &mut self.counter, base)
    }

    /// Marks a value name as taken without generating it.
    pub fn reserve_value(&mut self, name: Sym) {
        self.values.insert(name);
    }
}

/// The names taken in one graph, each counted by its uses, kept current by the graph's
/// [`crate::session::edit::Editor`]: what [`NameGen::new`] would find at any moment (the live
/// nodes' names and the values they read or write, the graph's inputs and outputs, its
/// initializers, the node names generated before) without a walk of the graph per name asked.
#[derive(Debug, Default)]
pub struct Taken {
    nodes: SymMap<Sym, u32>,
    values: SymMap<Sym, u32>,
    /// Generated since the last [`Taken::begin`]: taken, as [`NameGen`] takes what it generates.
    pending_nodes: SymSet<Sym>,
    pending_values: SymSet<Sym>,
}

impl Taken {
    /// The names graph `g` holds now.
    pub fn of(g: &SGraph) -> Taken {
        let mut t = Taken::default();
        for &v in g.inputs.iter().chain(&g.outputs) {
            t.value(v, true);
        }
        for (_, n) in g.live_nodes() {
            t.node(n, true);
        }
        t
    }

    /// Node `n` joins the graph's live nodes (`live`) or leaves them.
    pub fn node(&mut self, n: &SNode, live: bool) {
        count(&mut self.nodes, n.name, live);
        for &v in n.inputs.iter().chain(&n.outputs) {
            self.value(v, live);
        }
    }

    /// A live node's input or output reads or writes `v` (`live`), or no longer does.
    pub fn value(&mut self, v: Sym, live: bool) {
        if !v.is_empty() {
            count(&mut self.values, v, live);
        }
    }

    /// Starts what a fresh [`NameGen`] would start: the names generated so far are taken only
    /// if the graph holds them.
    pub fn begin(&mut self) {
        self.pending_nodes.clear();
        self.pending_values.clear();
    }

    /// [`NameGen::node`] on graph `g`'s counter.
    pub fn node_name(&mut self, g: &mut SGraph, base: &str) -> Sym {
        let generated = &g.generated_names;
        let held = |s: Sym| generated.contains(&s);
        fresh_counted(
            &self.nodes,
            &mut self.pending_nodes,
            &mut g.name_counter,
            base,
            held,
        )
    }

    /// [`NameGen::value`] on graph `g`'s counter.
    pub fn value_name(&mut self, g: &mut SGraph, base: &str) -> Sym {
        let inits = &g.initializers;
        let held = |s: Sym| inits.contains_key(&s);
        fresh_counted(
            &self.values,
            &mut self.pending_values,
            &mut g.name_counter,
            base,
            held,
        )
    }
}

/// A name from `base` on `counter` that no use in `counts`, nothing generated since the last
/// [`Taken::begin`] (`pending`, which takes it) and nothing `held` (what the graph holds
/// besides its nodes) has.
fn fresh_counted(
    counts: &SymMap<Sym, u32>,
    pending: &mut SymSet<Sym>,
    counter: &mut usize,
    base: &str,
    held: impl Fn(Sym) -> bool,
) -> Sym {
    let name = fresh_by(counter, base, |s| {
        counts.get(&s).is_some_and(|&c| c > 0) || held(s) || pending.contains(&s)
    });
    pending.insert(name);
    name
}

/// One more use of `name` (`up`) or one fewer.
fn count(map: &mut SymMap<Sym, u32>, name: Sym, up: bool) {
    let c = map.entry(name).or_default();
    *c = if up {
        c.saturating_add(1)
    } else {
        c.saturating_sub(1)
    };
}

/// `base` if `taken` says it is free, else the first free `<base>_token_<k>` on `counter`.
fn fresh_by(counter: &mut usize, base: &str, taken: impl Fn(Sym) -> bool) -> Sym {
    let mut name = Sym::new(base);
    while taken(name) {
        name = Sym::new(&format!("{base}_token_{counter}"));
        *counter += 1;
    }
    name
}

impl SGraph {
    /// ORT's `Graph::GenerateNodeArgName` for the name of an initializer a fusion creates while
    /// the simulation keeps reading the old one (`ConvBNFusion`'s folded weights): `base` if no
    /// value of the graph has that name and it was not generated before, else `base_token_<k>`.
    /// Only the counter and the remembered name matter; the name is returned for tests.
    pub fn generate_value_name(&mut self, base: &str) -> Sym {
        let taken = |g: &SGraph, s: Sym| {
            g.initializers.contains_key(&s)
                || g.generated_names.contains(&s)
                || g.inputs.iter().chain(&g.outputs).any(|&v| v == s)
        };
        let mut name = Sym::new(base);
        while taken(self, name) {
            name = Sym::new(&format!("{base}_token_{}", self.name_counter));
            self.name_counter += 1;
        }
        self.generated_names.insert(name);
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Init;

    /// `GenerateNodeArgName`: the base while free, then `_token_<k>` on the graph's counter,
    /// which a name generated once (even one no value holds) keeps taken.
    #[test]
    fn generated_value_names_take_the_counter_only_on_a_clash() {
        let mut g = SGraph {
            name_counter: 7,
            ..SGraph::default()
        };
        g.initializers.insert(
            Sym::new("ConvBnFusion_W_w"),
            Init {
                dims: vec![],
                elem: 1,
                overridable: false,
                tensor: Default::default(),
            },
        );
        assert_eq!(
            g.generate_value_name("ConvBnFusion_BN_B_b"),
            "ConvBnFusion_BN_B_b"
        );
        assert_eq!(g.name_counter, 7);
        assert_eq!(
            g.generate_value_name("ConvBnFusion_W_w"),
            "ConvBnFusion_W_w_token_7"
        );
        assert_eq!(g.name_counter, 8);
        // Generated before: taken though no value holds it.
        assert_eq!(
            g.generate_value_name("ConvBnFusion_BN_B_b"),
            "ConvBnFusion_BN_B_b_token_8"
        );
        assert_eq!(g.name_counter, 9);
    }
}
