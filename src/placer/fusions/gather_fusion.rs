//! ORT's `GatherSliceToSplitFusion` and `GatherToSliceFusion` (`core/optimizer/gather_fusion.cc`).

use super::*;

/// A planned `GatherSliceToSplitFusion`.
pub(super) struct SplitPlan {
    axis: i64,
    /// The fused Gathers and Slices, in node order.
    consumers: Vec<usize>,
    /// (start, node, length along the axis, needs a Squeeze).
    parts: Vec<(i64, usize, i64, bool)>,
}

impl Fuser {
    /// Gathers (scalar constant indices) and Slices (constant start/end, step 1) of one value
    /// along one axis that together cover the whole axis → one `Split`, named
    /// `<last of them>/GatherSliceToSplitFusion`, plus a `Squeeze` (named `Squeeze`) for each
    /// Gather with 0-D indices.
    ///
    /// Follows `GatherSliceToSplitFusion::ApplyImpl` in `onnxruntime/core/optimizer/gather_fusion.cc`
    /// (1.23–1.31): ai.onnx opset 13 or later; Gather-13 and Slice-13 only, on CPU or CUDA;
    /// the candidates are graph inputs and initializers read more than once and the single
    /// output of every non-`Shape` node with more than one output edge; consumers that are
    /// neither Gather nor Slice do not stop it. The new nodes take the first fused node's
    /// provider. Per Squeeze ORT generates a value name `split_output` and an initializer
    /// name `squeeze_axes`, then one `splits`, which advance the name counter as it does.
    pub(super) fn gather_slice_to_split(&mut self, session: &mut Session) {
        let g = &session.graphs[self.gi];
        // Only values read by two or more Gathers/Slices can fuse: count those first, so the
        // pass costs a hash lookup per node.
        let (gather, slice) = (Sym::new("Gather"), Sym::new("Slice"));
        let mut sliced: HashMap<Sym, usize> = HashMap::default();
        for (_, n) in g.live_nodes() {
            if (n.op == gather || n.op == slice)
                && let Some(&x) = n.inputs.first()
            {
                *sliced.entry(x).or_default() += 1;
            }
        }
        let many = |v: Sym| sliced.get(&v).is_some_and(|&k| k >= 2);
        if !sliced.values().any(|&k| k >= 2) {
            return;
        }
        let mut candidates: Vec<Sym> = Vec::new();
        for &i in &g.inputs {
            if many(i) {
                candidates.push(i);
            }
        }
        // By name (the texts), not in the map's order.
        let mut inits: Vec<Sym> = g
            .initializers
            .keys()
            .copied()
            .filter(|&i| many(i))
            .collect();
        inits.sort_unstable();
        candidates.extend(inits);
        for ni in self.pass_order(session) {
            let n = &g.nodes[ni];
            if n.op == Sym::SHAPE || n.outputs.len() != 1 || !many(n.outputs[0]) {
                continue;
            }
            if self.out_edges(session, n) > 1 {
                candidates.push(n.outputs[0]);
            }
        }
        for v in candidates {
            if let Some(plan) = self.match_split(session, v) {
                self.apply_split(session, v, plan);
            }
        }
    }

