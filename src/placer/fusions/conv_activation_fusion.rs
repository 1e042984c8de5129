//! ORT's `ConvActivationFusion` (`core/optimizer/conv_activation_fusion.cc`, level 2, CPU among
//! the providers it serves; the CUDA branch fuses only through level 3 here and is not simulated).
//!
//! On the CPU: a float `Conv` (since 1 or 11) with one output edge, not producing a graph output,
//! whose only consumer is a CPU `Relu`, `Sigmoid`, `Tanh`, `LeakyRelu`, `HardSigmoid` or a `Clip`
//! with constant bounds, becomes a `com.microsoft` `FusedConv` that keeps the Conv's name (the
//! selector/action framework's `ReplaceWithNew`) and produces the activation's output. Measured
//! with the CPU wheels (1.23.2, 1.24.4, 1.31.1) on the zoo's convolutional networks.

use super::*;

/// Activations the CPU `FusedConv` applies, with the since-versions ORT matches.
const ACTIVATIONS: &[(&str, &[i64])] = &[
    ("Relu", &[6, 13, 14]),
    ("Sigmoid", &[6, 13]),
    ("Tanh", &[6, 13]),
    ("LeakyRelu", &[6, 16]),
    ("HardSigmoid", &[6]),
];

impl Fuser {
    pub(super) fn conv_activation(&mut self, session: &mut Session) {
        for ni in self.pass_order_of(session, &["Conv"]) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed
                || !is_op(n, "Conv", &[1, 11])
                || !self.compatible.contains(n.ep)
                || !self.edges_are(session, n, 1)
                || !is_float(session, self.gi, n.inputs.first())
            {
                continue;
            }
            let Some(act) = self.single_consumer(session, n) else {
                continue;
            };
            let a = &session.graphs[self.gi].nodes[act];
            if a.ep != n.ep || !self.fusable_activation(session, a) {
                continue;
            }
            let mut node = fused_node(n, "FusedConv");
            node.name = n.name;
            node.outputs = vec![a.outputs.first().cloned().unwrap_or_default()];
            node.attrs = n.attrs.clone();
            node.attrs.push(string_attr("activation", &a.op));
            self.fuse(session, &[ni, act], ni, node);
        }
    }

    fn fusable_activation(&self, session: &Session, a: &SNode) -> bool {
        if ACTIVATIONS.iter().any(|(op, v)| is_op(a, op, v)) {
            return true;
        }
        if !is_op(a, "Clip", &[6, 11, 12, 13]) {
            return false;
        }
        // Clip-6 has its bounds as attributes; later ones need constant (or absent) bounds.
        a.inputs.iter().skip(1).all(|b| {
            b.is_empty()
                || session
                    .initializer(self.gi, *b)
                    .is_some_and(|i| !i.overridable)
        })
    }
}

/// The value is a float tensor.
pub(super) fn is_float(session: &Session, gi: usize, name: Option<&Sym>) -> bool {
    name.is_some_and(|&x| session.type_of(gi, x) == Some(&Type::Tensor(D::Float as i32)))
}

pub(super) fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec().into()),
        ..Default::default()
    }
}
