//! ORT's `RuleBasedGraphTransformer` (`core/optimizer/rule_based_graph_transformer.cc`) with
//! the rewrite rules of `GenerateRewriteRules`: per node, the rules registered for its op, in
//! registration order. The eliminations whose body is a few lines (`EliminateIdentity`
//! `identity_elimination.cc`, `EliminateDropout` `dropout_elimination.cc`, `CastElimination`
//! `cast_elimination.cc`, `PreShapeNodeElimination` `pre_shape_node_elimination.cc`,
//! `EliminateSlice` `slice_elimination.cc`, `ExpandElimination` `expand_elimination.cc`,
//! `NotWhereFusion` `not_where_fusion.cc`, `UnsqueezeElimination` `unsqueeze_elimination.cc`)
//! are written here; the others have their own file.

use super::*;

/// The ops that have rules: the rules' walk reads no other node.
pub(super) const RULE_OPS: &[&str] = &[
    "Identity",
    "Unsqueeze",
    "Dropout",
    "Cast",
    "Slice",
    "Expand",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Where",
    "Conv",
    "Relu",
    "Gemm",
    "Pad",
];

impl Optimizer<'_> {
    pub(super) fn rules(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        // Only these ops have rules: skip the rest before cloning names.
        let has_rule = RULE_OPS.contains(&node.op.as_str());
        if node.domain != Sym::AI_ONNX || !has_rule {
            return false;
        }
        let input0 = node.inputs.first().cloned().unwrap_or_default();
        let out0 = node.outputs.first().cloned().unwrap_or_default();
        match node.op.as_str() {
            "Identity" => {
                if !idx.is_output(out0) {
                    return Self::bypass(session, gi, ni, idx, input0);
                }
                // The output is a graph output: the producer writes it directly.
                let Some(p) = idx.producer(session, input0) else {
                    return false;
                };
                if idx.is_output(input0) || idx.sole_user(session, input0).is_none() {
                    return false;
                }
                let slots: Vec<usize> = session.graphs[gi].nodes[p]
                    .outputs
                    .iter()
                    .enumerate()
                    .filter(|&(_, &o)| o == input0)
                    .map(|(k, _)| k)
                    .collect();
                for k in slots {
                    idx.set_output(session, EdgeEnd::new(p, k), out0);
                }
                idx.remove(session, ni);
                true
            }
            "Dropout" => {
                let mask_used = node.outputs.get(1).is_some_and(|m| {
                    !m.is_empty() && (idx.is_output(*m) || idx.has_users(session, *m))
                });
                if mask_used {
                    return false;
                }
                let training = node.inputs.get(2).filter(|n| !n.is_empty()).cloned();
                if let Some(t) = training {
                    match self.constant(session, gi, t) {
                        Some(v) if v.as_i64().iter().all(|&x| x == 0) => {}
                        _ => return false,
                    }
                }
                Self::bypass(session, gi, ni, idx, input0)
            }
            "Cast" => {
                let to = node.attr_i("to");
                let same = matches!(session.type_of(gi, input0), Some(Type::Tensor(e)) if Some(i64::from(*e)) == to);
                if same {
                    return Self::bypass(session, gi, ni, idx, input0);
                }
                // PreShapeNodeElimination: a Cast read only by Shape nodes.
                let users = idx.users(session, out0);
                if !users.is_empty()
                    && !idx.is_output(out0)
                    && users.iter().all(|&u| {
                        let n = &session.graphs[gi].nodes[u];
                        n.op == Sym::SHAPE
                            && n.domain == Sym::AI_ONNX
                            && n.implicit_inputs.is_empty()
                    })
                {
                    return Self::bypass(session, gi, ni, idx, input0);
                }
                false
            }
            "Slice" => {
                let since = node.since.unwrap_or(0);
                let (starts, ends, steps) = if since >= 10 {
                    let get = |k: usize, s: &mut Self| -> Option<Option<Vec<i64>>> {
                        match node.inputs.get(k).filter(|n| !n.is_empty()) {
                            Some(n) => Some(Some(s.constant(session, gi, *n)?.as_i64())),
                            None => Some(None),
                        }
                    };
                    let (Some(Some(st)), Some(Some(en)), Some(steps)) =
                        (get(1, self), get(2, self), get(4, self))
                    else {
                        return false;
                    };
                    (st, en, steps)
                } else {
                    match (node.attr_ints("starts"), node.attr_ints("ends")) {
                        (Some(s), Some(e)) => (s.to_vec(), e.to_vec(), None),
                        _ => return false,
                    }
                };
                let noop = starts.len() == ends.len()
                    && starts.iter().all(|&s| s == 0)
                    && ends.iter().all(|&e| e >= i64::from(i32::MAX))
                    && steps.is_none_or(|s| s.iter().all(|&x| x == 1));
                noop && Self::bypass(session, gi, ni, idx, input0)
            }
            "Expand" => {
                let Some(x) = session.shape_of(gi, input0).cloned() else {
                    return false;
                };
                let Some(shape_name) = node.inputs.get(1).cloned() else {
                    return false;
                };
                let Some(target) = self.constant(session, gi, shape_name) else {
                    return false;
                };
                // A 1-D int64 target no longer than the input, each of its trailing dims 1 (or
                // below) or equal to the input's known dim: the output is the input.
                if target.elem != 7 || target.dims.len() != 1 || target.dims[0] <= 0 {
                    return false;
                }
                let t = target.as_i64();
                if t.len() > x.len() {
                    return false;
                }
                let same = x
                    .iter()
                    .rev()
                    .zip(t.iter().rev())
                    .all(|(d, &want)| want <= 1 || *d == Some(want));
                same && Self::bypass(session, gi, ni, idx, input0)
            }
            "Div" => {
                self.noop_elimination(session, gi, ni, idx)
                    || self.div_mul_fusion(session, gi, ni, idx)
            }
            "Add" | "Sub" | "Mul" => self.noop_elimination(session, gi, ni, idx),
            "Relu" => self.fuse_relu_clip(session, gi, ni, idx),
            "Pad" => self.pad_fusion(session, gi, ni, idx),
            "Unsqueeze" => {
                // `UnsqueezeElimination` on an Unsqueeze of a constant initializer (looked up
                // through enclosing scopes): it generates the name of the initializer it would
                // make (`GenerateNodeArgName("UnsqueezeElimination_" + input)`) before it looks
                // at `axes`, which from opset 13 is an input, not the attribute it reads: there
                // it changes nothing but the graph's name counter, one step for each name
                // already taken. ConstantFolding then folds the node as ORT does. Seen on
                // torchvision's Mask R-CNN (unseen3/tv.maskrcnn): its paste-masks Loop body
                // unsqueezes two outer constants 11 and 4 times, so the names its
                // GatherSliceToSplitFusion generates count from 13 (`Squeeze_token_15`).
                // Below opset 13 the rule itself replaces the node by that initializer;
                // ConstantFolding gives the placement the same answer, so only the name is
                // generated here too.
                if Self::is_constant_init(session, gi, input0) {
                    session.graphs[gi]
                        .generate_value_name(&format!("UnsqueezeElimination_{input0}"));
                }
                false
            }
            "Gemm" => {
                self.gemm_sum_fusion(session, gi, ni, idx)
                    || self.gemm_transpose_fusion(session, gi, ni, idx)
            }
            "Conv" => self.conv_fusion(session, gi, ni, idx),
            "Where" => {
                // NotWhereFusion: Where(Not(c), a, b) -> Where(c, b, a).
                let Some(p) = idx.producer(session, input0) else {
                    return false;
                };
                let pn = &session.graphs[gi].nodes[p];
                if pn.op != "Not" || pn.domain != Sym::AI_ONNX || idx.is_output(input0) {
                    return false;
                }
                let users = idx.users(session, input0);
                if users
                    .iter()
                    .any(|&u| session.graphs[gi].nodes[u].op != "Where")
                {
                    return false;
                }
                let c = pn.inputs.first().cloned().unwrap_or_default();
                for u in users {
                    if session.graphs[gi].nodes[u].inputs.len() == 3 {
                        idx.set_input(session, EdgeEnd::new(u, 0), c);
                        // The same values, read in another order: no change to the index.
                        session.graphs[gi].nodes[u].inputs.swap(1, 2);
                    }
                }
                idx.remove(session, p);
                true
            }
            _ => false,
        }
    }
}

/// `Level1_RuleBasedTransformer` as its registry entry runs it: the rewrite rules, node by node, in the optimiser's walk.
pub(crate) const LEVEL1: super::Level1 =
    super::Level1(|step, session| step.walk(session, super::Pass::Rules));
