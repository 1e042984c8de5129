//! ORT's `DivMulFusion` (`core/optimizer/div_mul_fusion.cc`), a rewrite rule.

use super::*;

impl Optimizer<'_> {
    /// `DivMulFusion` (`core/optimizer/div_mul_fusion.cc`): `Mul(x, Div(1, b))` becomes
    /// `Div(x, b)`: a `Div` (since 7, 13, 14) with a one-element constant 1 (float, float16,
    /// double, int32, int64) as numerator, whose only edge goes to a `Mul` (since 7, 13, 14),
    /// reads the Mul's other input and takes its output; the Div keeps its name, the Mul goes.
    pub(super) fn div_mul_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let div = &session.graphs[gi].nodes[ni];
        if !matches!(div.since, Some(7 | 13 | 14))
            || div.inputs.len() != 2
            || div.outputs.len() != 1
        {
            return false;
        }
        let out = div.outputs[0];
        let a = div.inputs[0];
        let Some(mul) = Self::only_edge(session, gi, idx, out) else {
            return false;
        };
        let mn = &session.graphs[gi].nodes[mul];
        if mn.op != "Mul"
            || mn.domain != Sym::AI_ONNX
            || !matches!(mn.since, Some(7 | 13 | 14))
            || mn.inputs.len() != 2
            || mn.outputs.len() != 1
        {
            return false;
        }
        let Some(init) = session.initializer(gi, a).filter(|i| !i.overridable) else {
            return false;
        };
        let typed = [D::Float, D::Float16, D::Double, D::Int32, D::Int64]
            .iter()
            .any(|&t| init.elem == t as i32);
        if !typed {
            return false;
        }
        match self.constant(session, gi, a) {
            Some(v) if v.len() == 1 && v.as_f64()[0] == 1.0 => {}
            _ => return false,
        }
        let mn = &session.graphs[gi].nodes[mul];
        let other = if mn.inputs[0] == out {
            mn.inputs[1]
        } else {
            mn.inputs[0]
        };
        let mul_out = mn.outputs[0];
        idx.set_input(session, EdgeEnd::new(ni, 0), other);
        idx.set_output(session, EdgeEnd::new(ni, 0), mul_out);
        idx.remove(session, mul);
        true
    }
}
