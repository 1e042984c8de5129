//! ORT's `ConstantFolding` (`core/optimizer/constant_folding.cc`), with the inlining of an `If`
//! whose condition is constant.

use super::*;

impl Optimizer<'_> {
    pub(super) fn fold(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        if node.op == Sym::IF && node.domain == Sym::AI_ONNX {
            // The branch's values come in with their shapes by name: every node is inferred
            // again.
            let inlined = self.inline_if(session, gi, ni, idx);
            if inlined {
                session.infer_again();
            }
            return inlined;
        }
        if node.op == Sym::SHAPE && node.domain == Sym::AI_ONNX {
            let Some(x) = node
                .inputs
                .first()
                .and_then(|i| session.shape_of(gi, *i))
                .cloned()
            else {
                return false;
            };
            let r = x.len() as i64;
            let clamp = |v: i64| {
                let v = if v < 0 { v + r } else { v };
                v.clamp(0, r)
            };
            let (st, en) = if node.since.unwrap_or(0) >= 15 {
                (
                    clamp(node.attr_i("start").unwrap_or(0)),
                    clamp(node.attr_i("end").unwrap_or(r)),
                )
            } else {
                (0, r)
            };
            let dims: Option<Vec<i64>> = x[st as usize..en.max(st) as usize]
                .iter()
                .copied()
                .collect();
            let Some(dims) = dims else {
                return false;
            };
            let out = node.outputs.first().cloned().unwrap_or_default();
            self.add_initializer(session, gi, out, Some(Tensor::i64_1d(dims)));
            // The Shape goes first, so that a producer it alone read is seen dead and removed
            // with its own dead producers (`RemoveNodesWithOneOutputBottomUp` from each input
            // node; the CPU wheels 1.23.2 and 1.31.1 remove `Shape(Concat(Unsqueeze(Gather)))`'s
            // whole chain, and keep a producer another node still reads).
            idx.remove(session, ni);
            Self::remove_dead_inputs(session, gi, ni, idx);
            return true;
        }
        if node.domain != Sym::AI_ONNX
            || !is_deterministic(node.domain, node.op)
            || !node.subgraphs.is_empty()
            || node.op == Sym::DEQUANTIZE_LINEAR
        {
            return false;
        }
        if !node
            .inputs
            .iter()
            .all(|i| i.is_empty() || Self::is_constant_init(session, gi, *i))
        {
            return false;
        }
        if node
            .existing_outputs()
            .any(|(_, o)| !matches!(session.type_of(gi, o), Some(Type::Tensor(_)) | None))
        {
            return false;
        }
        let schema = infer::resolve_schema(self.table, &self.versions, node.domain, node.op).ok();
        if crate::placer::lookup(self.table, Ep::Cpu, session, gi, node, schema).is_err() {
            return false;
        }
        // Evaluate when small and supported; otherwise keep the inferred shape only.
        let names = node.inputs.clone();
        let mut owned: Vec<Option<Tensor>> = Vec::with_capacity(names.len());
        let mut all_known = true;
        // Inputs are copied only within the evaluator's per-step budget (`infer::eval`): a
        // `Concat` of one large constant 20,000 times would copy gigabytes.
        let mut read = 0usize;
        for n in &names {
            if n.is_empty() {
                owned.push(None);
            } else {
                let v = all_known.then(|| self.constant(session, gi, *n)).flatten();
                read = read.saturating_add(v.as_ref().map_or(0, Tensor::len));
                all_known &= v.is_some() && read <= eval::MAX_STEP_INPUT;
                owned.push(v.filter(|_| all_known));
            }
        }
        let node = &session.graphs[gi].nodes[ni];
        let results = if all_known {
            let refs: Vec<Option<&Tensor>> = owned.iter().map(Option::as_ref).collect();
            eval::eval(
                &NodeView {
                    op: &node.op,
                    domain: &node.domain,
                    since: node.since.unwrap_or(0),
                    attrs: &node.attrs,
                },
                &refs,
            )
        } else {
            None
        };
        if results.is_none() {
            shapes::infer_and_record(session, gi, ni, &mut self.values);
        }
        let outs = session.graphs[gi].nodes[ni].outputs.clone();
        let mut results = results.map(Vec::into_iter);
        for o in &outs {
            let v = results.as_mut().and_then(Iterator::next);
            if !o.is_empty() {
                self.add_initializer(session, gi, *o, v);
            }
        }
        idx.remove(session, ni);
        Self::remove_dead_inputs(session, gi, ni, idx);
        true
    }

    /// `If` with a constant condition (ORT's `ConstantFoldIfNode` and `Graph::InlineIfSubgraph`,
    /// `core/optimizer/constant_folding.cc`, `core/graph/graph.cc`): the chosen branch's nodes
    /// are appended to this graph in the branch's `GraphViewer` order and the `If` is removed.
    /// Names follow ORT: a prefix `GenerateNodeName("_if_then_branch")` (or `_if_else_branch`),
    /// each node named `GenerateNodeName(<prefix>_<op>)`, each branch initializer and node
    /// output renamed `GenerateNodeArgName(<prefix>_<name>)`, except the branch outputs, which
    /// take the names of the `If`'s outputs; outer-scope values keep their names. All of these
    /// draw on the graph's one `_token_<k>` counter.
    pub(super) fn inline_if(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        let Some(cond) = node.inputs.first().cloned() else {
            return false;
        };
        if !Self::is_constant_init(session, gi, cond) {
            return false;
        }
        let Some(v) = self.constant(session, gi, cond) else {
            return false;
        };
        if v.len() != 1 {
            return false;
        }
        let then = v.as_i64()[0] != 0;
        let branch = if then { "then_branch" } else { "else_branch" };
        let node = &session.graphs[gi].nodes[ni];
        let Some(sg) = node
            .subgraphs
            .iter()
            .find(|(a, _)| a == branch)
            .map(|(_, s)| *s)
        else {
            return false;
        };
        let if_outputs = node.outputs.clone();
        let sub_outputs = session.graphs[sg].outputs.clone();
        if sub_outputs.len() != if_outputs.len() {
            return false;
        }
        let order = crate::session::order::ort_topological_order(session, sg);
        let sub = &session.graphs[sg];
        // The branch must be self-contained for ORT to inline it: every input of its nodes is
        // an outer-scope value, a branch initializer or an earlier node's output (ORT throws
        // otherwise, failing the session; here the `If` is left alone).
        let mut known: HashSet<Sym> = sub.initializers.keys().copied().collect();
        let defined: HashSet<Sym> = sub
            .live_nodes()
            .flat_map(|(_, m)| m.outputs.iter().copied())
            .chain(sub.inputs.iter().copied())
            .collect();
        for &k in &order {
            let n = &sub.nodes[k];
            if n.inputs
                .iter()
                .any(|i| !i.is_empty() && !known.contains(i) && defined.contains(i))
            {
                return false;
            }
            known.extend(n.outputs.iter().filter(|o| !o.is_empty()).copied());
        }

        idx.begin_names(session);
        let mut generated: Vec<Sym> = Vec::new();
        let prefix = idx.node_name(session, &format!("_if_{branch}"));
        generated.push(prefix);
        // Branch output i is the If's output i (the first mention wins, as in ORT).
        let mut rename: HashMap<Sym, Sym> = HashMap::default();
        for (&o, &target) in sub_outputs.iter().zip(&if_outputs) {
            rename.entry(o).or_insert(target);
        }
        let sub = session.graphs[sg].clone();
        // The branch's initializers by name (the texts), not in the map's order: the names
        // are generated, and the initializers registered, in this order.
        let mut inits: Vec<Sym> = sub.initializers.keys().copied().collect();
        inits.sort_unstable();
        for &name in &inits {
            rename
                .entry(name)
                .or_insert_with(|| idx.value_name(session, &format!("{prefix}_{name}")));
        }
        for &k in &order {
            for &o in sub.nodes[k].outputs.iter().filter(|o| !o.is_empty()) {
                rename
                    .entry(o)
                    .or_insert_with(|| idx.value_name(session, &format!("{prefix}_{o}")));
            }
        }
        let map = |n: &Sym| rename.get(n).copied().unwrap_or(*n);
        for name in &inits {
            let Some(init) = sub.initializers.get(name) else {
                continue;
            };
            let new = map(name);
            let mut init = init.clone();
            init.tensor.name = Some(new.to_string());
            let g = &mut session.graphs[gi];
            g.types.insert(new, Type::Tensor(init.elem));
            g.shapes.insert(
                new,
                init.dims.iter().map(|&d| (d >= 0).then_some(d)).collect(),
            );
            self.values.forget(gi, new);
            if gi == 0 {
                self.shareable.insert(new);
            }
            g.init_order.push(new);
            g.initializers.insert(new, init);
        }
        // The branch's types and shapes by name (the texts), not in the maps' order: where two
        // names map to one (a branch output renamed to a name the branch also types), the
        // first in this order wins.
        let mut typed: Vec<(&Sym, &Type)> = sub.types.iter().collect();
        typed.sort_unstable_by_key(|&(name, _)| name);
        for (name, t) in typed {
            session.graphs[gi]
                .types
                .entry(map(name))
                .or_insert_with(|| t.clone());
        }
        let mut shaped: Vec<(&Sym, &Vec<Option<i64>>)> = sub.shapes.iter().collect();
        shaped.sort_unstable_by_key(|&(name, _)| name);
        for (name, s) in shaped {
            session.graphs[gi]
                .shapes
                .entry(map(name))
                .or_insert_with(|| s.clone());
        }
        // The renames to carry into nested subgraphs, applied one after the other in the
        // names' order (the texts), not the map's: a chain (`a` to `b`, `b` to `c`) would
        // otherwise depend on it.
        let mut renames: Vec<(Sym, Sym)> = rename
            .iter()
            .filter(|(from, to)| from != to)
            .map(|(&from, &to)| (from, to))
            .collect();
        renames.sort_unstable();
        let mut branch = crate::session::edit::Editor::lazy(session, sg);
        for &k in &order {
            let mut n = sub.nodes[k].clone();
            n.name = idx.node_name(session, &format!("{prefix}_{}", n.op));
            generated.push(n.name);
            // ORT drops trailing missing inputs and outputs.
            while n.inputs.last().is_some_and(|i| i.is_empty()) {
                n.inputs.pop();
            }
            while n.outputs.last().is_some_and(|o| o.is_empty()) {
                n.outputs.pop();
            }
            n.inputs = n
                .inputs
                .iter()
                .map(|i| if i.is_empty() { *i } else { map(i) })
                .collect();
            n.outputs = n
                .outputs
                .iter()
                .map(|o| if o.is_empty() { *o } else { map(o) })
                .collect();
            n.implicit_inputs = n.implicit_inputs.iter().map(map).collect();
            let new_index = session.graphs[gi].nodes.len();
            if !n.subgraphs.is_empty() {
                self.parents.insert(gi);
            }
            for (_, s) in &n.subgraphs {
                session.graphs[*s].parent = Some(crate::session::NodeRef::new(gi, new_index));
                for &(from, to) in &renames {
                    crate::session::edit::rename_in_subgraph(session, *s, from, to, 0);
                }
            }
            idx.add(session, n);
            // The branch's own node moved: the branch graph is left empty, never walked again.
            branch.move_out(session, k);
        }
        // A branch output that no branch node or initializer defines (an outer-scope value
        // passed through): ORT leaves the If's output undefined. Keep the graph well formed
        // with an Identity so that the simulation can go on.
        let produced: HashSet<Sym> = sub
            .nodes
            .iter()
            .filter(|n| !n.removed)
            .flat_map(|n| n.outputs.iter())
            .chain(sub.initializers.keys())
            .copied()
            .collect();
        let mut passthrough: Vec<(Sym, Sym)> = Vec::new();
        for (o, &target) in sub_outputs.iter().zip(&if_outputs) {
            if target.is_empty() || produced.contains(o) && rename.get(o) == Some(&target) {
                continue;
            }
            passthrough.push((map(o), target));
        }
        let identity = Sym::new("Identity");
        let since = infer::resolve_schema(self.table, &self.versions, Sym::AI_ONNX, identity)
            .ok()
            .map(|s| s.since);
        for (src, target) in passthrough {
            if src == target {
                continue;
            }
            let name = idx.node_name(session, &format!("{prefix}_Identity"));
            generated.push(name);
            idx.add(
                session,
                SNode::plain(name, identity, Sym::AI_ONNX, since, vec![src], vec![target]),
            );
        }
        let g = &mut session.graphs[gi];
        g.generated_names.extend(generated);
        idx.remove(session, ni);
        true
    }
}

/// `ConstantFolding` as its registry entry runs it: node by node, in the optimiser's walk.
pub(crate) const LEVEL1: super::Level1 =
    super::Level1(|step, session| step.walk(session, super::Pass::Fold));
