//! ORT's `FuseReluClip` (`core/optimizer/relu_clip_fusion.cc`), a rewrite rule.

use super::*;

impl Optimizer<'_> {
    /// `FuseReluClip` (`core/optimizer/relu_clip_fusion.cc`): a `Relu` whose only edge goes
    /// to a `Clip` (since 6, 11, 12, 13) is removed, the Clip reading its input. A negative or
    /// missing minimum becomes 0: the attribute (Clip-6), or a new scalar initializer
    /// `GenerateNodeArgName(FuseReluClip_<relu>_min_zero_constant)`; a minimum that is not a
    /// constant initializer stops the fusion.
    pub(super) fn fuse_relu_clip(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let relu = &session.graphs[gi].nodes[ni];
        if relu.inputs.len() != 1 || relu.outputs.len() != 1 || relu.inputs[0].is_empty() {
            return false;
        }
        let (x, out, relu_name) = (relu.inputs[0], relu.outputs[0], relu.name);
        let Some(clip) = Self::only_edge(session, gi, idx, out) else {
            return false;
        };
        let cn = &session.graphs[gi].nodes[clip];
        if cn.op != "Clip"
            || cn.domain != Sym::AI_ONNX
            || !matches!(cn.since, Some(6 | 11 | 12 | 13))
            || cn.inputs.first() != Some(&out)
        {
            return false;
        }
        let since6 = cn.since == Some(6);
        let min_name = cn.inputs.get(1).filter(|m| !m.is_empty()).cloned();
        let needs_zero = if since6 {
            cn.attrs
                .iter()
                .find(|a| a.name() == "min")
                .and_then(|a| a.f)
                .is_none_or(|m| m < 0.0)
        } else {
            match &min_name {
                None => true,
                Some(m) => {
                    if !Self::is_constant_init(session, gi, *m) {
                        return false;
                    }
                    match self.constant(session, gi, *m) {
                        Some(v) if v.len() == 1 => v.as_f64()[0] < 0.0,
                        _ => return false,
                    }
                }
            }
        };
        let elem = match session.type_of(gi, x) {
            Some(Type::Tensor(e)) => *e,
            _ => return false,
        };
        if needs_zero {
            if since6 {
                let n = &mut session.graphs[gi].nodes[clip];
                n.attrs.retain(|a| a.name() != "min");
                n.attrs.push(crate::model::proto::AttributeProto {
                    name: Some("min".into()),
                    f: Some(0.0),
                    r#type: Some(crate::model::proto::attribute_proto::AttributeType::Float as i32),
                    ..Default::default()
                });
            } else {
                idx.begin_names(session);
                let zero = idx.value_name(
                    session,
                    &format!("FuseReluClip_{relu_name}_min_zero_constant"),
                );
                let float = [D::Float, D::Float16, D::Double, D::Bfloat16]
                    .iter()
                    .any(|&t| elem == t as i32);
                let data = if float {
                    eval::Data::Float(vec![0.0])
                } else {
                    eval::Data::Int(vec![0])
                };
                let t = Tensor {
                    elem,
                    dims: Vec::new(),
                    data,
                };
                self.add_initializer(session, gi, zero, Some(t));
                idx.set_input(session, EdgeEnd::new(clip, 1), zero);
            }
        }
        idx.set_input(session, EdgeEnd::new(clip, 0), x);
        idx.remove(session, ni);
        true
    }
}
