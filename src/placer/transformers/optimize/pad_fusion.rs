//! ORT's `PadFusion` (`core/optimizer/pad_fusion.cc`), a rewrite rule.

use super::*;

impl Optimizer<'_> {
    /// `PadFusion` (`core/optimizer/pad_fusion.cc`): a constant-mode `Pad` (since 2, 11, 13,
    /// 18, 19; no `axes`) with constant non-negative pads on the spatial axes only and a zero
    /// (or absent) pad value, whose only edge goes to the data input of a `Conv` (since 1, 11),
    /// `AveragePool` (since 7, 10, 11, 19) or `MaxPool` (since 1, 8, 10, 11, 12) with
    /// `auto_pad` NOTSET, is folded into that node's `pads` (oracle-checked: the follower
    /// keeps its name, the Pad goes).
    pub(super) fn pad_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let pad = &session.graphs[gi].nodes[ni];
        let since = pad.since.unwrap_or(0);
        if !matches!(since, 2 | 11 | 13 | 18 | 19)
            || pad.outputs.len() != 1
            || pad.inputs.is_empty()
        {
            return false;
        }
        if pad.attr_s("mode").is_some_and(|m| m != "constant") {
            return false;
        }
        let x = pad.inputs[0];
        let out = pad.outputs[0];
        let (pads, value_zero) = if since < 11 {
            let Some(p) = pad.attr_ints("pads") else {
                return false;
            };
            let v = pad
                .attrs
                .iter()
                .find(|a| a.name() == "value")
                .and_then(|a| a.f);
            (p.to_vec(), v.is_none_or(|v| v == 0.0))
        } else {
            if pad.inputs.get(3).is_some_and(|a| !a.is_empty()) {
                return false;
            }
            let Some(pn) = pad.inputs.get(1).filter(|p| !p.is_empty()).cloned() else {
                return false;
            };
            if !Self::is_constant_init(session, gi, pn) {
                return false;
            }
            let Some(p) = self.constant(session, gi, pn) else {
                return false;
            };
            let value_zero = match pad.inputs.get(2).filter(|v| !v.is_empty()).cloned() {
                None => true,
                Some(v) => {
                    Self::is_constant_init(session, gi, v)
                        && self
                            .constant(session, gi, v)
                            .is_some_and(|t| t.len() == 1 && t.as_f64()[0] == 0.0)
                }
            };
            (p.as_i64(), value_zero)
        };
        let rank = pads.len() / 2;
        if !value_zero
            || pads.len() % 2 != 0
            || rank < 2
            || pads.iter().any(|&p| p < 0)
            || pads[0] != 0
            || pads[1] != 0
            || pads[rank] != 0
            || pads[rank + 1] != 0
        {
            return false;
        }
        let Some(next) = Self::only_edge(session, gi, idx, out) else {
            return false;
        };
        let nn = &session.graphs[gi].nodes[next];
        let ok = nn.domain == Sym::AI_ONNX
            && nn.inputs.first() == Some(&out)
            && match nn.op.as_str() {
                "Conv" => matches!(nn.since, Some(1 | 11)),
                "AveragePool" => matches!(nn.since, Some(7 | 10 | 11 | 19)),
                "MaxPool" => matches!(nn.since, Some(1 | 8 | 10 | 11 | 12)),
                _ => false,
            }
            && nn.attr_s("auto_pad").is_none_or(|a| a == "NOTSET");
        if !ok {
            return false;
        }
        idx.set_input(session, EdgeEnd::new(next, 0), x);
        idx.remove(session, ni);
        true
    }
}
