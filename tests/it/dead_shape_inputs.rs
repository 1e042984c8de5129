//! Constant folding of a `Shape` and the nodes only it read: `tests/fixtures/dead_shape_inputs/`
//! holds `Shape(Concat(Unsqueeze(Gather(Shape(x))), c))` chains (`tools/realworld/dead_shape_inputs.py`)
//! whose folded `Shape` leaves its producers without a reader, alone or with a `Neg` that still
//! reads the Unsqueeze or the Gather; `truth.json` holds the node names of the session graphs
//! the CPU wheels 1.23.2, 1.24.4 and 1.31.1 saved at level `basic` (ORT removes the chain
//! bottom-up, `RemoveNodesWithOneOutputBottomUp`, up to a node another one reads). The CPU-only
//! `--ep cpu` prediction must name the same nodes.

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

#[test]
fn producers_only_a_folded_shape_read_are_removed() {
    let dir = support::repo().join("tests/fixtures/dead_shape_inputs");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert!(truth.len() >= 9, "dead_shape_inputs truth missing");
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
        assert_eq!(
            support::live_node_names(&p),
            support::truth_node_names(&r["nodes"]),
            "ORT {ort}, {file}"
        );
    }
}
