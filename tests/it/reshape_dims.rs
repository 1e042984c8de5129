//! `ReshapeFusion` when the Shape reads another value than the Reshape:
//! `tests/fixtures/reshape_dims/` holds `Reshape(r, Concat(Unsqueeze(Gather(Shape(a), 0)),
//! Unsqueeze(Gather(Shape(a), 1)), [2], [8]))` models (`tools/realworld/reshape_dims.py`) where
//! ORT's shape inference gives `r` and `a` the same dims, one of two, or none (a declared
//! `value_info` beats the inferred dims; a broadcast of two different symbols is unknown), and
//! where the Shape reads a DQ of the quantized tensor the Reshape reads, its output declared with
//! other symbols or not. `truth.json` holds the node names of the session graphs the CPU wheels
//! 1.23.2, 1.24.4, 1.25.1, 1.28.0 and 1.31.1 saved at level `basic`; the CPU-only prediction
//! must name the same nodes.

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

#[test]
fn reshape_fusion_matches_shapes_by_ort_inferred_dims() {
    let dir = support::repo().join("tests/fixtures/reshape_dims");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert!(truth.len() >= 25, "reshape_dims truth missing");
    let (mut fused, mut kept_at_131) = (0, 0);
    for r in &truth {
        let ort = r["ort"].as_str().unwrap();
        let file = r["model"].as_str().unwrap();
        let m = onnx_lint::model::load(&dir.join(file)).unwrap();
        let p = placer::place(
            &m,
            tables::resolve(ort).unwrap().table(),
            &Options {
                eps: vec![Ep::Cpu],
                level: OptLevel::Basic,
                ..Default::default()
            },
        );
        let mine = support::live_node_names(&p);
        let theirs = support::truth_node_names(&r["nodes"]);
        assert_eq!(mine, theirs, "ORT {ort}, {file}");
        if !theirs.contains("concat") {
            fused += 1;
        } else if ort == "1.31.1" {
            kept_at_131 += 1;
        }
    }
    // Both outcomes are in the truth at 1.31.1: fused with one unmatched part (a -1), and kept
    // with two.
    assert!(fused >= 4 && kept_at_131 >= 1, "{fused} {kept_at_131}");
}
