//! The shape probes (`tests/fixtures/shape_probes/`, `tools/realworld/shape_probes.py`):
//! what the torchvision detectors and DETR of unseen3 (issue 16) needed, each on a small model,
//! with the truth of the CPU wheels (node names of the saved session graph) and of the
//! stubbed-GPU oracle (placement and copies), 1.23.2, 1.24.4 and 1.31.1 at level `basic`.
//!
//! - `shape_ops`: ONNX's shape inference of `Resize` (run-time `sizes`), `Pad` (run-time `pads`),
//!   `GatherND`, `ConvTranspose`, `RoiAlign`, `Shape` of a value without a shape and `If` (the
//!   union of its branches), seen through `NoopElimination`, which removes `Add(out, 0)` only
//!   when `out` has a shape: every `noop_*` goes but `noop_if_diff` (branches of two ranks).
//!   The detectors' preprocessing `Resize` hid every shape below it, and with them the folding
//!   of their anchor and box arithmetic.
//! - `reshape_ranks`: from 1.29 `ReshapeFusion` compares the gathered dim alone, whatever the
//!   ranks of the Shape's input and the Reshape's (onnxsim's `sim.tv.fasterrcnn` box head).
//! - `expand_symbol`: an `Expand` whose shape is built at run time has unknown dims for ORT;
//!   no release fuses the Reshape that would need them.
//! - `unsqueeze_names` (level `extended`): `UnsqueezeElimination` generates a name for each
//!   Unsqueeze of a constant even where it then finds no `axes` attribute (opset 13+): two
//!   Unsqueezes of one constant advance the graph's name counter, and the Squeezes of the
//!   `GatherSliceToSplitFusion` after them are `Squeeze_token_3` and `Squeeze_token_6`
//!   (Mask R-CNN's paste-masks Loop body).

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::{Map, Value};

use crate::support;

fn place(path: &std::path::Path, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    let m = onnx_lint::model::load(path).unwrap();
    placer::place(
        &m,
        tables::resolve(ort).unwrap().table(),
        &Options {
            eps,
            level,
            ..Default::default()
        },
    )
}

/// A record's placement without the copy nodes (ORT logs them; the prediction's JSON too).
fn without_copies(v: &Value) -> Map<String, Value> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with("Memcpy"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn shape_probes_agree_with_ort() {
    let dir = support::repo().join("tests/fixtures/shape_probes");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert_eq!(truth.len(), 12, "shape_probes truth missing");
    for r in &truth {
        let ort = r["ort"].as_str().unwrap();
        let level = match r["level"].as_str().unwrap() {
            "extended" => OptLevel::Extended,
            _ => OptLevel::Basic,
        };
        let file = r["model"].as_str().unwrap();
        let path = dir.join(file);
        // CPU only: the saved session graph's node names, every graph.
        let p = place(&path, ort, level, vec![Ep::Cpu]);
        let mine = support::live_node_names(&p);
        let theirs = support::truth_node_names(&r["nodes"]);
        assert_eq!(mine, theirs, "CPU wheel {ort}, {file}");
        // CUDA: placement and copies.
        let p = place(&path, ort, level, vec![Ep::Cuda, Ep::Cpu]);
        let mine = onnx_lint::cli::placement_json(file, &p);
        let cuda = &r["cuda"];
        assert_eq!(mine["session"], cuda["session"], "oracle {ort}, {file}");
        assert_eq!(mine["memcpy"], cuda["memcpy"], "oracle {ort}, {file}");
        assert_eq!(
            mine["all_nodes_on"], cuda["all_nodes_on"],
            "oracle {ort}, {file}"
        );
        assert_eq!(
            without_copies(&mine["placement"]),
            without_copies(&cuda["placement"]),
            "oracle {ort}, {file}"
        );
    }
    // The probes show what they were made for: at 1.31.1 the Reshape of `reshape_ranks` is
    // fused, `expand_symbol`'s is not, and of the no-op Adds only `noop_if_diff` is left.
    let at = |file: &str| {
        truth
            .iter()
            .find(|r| r["ort"] == "1.31.1" && r["model"] == file)
            .map(|r| r["nodes"].to_string())
            .unwrap()
    };
    assert!(!at("reshape_ranks.onnx").contains("\"concat\""));
    assert!(at("expand_symbol.onnx").contains("\"concat\""));
    let ops = at("shape_ops.onnx");
    assert!(ops.contains("\"noop_if_diff\"") && !ops.contains("\"noop_resize\""));
    assert!(at("unsqueeze_names.onnx").contains("\"Squeeze_token_3\""));
}
