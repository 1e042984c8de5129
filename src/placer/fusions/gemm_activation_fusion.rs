//! ORT's `GemmActivationFusion` (`core/optimizer/gemm_activation_fusion.cc`, level 2, CPU only).
//!
//! A CPU `Gemm` (since 7, 9, 11 or 13) with a float output, one output edge and no graph output,
//! whose only consumer is a CPU activation `FusedGemm` applies, becomes a `com.microsoft`
//! `FusedGemm` named `GenerateNodeName("fused " + <Gemm name>)`, producing the activation's
//! output. Measured with the CPU wheels (1.23.2, 1.24.4, 1.31.1) on the zoo's classifiers, the
//! OPT decoders and the streaming model's Loop body (a `Gemm` from `MatMulAddFusion` + `Tanh`).

use super::*;

/// The activations ORT's `IsFusableActivation` accepts, with their since-versions.
const ACTIVATIONS: &[(&str, &[i64])] = &[
    ("Elu", &[6]),
    ("HardSigmoid", &[6]),
    ("LeakyRelu", &[6, 16]),
    ("Relu", &[6, 13, 14]),
    ("Selu", &[6]),
    ("Sigmoid", &[6, 13]),
    ("Softplus", &[1]),
    ("Softsign", &[1]),
    ("Tanh", &[6, 13]),
    ("ThresholdedRelu", &[1, 10]),
];

impl Fuser {
    pub(super) fn gemm_activation(&mut self, session: &mut Session) {
        for ni in self.pass_order_of(session, &["Gemm"]) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed
                || !is_op(n, "Gemm", &[7, 9, 11, 13])
                || !self.compatible.contains(n.ep)
                || self.out_edges(session, n) != 1
                || !super::conv_activation_fusion::is_float(session, self.gi, n.outputs.first())
            {
                continue;
            }
            let Some(act) = self.single_consumer(session, n) else {
                continue;
            };
            let a = &session.graphs[self.gi].nodes[act];
            if a.ep != n.ep
                || !ACTIVATIONS.iter().any(|(op, v)| is_op(a, op, v))
                || self.produces_graph_output(n)
            {
                continue;
            }
            let mut node = fused_node(n, "FusedGemm");
            node.outputs = vec![a.outputs.first().cloned().unwrap_or_default()];
            node.attrs = n.attrs.clone();
            node.attrs.push(super::conv_activation_fusion::string_attr(
                "activation",
                &a.op,
            ));
            let base = format!("fused {}", n.name);
            node.name = self.node_name(session, &base);
            self.fuse(session, &[ni, act], ni, node);
        }
    }
}