    pub(super) fn match_split(&self, session: &Session, v: Sym) -> Option<SplitPlan> {
        let g = &session.graphs[self.gi];
        let shape = session.shape_of(self.gi, v)?;
        let rank = shape.len() as i64;
        let mut consumers: Vec<usize> = self
            .readers(session, v)
            .filter(|&c| {
                let n = &g.nodes[c];
                n.inputs.first().is_some_and(|i| *i == v) && (n.op == "Gather" || n.op == "Slice")
            })
            .collect();
        consumers.sort_unstable();
        consumers.dedup();
        if consumers.len() < 2 {
            return None;
        }
        let norm = |a: i64| if a < 0 { a + rank } else { a };
        let axis_of = |n: &SNode| -> Option<i64> {
            match n.op.as_str() {
                "Gather" => Some(norm(n.attr_i("axis").unwrap_or(0))),
                _ => Some(norm(scalar_i64(session, self.gi, *n.inputs.get(3)?)?.0)),
            }
        };
        let axis = axis_of(&g.nodes[consumers[0]])?;
        let dim = (*shape.get(usize::try_from(axis).ok()?)?)?;
        let size = usize::try_from(dim)
            .ok()
            .filter(|&d| d > 0 && d <= 1 << 20)?;
        let mut consumed = vec![false; size];
        // (start, node, split length, needs a Squeeze)
        let mut parts: Vec<(i64, usize, i64, bool)> = Vec::new();
        for &c in &consumers {
            let n = &g.nodes[c];
            if !self.compatible.contains(n.ep) || n.domain != Sym::AI_ONNX || n.since != Some(13) {
                return None;
            }
            if axis_of(n)? != axis {
                return None;
            }
            if n.op == "Gather" {
                let (mut i, r) = scalar_i64(session, self.gi, *n.inputs.get(1)?)?;
                if i < 0 {
                    i += dim;
                }
                let k = usize::try_from(i).ok().filter(|&k| k < size)?;
                if consumed[k] {
                    return None;
                }
                consumed[k] = true;
                parts.push((i, c, 1, r == 0));
            } else {
                let (mut s, _) = scalar_i64(session, self.gi, *n.inputs.get(1)?)?;
                let (mut e, _) = scalar_i64(session, self.gi, *n.inputs.get(2)?)?;
                if s < 0 {
                    s += dim;
                }
                if e < 0 {
                    e += dim;
                }
                let (s, e) = (s.clamp(0, dim), e.clamp(0, dim));
                if s >= e {
                    return None;
                }
                if let Some(step) = n.inputs.get(4).filter(|x| !x.is_empty())
                    && scalar_i64(session, self.gi, *step)?.0 != 1
                {
                    return None;
                }
                for k in s..e {
                    let k = k as usize;
                    if consumed[k] {
                        return None;
                    }
                    consumed[k] = true;
                }
                parts.push((s, c, e - s, false));
            }
        }
        if consumed.iter().any(|c| !c) {
            return None;
        }
        Some(SplitPlan {
            axis,
            consumers,
            parts,
        })
    }

    pub(super) fn apply_split(&mut self, session: &mut Session, v: Sym, mut plan: SplitPlan) {
        plan.parts.sort_by_key(|p| p.0);
        let g = &session.graphs[self.gi];
        let first = plan.consumers[0];
        let ep = g.nodes[first].ep;
        let value_type = session.type_of(self.gi, v).cloned();
        let shape = session.shape_of(self.gi, v).cloned().unwrap_or_default();
        let mut squeezes: Vec<SNode> = Vec::new();
        let mut split_outputs: Vec<Sym> = Vec::new();
        let mut splits: Vec<i64> = Vec::new();
        let mut new_values: Vec<(Sym, Vec<Option<i64>>)> = Vec::new();
        let mut new_inits: Vec<(Sym, i64)> = Vec::new();
        for &(_, c, len, squeeze) in &plan.parts {
            let out = g.nodes[c].outputs.first().cloned().unwrap_or_default();
            splits.push(len);
            if !squeeze {
                split_outputs.push(out);
                continue;
            }
            let arg = self.arg_name(session, "split_output");
            let axes = self.node_name(session, "squeeze_axes");
            let name = self.node_name(session, "Squeeze");
            let mut dims = shape.clone();
            if let Some(d) = dims.get_mut(plan.axis as usize) {
                *d = Some(len);
            }
            new_values.push((arg, dims));
            new_inits.push((axes, plan.axis));
            squeezes.push(SNode {
                name,
                op: Sym::new("Squeeze"),
                domain: Sym::AI_ONNX,
                since: Some(13),
                inputs: vec![arg, axes],
                outputs: vec![out],
                attrs: thin_vec::ThinVec::new(),
                subgraphs: thin_vec::ThinVec::new(),
                implicit_inputs: thin_vec::ThinVec::new(),
                ep,
                kernel: None,
                origin: g.nodes[c].origin,
                removed: false,
            });
            split_outputs.push(arg);
        }
        let splits_name = self.node_name(session, "splits");
        let last = plan.consumers.last().copied().unwrap_or(first);
        let base = format!("{}/GatherSliceToSplitFusion", g.nodes[last].name);
        let name = self.node_name(session, &base);
        let mut split = fused_node(&g.nodes[first], "Split");
        split.domain = Sym::AI_ONNX;
        split.since = Some(if self.opset >= 18 { 18 } else { 13 });
        split.name = name;
        split.inputs = vec![v, splits_name];
        split.outputs = split_outputs;
        split.attrs = thin_vec::thin_vec![int_attr("axis", plan.axis)];
        for (name, dims) in new_values {
            let gm = &mut session.graphs[self.gi];
            if let Some(t) = &value_type {
                gm.types.insert(name, t.clone());
            }
            gm.shapes.insert(name, dims);
        }
        for (name, axis) in new_inits {
            self.add_initializer(session, name, &[axis]);
        }
        self.add_initializer(session, splits_name, &splits);
        let new = self.fuse(session, &plan.consumers, first, split);
        for sq in squeezes {
            let k = self.add(session, sq);
            self.pos.resize(k + 1, usize::MAX);
            self.attach(new, k);
        }
    }

