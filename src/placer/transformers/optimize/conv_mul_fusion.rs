//! ORT's `ConvMulFusion` (`core/optimizer/conv_mul_fusion.cc`), a level-1 rewrite rule: a
//! `Conv` followed by a `Mul` by a constant per-channel (or scalar) tensor takes the factor into
//! its weights (and bias). The pattern and the rewrite are `ConvAddFusion`'s
//! (`conv_add_fusion.rs`).

use super::conv_add_fusion::ConvFollower;
use super::*;

impl Optimizer<'_> {
    /// `ConvMulFusion`: new weights (and a new bias, where the Conv has one).
    pub(super) fn conv_mul_fusion(
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
        let factor = session.graphs[gi].nodes[m.next].inputs[1];
        let w_base = format!("ConvMulFusion_W_{}", m.w);
        let bias = m.bias.map(|b| (format!("ConvMulFusion_Mul_B_{factor}"), b));
        Self::fold_into_conv(session, gi, ni, idx, m, Some(w_base), bias);
        true
    }
}
