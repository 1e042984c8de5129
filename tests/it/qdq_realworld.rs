//! Quantized real-world models (QDQ and QOperator) whose sessions ORT's transformers shape in
//! ways the simple cases do not show, each checked against the oracle's record of the
//! session (`tests/fixtures/realworld/oracle/realworld-<ort>-all.jsonl.gz`):
//! - `qop.tsd.gpt_neox`: ORT's level-1 TransposeOptimizer pushes the attention's Transpose
//!   through the `com.microsoft` QLinearAdd/QLinearMul/QLinearConcat (its extended handlers, at
//!   level 1 whatever the provider), which at 1.23.2/1.24.4 leaves two Transposes on CUDA read by
//!   CPU nodes: two more `MemcpyToHost` (60, not 58).
//! - `qdyn.tsd.falcon`: on CUDA, `x` of the erf-Gelu comes from the dequantizing `Mul`, which
//!   ORT's GeluFusion takes for the `x·0.5` branch and fails on: the Gelu stays unfused.
//! - `qops8.tsd.gemma`: a DQ -> Q pair left by a removed float Cast, whose DQ is a copy made by
//!   `EnsureUniqueDQForNodeUnit` and whose Q feeds QLinearMul and QLinearAdd, is kept (four more
//!   copies: 77, not 73).
//!
//! Each session must agree with ORT exactly: the copies per graph, and every node of the
//! prediction's placement by name and provider.

use std::path::PathBuf;

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::placement::{placement_of, records};
use crate::support;

fn fixtures() -> PathBuf {
    support::repo().join("tests/fixtures/realworld")
}

/// The prediction's and ORT's placement JSON for `model` at `ort`, level `all`, with CUDA.
fn session(ort: &str, model: &str) -> (Value, Value) {
    let file = fixtures().join(format!("oracle/realworld-{ort}-all.jsonl.gz"));
    let truth = records(&file)
        .into_iter()
        .find(|r| r["model"].as_str() == Some(&format!("realworld/{model}")))
        .unwrap_or_else(|| panic!("no oracle record of {model} at {ort}"));
    let m = onnx_lint::model::load(&fixtures().join(model)).unwrap();
    let table = tables::resolve(ort).unwrap().table();
    let options = Options {
        eps: vec![Ep::Cuda, Ep::Cpu],
        level: OptLevel::All,
        ..Default::default()
    };
    let p = placer::place(&m, table, &options);
    (onnx_lint::cli::placement_json(model, &p), truth)
}

fn assert_agrees(ort: &str, model: &str) {
    let (mine, truth) = session(ort, model);
    assert_eq!(mine["session"], "ok", "{model} at {ort}");
    assert_eq!(
        mine["memcpy"], truth["memcpy"],
        "copies of {model} at {ort}"
    );
    let ((p_mine, _), (p_truth, _)) = (placement_of(&mine), placement_of(&truth));
    assert!(!p_truth.is_empty(), "the oracle lists the placement");
    let differ: Vec<_> = p_truth
        .iter()
        .filter(|(n, e)| p_mine.get(*n) != Some(e))
        .map(|(n, e)| format!("{n}: ORT {e}, predicted {:?}", p_mine.get(n)))
        .chain(
            p_mine
                .keys()
                .filter(|n| !p_truth.contains_key(*n))
                .map(|n| format!("{n}: predicted only")),
        )
        .collect();
    assert!(differ.is_empty(), "{model} at {ort}: {differ:#?}");
}

#[test]
fn gpt_neox_transposes_pushed_through_qlinear_ops_add_copies() {
    for ort in ["1.23.2", "1.24.4"] {
        let (mine, _) = session(ort, "qop.tsd.gpt_neox.L2.onnx");
        assert_eq!(mine["memcpy"]["main_graph"], 60, "at {ort}");
        assert_agrees(ort, "qop.tsd.gpt_neox.L2.onnx");
    }
}

#[test]
fn falcon_gelu_after_a_dequantizing_mul_stays_unfused_on_cuda() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let (mine, _) = session(ort, "qdyn.tsd.falcon.L2.onnx");
        let placement = mine["placement"].as_object().unwrap();
        assert!(
            placement.keys().all(|n| !n.starts_with("Gelu")),
            "no Gelu at {ort}"
        );
        assert_eq!(
            placement["/m/transformer/h.0/mlp/act/Erf"], "CUDAExecutionProvider",
            "at {ort}"
        );
        assert_agrees(ort, "qdyn.tsd.falcon.L2.onnx");
    }
}

#[test]
fn gemma_copied_dq_before_a_shared_q_keeps_its_pair() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let (mine, _) = session(ort, "qops8.tsd.gemma.L2.onnx");
        let placement = mine["placement"].as_object().unwrap();
        assert_eq!(
            placement["/m/model/layers.0/input_layernorm/Cast_output_0_QuantizeLinear"],
            "CUDAExecutionProvider",
            "the DQ -> Q pair stays at {ort}"
        );
        assert_eq!(mine["memcpy"]["main_graph"], 77, "at {ort}");
        assert_agrees(ort, "qops8.tsd.gemma.L2.onnx");
    }
}