    /// `Range → Gather(indices = the range)` → three `Unsqueeze` nodes (named `Unsqueeze_0`,
    /// `Unsqueeze_1`, `Unsqueeze_2`, on the Range's provider, reading the Range's inputs) and
    /// a `Slice` named `Slice` on the Gather's provider.
    ///
    /// Follows `GatherToSliceFusion::ApplyImpl` in `onnxruntime/core/optimizer/gather_fusion.cc`
    /// (1.23–1.31): Range-11 with one output edge, Gather-1/11/13, both on CPU or CUDA. The
    /// Unsqueezes can put a CUDA node on values the CPU computed, adding copies.
    pub(super) fn gather_to_slice(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let g = &session.graphs[self.gi];
            let rn = &g.nodes[ni];
            if rn.removed
                || !is_op(rn, "Range", &[11])
                || !self.compatible.contains(rn.ep)
                || self.out_edges(session, rn) != 1
                || rn.inputs.len() != 3
                || rn.outputs.first().is_none_or(Sym::is_empty)
            {
                continue;
            }
            let Some(gather) = self.children(session, rn).first().copied() else {
                continue;
            };
            let gn = &g.nodes[gather];
            if !is_op(gn, "Gather", &[1, 11, 13])
                || !self.compatible.contains(gn.ep)
                || gn.inputs.get(1) != rn.outputs.first()
            {
                continue;
            }
            let range_ep = rn.ep;
            let range_inputs = rn.inputs.clone();
            let elem = session.type_of(self.gi, rn.outputs[0]).cloned();
            let axis = gn.attr_i("axis").unwrap_or(0);
            let origin = gn.origin;
            let mut outs = Vec::new();
            for i in 0..3 {
                outs.push(self.arg_name(session, &format!("unsqueeze_output_{i}")));
            }
            let axes =
                (self.opset >= 13).then(|| self.node_name(session, "UnsqueezeAxesInitializer"));
            let mut unsqueezes = Vec::new();
            for (i, input) in range_inputs.iter().enumerate() {
                let name = self.node_name(session, &format!("Unsqueeze_{i}"));
                let mut inputs = vec![*input];
                inputs.extend(axes);
                unsqueezes.push(SNode {
                    name,
                    op: Sym::new("Unsqueeze"),
                    domain: Sym::AI_ONNX,
                    since: Some(if self.opset >= 13 { 13 } else { 11 }),
                    inputs,
                    outputs: vec![outs[i]],
                    attrs: if self.opset >= 13 {
                        thin_vec::ThinVec::new()
                    } else {
                        thin_vec::thin_vec![AttributeProto {
                            name: Some("axes".to_string()),
                            r#type: Some(AttributeType::Ints as i32),
                            ints: vec![0],
                            ..Default::default()
                        }]
                    },
                    subgraphs: thin_vec::ThinVec::new(),
                    implicit_inputs: thin_vec::ThinVec::new(),
                    ep: range_ep,
                    kernel: None,
                    origin,
                    removed: false,
                });
            }
            let slice_axes = self.node_name(session, "SliceAxesInitializer");
            let slice_name = self.node_name(session, "Slice");
            for o in &outs {
                let gm = &mut session.graphs[self.gi];
                if let Some(t) = &elem {
                    gm.types.insert(*o, t.clone());
                }
                gm.shapes.insert(*o, vec![Some(1)]);
            }
            if let Some(a) = &axes {
                self.add_initializer(session, *a, &[0]);
            }
            self.add_initializer(session, slice_axes, &[axis]);
            let gn = &session.graphs[self.gi].nodes[gather];
            let mut slice = fused_node(gn, "Slice");
            slice.domain = Sym::AI_ONNX;
            slice.since = Some(13);
            slice.name = slice_name;
            slice.inputs = vec![gn.inputs[0], outs[0], outs[1], slice_axes, outs[2]];
            slice.outputs = gn.outputs.clone();
            self.fuse(session, &[ni, gather], gather, slice);
            // The Unsqueezes come before the Slice in later passes: put them after the
            // Range's place, which the Slice does not take.
            for u in unsqueezes {
                let k = self.add(session, u);
                self.pos.resize(k + 1, usize::MAX);
                self.attach(ni, k);
            }
        }
    }
}
