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
        idx: &mut Editor,
    ) -> bool {
        let conv = &session.graphs[gi].nodes[ni];
        if !matches!(conv.since, Some(1 | 11)) || conv.outputs.len() != 1 {
            return false;
        }
        let out = conv.outputs[0];
        let w = conv.inputs.get(1).cloned().unwrap_or_default();
        let Some(w_init) = session.initializer(gi, w).filter(|i| !i.overridable) else {
            return false;
        };
        let (w_dims, w_elem) = (w_init.dims.clone(), w_init.elem);
        if w_dims.len() < 3 {
            return false;
        }
        if let Some(b) = conv.inputs.get(2).filter(|b| !b.is_empty())
            && !Self::is_constant_init(session, gi, *b)
        {
            return false;
        }
        if idx.is_output(out) {
            return false;
        }
        let Some(next) = idx.sole_user(session, out) else {
            return false;
        };
        let nn = &session.graphs[gi].nodes[next];
        // One edge: the follower reads the Conv once, and nothing else reads the Conv.
        if nn.inputs.iter().filter(|i| **i == out).count() != 1
            || !nn.implicit_inputs.is_empty()
            || nn.domain != Sym::AI_ONNX
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
                        .initializer(gi, nn.inputs[1])
                        .filter(|i| !i.overridable)
                        .is_some_and(|i| i.elem == w_elem && per_channel(&i.dims))
            }
            "BatchNormalization" => {
                matches!(nn.since, Some(7 | 9 | 14 | 15))
                    && nn.inputs.len() == 5
                    && nn.outputs.iter().skip(1).all(Sym::is_empty)
                    && nn.inputs[1..].iter().all(|p| {
                        session
                            .initializer(gi, *p)
                            .filter(|i| !i.overridable)
                            .is_some_and(|i| i.dims == [channels])
                    })
            }
            _ => false,
        };
        if !ok {
            return false;
        }
        // ORT writes the folded weights and bias as new initializers named by
        // `GenerateNodeArgName` (weights first; Convs sharing a weight, as CSE leaves them, get
        // `_token_<k>` names and their own copies, which later passes see apart). The values
        // are not folded here: a new name holds a copy of the tensor it replaces.
        let conv_bias = conv.inputs.get(2).filter(|b| !b.is_empty()).cloned();
        let (w_base, b_base) = match (nn.op.as_str(), &conv_bias) {
            ("BatchNormalization", _) => (
                Some(format!("ConvBnFusion_W_{w}")),
                Some(format!("ConvBnFusion_BN_B_{}", nn.inputs[2])),
            ),
            ("Mul", b) => (
                Some(format!("ConvMulFusion_W_{w}")),
                b.as_ref()
                    .map(|_| format!("ConvMulFusion_Mul_B_{}", nn.inputs[1])),
            ),
            (_, Some(b)) => (None, Some(format!("ConvAddFusion_B_{b}"))),
            (_, None) => (None, Some(format!("ConvAddFusion_Add_B_{}", nn.inputs[1]))),
        };
        // The tensor a new bias copies, and its shape (an `Add`'s `C,1,1` becomes `C`).
        let b_source = conv_bias.or_else(|| match nn.op.as_str() {
            "BatchNormalization" => Some(nn.inputs[2]),
            "Add" => Some(nn.inputs[1]),
            _ => None,
        });
        let new_out = nn.outputs[0];
        if let Some(base) = w_base {
            let name = session.graphs[gi].generate_value_name(&base);
            Self::copy_initializer(session, gi, w, name, None);
            idx.set_input(session, EdgeEnd::new(ni, 1), name);
        }
        if let (Some(base), Some(src)) = (b_base, b_source) {
            let name = session.graphs[gi].generate_value_name(&base);
            Self::copy_initializer(session, gi, src, name, Some(channels));
            idx.set_input(session, EdgeEnd::new(ni, 2), name);
        }
        idx.set_output(session, EdgeEnd::new(ni, 0), new_out);
        idx.remove(session, next);
        true
    }

    /// A new initializer `to` of graph `gi` holding a copy of `from` (`dims`: reshaped to
    /// `[channels]`), as ORT's `AddInitializer` of a fusion's result.
    fn copy_initializer(
        session: &mut Session,
        gi: usize,
        from: Sym,
        to: Sym,
        channels: Option<i64>,
    ) {
        let Some(mut init) = session.initializer(gi, from).cloned() else {
            return;
        };
        if let Some(c) = channels {
            init.dims = vec![c];
            init.tensor.dims = vec![c];
        }
        init.overridable = false;
        init.tensor.name = Some(to.to_string());
        let g = &mut session.graphs[gi];
        g.shapes
            .insert(to, init.dims.iter().map(|&d| Some(d)).collect());
        g.types.insert(to, Type::Tensor(init.elem));
        g.init_order.push(to);
        g.initializers.insert(to, init);
    }
}
