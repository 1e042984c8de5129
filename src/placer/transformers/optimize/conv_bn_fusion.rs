//! ORT's `ConvBNFusion` (`core/optimizer/conv_bn_fusion.cc`), a level-1 rewrite rule: a `Conv`
//! followed by a `BatchNormalization` (since 7, 9, 14, 15) with constant 1-D parameters and no
//! optional outputs takes the normalisation into its weights and bias. The pattern and the
//! rewrite are `ConvAddFusion`'s (`conv_add_fusion.rs`).

use super::conv_add_fusion::ConvFollower;
use super::*;

impl Optimizer<'_> {
    /// `ConvBNFusion`: new weights and a new bias.
    pub(super) fn conv_bn_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
        m: &ConvFollower,
    ) -> bool {
        let nn = &session.graphs[gi].nodes[m.next];
        let ok = matches!(nn.since, Some(7 | 9 | 14 | 15))
            && nn.inputs.len() == 5
            && nn.outputs.iter().skip(1).all(Sym::is_empty)
            && nn.inputs[1..].iter().all(|p| {
                session
                    .initializer(gi, *p)
                    .filter(|i| !i.overridable)
                    .is_some_and(|i| i.dims == [m.channels])
            });
        if !ok {
            return false;
        }
        let bn_bias = nn.inputs[2];
        let w_base = format!("ConvBnFusion_W_{}", m.w);
        // The new bias copies the Conv's, or else the normalisation's.
        let bias = (
            format!("ConvBnFusion_BN_B_{bn_bias}"),
            m.bias.unwrap_or(bn_bias),
        );
        Self::fold_into_conv(session, gi, ni, idx, m, Some(w_base), Some(bias));
        true
    }
}
