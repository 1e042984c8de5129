//! `DoubleQDQPairsRemover` when `Q2` feeds several DQs: `tests/fixtures/double_qdq/` holds
//! `Q1 -> DQ1 [-> Cast] -> Q2 -> DQ2` chains (`tools/realworld/double_qdq.py`) whose `Q2` is read
//! by one DQ, by a DQ shared by two QDQ node units (so `EnsureUniqueDQForNodeUnit` gives the
//! second its own before level 1), by a DQ and a DQ of another scale, or by a DQ and another
//! node; `truth.json` holds the node names of the session graphs the CPU wheels 1.23.2, 1.24.4
//! and 1.31.1 saved at level `basic`. The CPU-only `--ep cpu` prediction must name the same nodes.

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

#[test]
fn double_qdq_pairs_with_several_dqs_agree_with_ort() {
    let dir = support::repo().join("tests/fixtures/double_qdq");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert!(truth.len() >= 15, "double_qdq truth missing");
    let mut removed_with_copies = 0;
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
        if theirs.contains("d2/duplicated") && !theirs.contains("q2") {
            removed_with_copies += 1;
        }
    }
    // The case the rule is about is in the truth: the pair removed although Q2 feeds two DQs.
    assert!(removed_with_copies >= 2, "{removed_with_copies}");
}
