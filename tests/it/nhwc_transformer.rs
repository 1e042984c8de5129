//! ORT's `NhwcTransformer` and the transpose optimizer's run after it, on the CPU-only session
//! graph at level `all`: `tests/fixtures/nhwc/` holds probe models and the session graphs the
//! CPU wheels made of them, recorded by `tools/realworld/nhwc_probes.py`. `qdq_chain.onnx`:
//! three chained QDQ convolutions and a QDQ GlobalAveragePool; each chained convolution's input
//! Transpose cancels against the previous one's output Transpose as it is wrapped (three
//! `_token_<k>` names per convolution), and the last Transpose is pushed through the
//! `QLinearGlobalAveragePool` (`HandleQLinearPoolOp`). `qdq_resize.onnx`: a QDQ convolution then a
//! nearest QDQ `Resize` (uint8 after the selectors), which the cost check leaves alone.

use std::collections::BTreeSet;

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

fn predicted(model: &str, ort: &str) -> BTreeSet<(String, String)> {
    let dir = support::repo().join("tests/fixtures/nhwc");
    let m = onnx_lint::model::load(&dir.join(model)).unwrap();
    let table = tables::resolve(ort).unwrap().table();
    let p = placer::place(
        &m,
        table,
        &Options {
            eps: vec![Ep::Cpu],
            level: OptLevel::All,
            ..Default::default()
        },
    );
    assert!(p.outcome.placed(), "{model}: {ort}: not placed");
    p.session
        .graphs
        .iter()
        .flat_map(|g| g.live_nodes())
        .map(|(_, n)| (n.name.to_string(), format!("{}:{}", n.domain, n.op)))
        .collect()
}

#[test]
fn nhwc_transformer_agrees_with_ort() {
    let dir = support::repo().join("tests/fixtures/nhwc");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert_eq!(truth.len(), 2 * 3, "two probes, three releases");
    for r in &truth {
        let (model, ort) = (r["model"].as_str().unwrap(), r["ort"].as_str().unwrap());
        let nodes: BTreeSet<(String, String)> = r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n[0].as_str().unwrap().to_string(),
                    n[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(predicted(model, ort), nodes, "{model}: ORT {ort}");
    }
}
