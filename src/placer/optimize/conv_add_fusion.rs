//! ORT's `ConvAddFusion` (`core/optimizer/conv_add_fusion.cc`) and its two siblings, which
//! share the pattern and differ only in the follower: `ConvMulFusion` (`conv_mul_fusion.cc`)
//! and `ConvBNFusion` (`conv_bn_fusion.cc`). Rewrite rules.

use super::*;

impl Optimizer<'_> {
    /// `ConvAddFusion`, `ConvMulFusion`, `ConvBNFusion` (`core/optimizer/conv_add_fusion.cc`,
    /// `conv_mul_fusion.cc`, `conv_bn_fusion.cc`): a `Conv` (since 1 or 11) whose only consumer is
    /// an `Add`/`Mul` (since 7, 13, 14) with a constant per-channel or scalar second input, or a
    /// `BatchNormalization` (since 7, 9, 14, 15) with constant 1-D parameters and no optional
    /// outputs, with constant weights (and bias): the follower is folded into the Conv's weights,
    /// and the Conv takes its output. The Conv keeps its name.
    pub(super) fn conv_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let conv = &session.graphs[gi].nodes[ni];
        if !matches!(conv.since, Some(1 | 11)) || conv.outputs.len() != 1 {
            return false;
        }
        let out = conv.outputs[0].clone();
        let w = conv.inputs.get(1).cloned().unwrap_or_default();
        let Some(w_init) = session.initializer(gi, &w).filter(|i| !i.overridable) else {
            return false;
        };
        let (w_dims, w_elem) = (w_init.dims.clone(), w_init.elem);
        if w_dims.len() < 3 {
            return false;
        }
        if let Some(b) = conv.inputs.get(2).filter(|b| !b.is_empty())
            && !Self::is_constant_init(session, gi, b)
        {
            return false;
        }
        if idx.outputs.contains(&out) {
            return false;
        }
        let users = idx.users(session, gi, &out);
        let [next] = users[..] else {
            return false;
        };
        let nn = &session.graphs[gi].nodes[next];
        // One edge: the follower reads the Conv once, and nothing else reads the Conv.
        if nn.inputs.iter().filter(|i| **i == out).count() != 1
            || !nn.implicit_inputs.is_empty()
            || nn.domain != "ai.onnx"
            || nn.inputs.first() != Some(&out)
        {
            return false;
        }
        let channels = w_dims[0];
        let per_channel = |dims: &[i64]| -> bool {
            if dims.is_empty() {
                return true;
            }
            let axis = if dims.len() == w_dims.len() {
                if dims[0] != 1 {
                    return false;
                }
                1
            } else if dims.len() + 1 == w_dims.len() {
                0
            } else {
                return false;
            };
            dims[axis] == channels && dims.iter().enumerate().all(|(i, &d)| i == axis || d == 1)
        };
        let ok = match nn.op.as_str() {
            "Add" | "Mul" => {
                matches!(nn.since, Some(7 | 13 | 14))
                    && nn.inputs.len() == 2
                    && session
                        .initializer(gi, &nn.inputs[1])
                        .filter(|i| !i.overridable)
                        .is_some_and(|i| i.elem == w_elem && per_channel(&i.dims))
            }
            "BatchNormalization" => {
                matches!(nn.since, Some(7 | 9 | 14 | 15))
                    && nn.inputs.len() == 5
                    && nn.outputs.iter().skip(1).all(String::is_empty)
                    && nn.inputs[1..].iter().all(|p| {
                        session
                            .initializer(gi, p)
                            .filter(|i| !i.overridable)
                            .is_some_and(|i| i.dims == [channels])
                    })
            }
            _ => false,
        };
        if !ok {
            return false;
        }
        let new_out = nn.outputs[0].clone();
        let bias = match nn.op.as_str() {
            "Add" => Some(nn.inputs[1].clone()),
            "BatchNormalization" => Some(nn.inputs[2].clone()),
            _ => None,
        };
        let conv = &mut session.graphs[gi].nodes[ni];
        if conv.inputs.get(2).is_none_or(String::is_empty)
            && let Some(b) = bias
        {
            conv.inputs.truncate(2);
            conv.inputs.push(b.clone());
            idx.uses.entry(b).or_default().push(ni);
        }
        conv.outputs[0] = new_out.clone();
        idx.producer.insert(new_out, ni);
        Self::remove(session, gi, next);
        true
    }
}
