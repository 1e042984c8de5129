//! ORT's `ConstantSharing` (`core/optimizer/constant_sharing.cc`).

use super::*;

impl Optimizer<'_> {
    /// `ConstantSharing` (`core/optimizer/constant_sharing.cc`), main graph only: constant
    /// initializers of type float, float16, double, int32 or int64 with at most
    /// [`SHARING_MAX_ELEMENTS`] elements that are equal in type, shape and values are merged
    /// into one, so that CSE can merge the nodes reading them. Initializers read by a subgraph
    /// or that are graph outputs are left alone. The oracle (1.23.2–1.31.1) shows what the
    /// released code does beyond the public source: tensors up to 8 elements of any rank are
    /// shared (9 are not), values compare bit for bit, only initializers held as tensor protos
    /// take part (not those folding or fusions created), and one of the original names is
    /// kept, the first in the order ORT's initializer map iterates
    /// ([`crate::session::initializer_map`]).
    pub(super) fn constant_sharing(
        &mut self,
        session: &mut Session,
        gi: usize,
        idx: &mut Editor,
    ) -> bool {
        if session.graphs[gi].parent.is_some() {
            return false;
        }
        let g = &session.graphs[gi];
        // The initializers that may be merged, by what they hold (the values are compared
        // below): fewer than two and nothing can be, without ordering the initializers or
        // scanning the nodes (a model of large weights only).
        let candidates: HashSet<Sym> = g
            .initializers
            .iter()
            .filter(|(name, init)| self.candidate(**name, init, idx))
            .map(|(name, _)| *name)
            .collect();
        if candidates.len() < 2 {
            return false;
        }
        // Who reads each candidate, from one scan of the graph: (read by a live node, read by
        // one through a subgraph). The merges are applied in one pass at the end, so the pass
        // stays linear when one node reads many initializers (a `Sum` of 80,000 equal constants).
        let mut reads: FxMap<Sym, (bool, bool)> =
            FxMap::with_capacity_and_hasher(candidates.len(), Default::default());
        for (_, n) in g.live_nodes() {
            for i in n.inputs.iter() {
                if candidates.contains(i) {
                    reads.entry(*i).or_default().0 = true;
                }
            }
            for i in &n.implicit_inputs {
                if candidates.contains(i) {
                    *reads.entry(*i).or_default() = (true, true);
                }
            }
        }
        // The candidates read by the graph's own nodes only, grouped by type, shape and value
        // (in the names' order: a group's members are ordered below).
        let mut read: Vec<Sym> = candidates
            .iter()
            .copied()
            .filter(|name| reads.get(name) == Some(&(true, false)))
            .collect();
        read.sort_unstable_by_key(|s| s.id());
        let mut groups: FxMap<(i32, Vec<i64>, Vec<u64>), Vec<Sym>> = FxMap::default();
        for name in read {
            let Some(init) = g.initializers.get(&name) else {
                continue;
            };
            let elem = init.elem;
            let int = elem == D::Int32 as i32 || elem == D::Int64 as i32;
            let Some(v) = self.values.get(session, gi, name) else {
                continue;
            };
            let bits: Vec<u64> = if int {
                v.as_i64().into_iter().map(|x| x as u64).collect()
            } else {
                // Compared bit for bit (oracle: NaNs merge, -0.0 and 0.0 do not).
                v.as_f64().into_iter().map(f64::to_bits).collect()
            };
            groups
                .entry((elem, init.dims.clone(), bits))
                .or_default()
                .push(name);
        }
        // Nothing equal (the usual case after the first step): the order is not needed.
        if groups.values().all(|members| members.len() < 2) {
            return false;
        }
        // ORT walks `GetAllInitializedTensors()`, a `std::unordered_map`, and keeps the first
        // of equal initializers it meets: its iteration order after the initializers were
        // inserted in the order ORT registered them.
        let mut order: Vec<Sym> =
            crate::session::initializer_map::iteration_order(g.init_order.iter().copied());
        order.retain(|name| g.initializers.contains_key(name));
        let seen: HashSet<Sym> = order.iter().copied().collect();
        if order.len() < g.initializers.len() {
            // By name (the texts), not in the map's order.
            let mut rest: Vec<Sym> = g
                .initializers
                .keys()
                .copied()
                .filter(|k| !seen.contains(k))
                .collect();
            rest.sort_unstable();
            order.extend(rest);
        }
        let position: FxMap<Sym, usize> = order
            .iter()
            .enumerate()
            .filter(|(_, name)| candidates.contains(name))
            .map(|(k, name)| (*name, k))
            .collect();
        let mut renames: FxMap<Sym, Sym> = FxMap::default();
        for members in groups.values().filter(|m| m.len() > 1) {
            let first = |name: &&Sym| position.get(*name).copied().unwrap_or(usize::MAX);
            let Some(&rep) = members.iter().min_by_key(first) else {
                continue;
            };
            for &name in members.iter().filter(|&&m| m != rep) {
                renames.insert(name, rep);
            }
        }
        if renames.is_empty() {
            return false;
        }
        idx.rename_inputs(session, &renames);
        let g = &mut session.graphs[gi];
        // Removals only: the map's order cannot reach the result.
        for name in renames.keys() {
            g.initializers.remove(name);
            self.values.forget(gi, *name);
        }
        true
    }

    /// Whether initializer `name` may take part in sharing, before its values are read: held
    /// as a tensor proto, constant, of a static shape with at most [`SHARING_MAX_ELEMENTS`]
    /// elements, of a shared type, and no graph output.
    fn candidate(&self, name: Sym, init: &Init, idx: &Editor) -> bool {
        let elem = init.elem;
        let int = elem == D::Int32 as i32 || elem == D::Int64 as i32;
        let float =
            elem == D::Float as i32 || elem == D::Float16 as i32 || elem == D::Double as i32;
        // What the entry holds first, then its dims, then the sets.
        (int || float)
            && !init.overridable
            && init.dims.iter().all(|&d| d >= 0)
            && init.elements().is_some_and(|n| n <= SHARING_MAX_ELEMENTS)
            && self.shareable.contains(&name)
            && !idx.is_output(name)
    }
}

/// `ConstantSharing` as its registry entry runs it: over the main graph's initializers.
pub(crate) const LEVEL1: super::Level1 =
    super::Level1(|step, session| step.walk(session, super::Pass::Sharing));
