//! ORT's `ConvAddFusion` (`core/optimizer/conv_add_fusion.cc`), a level-1 rewrite rule: a
//! `Conv` followed by an `Add` of a constant per-channel (or scalar) tensor takes the addend
//! into its bias. The pattern it shares with `ConvMulFusion` (`conv_mul_fusion.rs`) and
//! `ConvBNFusion` (`conv_bn_fusion.rs`), a Conv with constant weights whose only reader is the
//! follower, and the rewrite they share (new weights and bias, the Conv takes the follower's
//! output), are here.

use super::*;

/// A `Conv` whose only consumer is a follower that ORT's Conv fusions may fold into it.
pub(super) struct ConvFollower {
    /// The follower's node.
    pub next: usize,
    /// The Conv's weight and its element type, and its output channels (the weight's dim 0).
    pub w: Sym,
    pub w_elem: i32,
    pub w_rank: usize,
    pub channels: i64,
    /// The Conv's bias, where it has one.
    pub bias: Option<Sym>,
}

impl Optimizer<'_> {
    /// The three Conv fusions, as the rule-based transformer tries them on a `Conv` (since 1
    /// or 11): `ConvAddFusion`, `ConvMulFusion`, `ConvBNFusion`. The Conv keeps its name.
    pub(super) fn conv_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let Some(m) = Self::conv_follower(session, gi, ni, idx) else {
            return false;
        };
        match session.graphs[gi].nodes[m.next].op.as_str() {
            "Add" => self.conv_add_fusion(session, gi, ni, idx, &m),
            "Mul" => self.conv_mul_fusion(session, gi, ni, idx, &m),
            "BatchNormalization" => self.conv_bn_fusion(session, gi, ni, idx, &m),
            _ => false,
        }
    }

    /// The pattern the three share: a `Conv` (since 1 or 11) with one output, constant weights
    /// of rank 3 or more (and a constant bias), whose output is no graph output and is read once,
    /// by an ONNX-domain follower that reads nothing from outer scopes, as its first input.
    fn conv_follower(
        session: &Session,
        gi: usize,
        ni: usize,
        idx: &Editor,
    ) -> Option<ConvFollower> {
        let conv = &session.graphs[gi].nodes[ni];
        if !matches!(conv.since, Some(1 | 11)) || conv.outputs.len() != 1 {
            return None;
        }
        let out = conv.outputs[0];
        let w = conv.inputs.get(1).cloned().unwrap_or_default();
        let w_init = session.initializer(gi, w).filter(|i| !i.overridable)?;
        let (w_dims, w_elem) = (&w_init.dims, w_init.elem);
        if w_dims.len() < 3 {
            return None;
        }
        if let Some(b) = conv.inputs.get(2).filter(|b| !b.is_empty())
            && !Self::is_constant_init(session, gi, *b)
        {
            return None;
        }
        if idx.is_output(out) {
            return None;
        }
        let next = idx.sole_user(session, out)?;
        let nn = &session.graphs[gi].nodes[next];
        // One edge: the follower reads the Conv once, and nothing else reads the Conv.
        if nn.inputs.iter().filter(|i| **i == out).count() != 1
            || !nn.implicit_inputs.is_empty()
            || nn.domain != Sym::AI_ONNX
            || nn.inputs.first() != Some(&out)
        {
            return None;
        }
        Some(ConvFollower {
            next,
            w,
            w_elem,
            w_rank: w_dims.len(),
            channels: w_dims[0],
            bias: conv.inputs.get(2).filter(|b| !b.is_empty()).cloned(),
        })
    }

    /// Whether `dims` (a follower's constant operand) is per channel of `m`'s Conv, or a scalar.
    pub(super) fn per_channel(m: &ConvFollower, dims: &[i64]) -> bool {
        if dims.is_empty() {
            return true;
        }
        let axis = if dims.len() == m.w_rank {
            if dims[0] != 1 {
                return false;
            }
            1
        } else if dims.len() + 1 == m.w_rank {
            0
        } else {
            return false;
        };
        dims[axis] == m.channels && dims.iter().enumerate().all(|(i, &d)| i == axis || d == 1)
    }

    /// `Add`/`Mul` (since 7, 13, 14) with a constant second input of the weights' type, per
    /// channel or scalar.
    pub(super) fn constant_channel_operand(session: &Session, gi: usize, m: &ConvFollower) -> bool {
        let nn = &session.graphs[gi].nodes[m.next];
        matches!(nn.since, Some(7 | 13 | 14))
            && nn.inputs.len() == 2
            && session
                .initializer(gi, nn.inputs[1])
                .filter(|i| !i.overridable)
                .is_some_and(|i| i.elem == m.w_elem && Self::per_channel(m, &i.dims))
    }

    /// `ConvAddFusion`: the addend becomes (or is added to) the Conv's bias.
    fn conv_add_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
        m: &ConvFollower,
    ) -> bool {
        if !Self::constant_channel_operand(session, gi, m) {
            return false;
        }
        let addend = session.graphs[gi].nodes[m.next].inputs[1];
        let b_base = match m.bias {
            Some(b) => format!("ConvAddFusion_B_{b}"),
            None => format!("ConvAddFusion_Add_B_{addend}"),
        };
        // The tensor the new bias copies, and its shape (an `Add`'s `C,1,1` becomes `C`).
        let b_source = m.bias.unwrap_or(addend);
        Self::fold_into_conv(session, gi, ni, idx, m, None, Some((b_base, b_source)));
        true
    }

    /// The rewrite the three share. ORT writes the folded weights and bias as new initializers
    /// named by `GenerateNodeArgName` (weights first; Convs sharing a weight, as CSE leaves
    /// them, get `_token_<k>` names and their own copies, which later passes see apart). The
    /// values are not folded here: a new name holds a copy of the tensor it replaces. The Conv
    /// then takes the follower's output, and the follower goes.
    pub(super) fn fold_into_conv(
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
        m: &ConvFollower,
        w_base: Option<String>,
        bias: Option<(String, Sym)>,
    ) {
        let new_out = session.graphs[gi].nodes[m.next].outputs[0];
        if let Some(base) = w_base {
            let name = session.graphs[gi].generate_value_name(&base);
            Self::copy_initializer(session, gi, m.w, name, None);
            idx.set_input(session, EdgeEnd::new(ni, 1), name);
        }
        if let Some((base, src)) = bias {
            let name = session.graphs[gi].generate_value_name(&base);
            Self::copy_initializer(session, gi, src, name, Some(m.channels));
            idx.set_input(session, EdgeEnd::new(ni, 2), name);
        }
        idx.set_output(session, EdgeEnd::new(ni, 0), new_out);
        idx.remove(session, m.next);
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
