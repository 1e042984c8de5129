//! The QDQ Conv selector's bias-scale check (from 1.27, onnxruntime PR #28229):
//! `tests/fixtures/conv_bias_scale/` holds `DQ(x) -> Conv(DQ(w), DQ(b)) -> Q` groups
//! (`tools/realworld/conv_bias_scale.py`) whose int32 bias is dequantized with `x_scale * w_scale`
//! or with a scale off by a measured amount (per channel, per tensor, one channel, relative and
//! absolute boundaries), a bias scale that is a graph input, and two Convs sharing one bias DQ
//! (directly and through an Identity, as `quantize_static` writes equal biases) or one int32
//! initializer. `truth.json` holds the node names of the session graphs the CPU wheels 1.24.4,
//! 1.26.0, 1.27.0 and 1.31.1 saved at level `extended`; the CPU-only prediction must name the
//! same nodes.

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

#[test]
fn qdq_conv_bias_scale_check_agrees_with_ort() {
    let dir = support::repo().join("tests/fixtures/conv_bias_scale");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert!(truth.len() >= 80, "conv_bias_scale truth missing");
    let (mut kept_new, mut kept_old) = (0, 0);
    for r in &truth {
        let ort = r["ort"].as_str().unwrap();
        let file = r["model"].as_str().unwrap();
        let m = onnx_lint::model::load(&dir.join(file)).unwrap();
        let p = placer::place(
            &m,
            tables::resolve(ort).unwrap().table(),
            &Options {
                eps: vec![Ep::Cpu],
                level: OptLevel::Extended,
                ..Default::default()
            },
        );
        let mine = support::live_node_names(&p);
        let theirs = support::truth_node_names(&r["nodes"]);
        assert_eq!(mine, theirs, "ORT {ort}, {file}");
        let kept = theirs.contains("q0") || theirs.contains("q1");
        match (kept, ort) {
            (true, "1.27.0" | "1.31.1") => kept_new += 1,
            (true, _) => kept_old += 1,
            _ => {}
        }
    }
    // The rule is in the truth: Convs left unfused from 1.27 on, none before.
    assert!(kept_new >= 16 && kept_old == 0, "{kept_new} {kept_old}");
}
