//! ORT's `NhwcTransformer` (`onnxruntime/core/optimizer/nhwc_transformer.cc`, with the layout
//! helpers of `core/optimizer/layout_transformation/` and `transpose_optimization/`): at level
//! `all` (ORT's level 3, after partitioning), every CPU-placed `QLinearConv` (ai.onnx or
//! com.microsoft) whose input is `uint8`/`int8` of known rank becomes the channels-last
//! `com.microsoft` `QLinearConv` (`channels_last = 1`) between two `Transpose` nodes on the CPU
//! (`[0, 2, .., 1]` before, `[0, r-1, 1, ..]` after). Every bundled release (1.23.2 to 1.31.1)
//! does it: measured with the oracle and the CPU wheels on `tests/fixtures/realworld/qop*`.
//!
//! The edit is ORT's graph-API calls in order (`transpose::wrap_channels_last`), which decide the
//! names on the graph's `_token_<k>` counter: `TransposeInput` (a new `Transpose`, output
//! `<name>_out0`, unless the input already comes from the inverse Transpose, which it cancels:
//! chained convolutions draw three tokens each, not four), `TransposeOutput` (the node's output
//! moved to a new Transpose, the node given `GenerateNodeArgName(<node name>)`), then the copy
//! (`GenerateNodeName(<node name>)`) that takes the outputs (the node given a fresh name again).
//!
//! Then, where it wrapped a node, ORT's transpose optimizer runs for the CPU provider over the
//! graph (`transpose::run_cpu_graph`): Transposes cancel between channels-last nodes, and an
//! 8-bit CPU `MaxPool` between them becomes `NhwcMaxPool`.

use crate::infer::Type;
use crate::model::DataType as D;
use crate::placer::OptLevel;
use crate::placer::ir::Session;
use crate::tables::{Ep, KernelTable};

/// Applies the transformer to every graph. Returns whether it changed anything.
pub fn run(session: &mut Session, table: &KernelTable, level: OptLevel) -> bool {
    if level < OptLevel::All {
        return false;
    }
    let mut changed = false;
    for gi in 0..session.graphs.len() {
        // Wrapping a node never makes another one a candidate: a graph without one is skipped
        // before its order is built.
        if !(0..session.graphs[gi].nodes.len()).any(|ni| candidate(session, gi, ni)) {
            continue;
        }
        let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
        if super::transpose::wrap_channels_last(session, gi, table, &order, &candidate) {
            changed = true;
            // Then ORT's transpose optimizer for the CPU provider over the graph: Transposes
            // cancelled between channels-last nodes, 8-bit `MaxPool`s to `NhwcMaxPool`.
            super::transpose::run_cpu_graph(session, gi, table);
        }
    }
    changed
}

fn candidate(session: &Session, gi: usize, ni: usize) -> bool {
    let Some(n) = session.graphs.get(gi).and_then(|g| g.nodes.get(ni)) else {
        return false;
    };
    if n.removed
        || n.op != "QLinearConv"
        || !matches!(n.domain.as_str(), "ai.onnx" | "com.microsoft")
        || n.ep != Some(Ep::Cpu)
        || n.attr_i("channels_last") == Some(1)
    {
        return false;
    }
    let Some(x) = n.inputs.first().filter(|x| !x.is_empty()) else {
        return false;
    };
    let quantized = matches!(
        session.type_of(gi, *x),
        Some(Type::Tensor(t)) if *t == D::Uint8 as i32 || *t == D::Int8 as i32
    );
    let rank = session.shape_of(gi, *x).map(Vec::len).unwrap_or(0);
    quantized && rank >= 3
}

#[cfg(test)]
mod tests {
    use crate::placer::{self, OptLevel, Options};
    use crate::tables::Ep;

    /// QDQ Conv -> MaxPool -> Conv on the CPU at `all`: both convolutions channels-last, the
    /// Transposes between them cancelled, the uint8 MaxPool between them `NhwcMaxPool` named
    /// from its old name; one Transpose left at each end.
    #[test]
    fn qdq_conv_maxpool_conv_goes_channels_last_once() {
        let text = r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,8,8] X) => (float[1,1,4,4] Y)
<float s = {0.1}, uint8 z = {128}, int8[1,1,1,1] w = {100}, float ws = {0.02}, int8 wz = {0}>
{
    [q0] x0 = QuantizeLinear (X, s, z)
    [d0] x1 = DequantizeLinear (x0, s, z)
    [dw0] w0 = DequantizeLinear (w, ws, wz)
    [conv0] c0 = Conv (x1, w0)
    [q1] c1 = QuantizeLinear (c0, s, z)
    [d1] c2 = DequantizeLinear (c1, s, z)
    [pool] p0 = MaxPool <kernel_shape = [2,2], strides = [2,2]> (c2)
    [q2] p1 = QuantizeLinear (p0, s, z)
    [d2] p2 = DequantizeLinear (p1, s, z)
    [dw1] w1 = DequantizeLinear (w, ws, wz)
    [conv1] c3 = Conv (p2, w1)
    [q3] c4 = QuantizeLinear (c3, s, z)
    [d3] Y = DequantizeLinear (c4, s, z)
}
"#;
        let proto = crate::model::text::parse_model(text).expect("parses");
        let model = crate::model::Model::from_proto(std::path::Path::new("n.onnx"), 0, proto)
            .expect("loads");
        let table = crate::tables::resolve("1.31.1").expect("bundled").table();
        let options = Options {
            eps: vec![Ep::Cpu],
            level: OptLevel::All,
            ..Default::default()
        };
        let p = placer::place(&model, table, &options);
        assert_eq!(p.outcome, placer::Outcome::Ok);
        let mut ops: Vec<String> = p.session.graphs[0]
            .live_nodes()
            .map(|(_, n)| format!("{}:{}", n.domain, n.op))
            .collect();
        ops.sort();
        assert_eq!(
            ops,
            [
                "ai.onnx:DequantizeLinear",
                "ai.onnx:QuantizeLinear",
                "ai.onnx:Transpose",
                "ai.onnx:Transpose",
                "com.microsoft:NhwcMaxPool",
                "com.microsoft:QLinearConv",
                "com.microsoft:QLinearConv",
            ]
        );
        let pool = p.session.graphs[0]
            .live_nodes()
            .find(|(_, n)| n.op == "NhwcMaxPool")
            .map(|(_, n)| n.name);
        assert!(
            pool.as_deref()
                .is_some_and(|n| n.starts_with("pool_token_")),
            "{pool:?}"
        );
    }
}
