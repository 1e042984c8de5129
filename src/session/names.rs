//! ORT's name generation (`Graph::GenerateNodeName`, `Graph::GenerateNodeArgName`): one counter
//! per graph, shared by node and value names.

use super::SGraph;
use crate::sym::Sym;

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

    fn fresh(set: &mut crate::sym::SymSet<Sym>, counter: &mut usize, base: &str) -> Sym {
        let mut name = Sym::new(base);
        while set.contains(&name) {
            name = Sym::new(&format!("{base}_token_{counter}"));
            *counter += 1;
        }
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
