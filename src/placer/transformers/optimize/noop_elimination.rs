//! ORT's `NoopElimination` (`core/optimizer/noop_elimination.cc`), a rewrite rule.

use super::*;

impl Optimizer<'_> {
    /// `NoopElimination`: x+0, 0+x, x-0, x*1, 1*x, x/1 with a one-element constant.
    pub(super) fn noop_elimination(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        if node.inputs.len() != 2 {
            return false;
        }
        let op = node.op;
        let out = node.outputs.first().cloned().unwrap_or_default();
        let ins = node.inputs.clone();
        let candidates: &[usize] = match op.as_str() {
            "Add" | "Mul" => &[1, 0],
            _ => &[1],
        };
        for &c in candidates {
            let other = &ins[1 - c];
            if Self::is_constant_init(session, gi, *other) {
                continue;
            }
            let Some(v) = self.constant(session, gi, ins[c]) else {
                continue;
            };
            if v.len() != 1 {
                continue;
            }
            let neutral = if op == "Add" || op == "Sub" { 0.0 } else { 1.0 };
            if v.as_f64()[0] != neutral {
                continue;
            }
            let same_type = session.type_of(gi, *other) == Some(&Type::Tensor(v.elem));
            let rank_ok = session
                .shape_of(gi, *other)
                .is_some_and(|s| s.len() >= v.dims.len());
            if !same_type || !rank_ok || idx.is_output(out) {
                continue;
            }
            let other = *other;
            return Self::bypass(session, gi, ni, idx, other);
        }
        false
    }
}
