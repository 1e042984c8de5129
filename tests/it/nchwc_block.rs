//! The NCHWc block size (`[cpu] nchwc-block`, `placer::Options::nchwc_block`): what ORT's CPU
//! provider does at level `all` depends on the CPU's MLAS block size, 16 with AVX-512F and 8 on
//! other x86-64 CPUs. `tests/fixtures/nchwc/blocks.onnx` has convolutions, a pooling, an `Add`
//! and a `Concat` whose channels (24, 40, 80) are multiples of 8 but not of 16;
//! `truth.json` holds the session graphs the CPU wheels made of it natively on an AVX-512 machine
//! (block 16) and under `qemu-x86_64 -cpu Haswell` (block 8), recorded by
//! `tools/realworld/nchwc_block.py`. `tests/fixtures/nchwc/probes/` isolates mechanisms of the
//! pass itself (`tools/realworld/nchwc_probes.py`).

use std::collections::BTreeSet;

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

fn predicted(ort: &str, block: u32) -> BTreeSet<(String, String)> {
    predicted_for("blocks.onnx", ort, block)
}

/// The session graph's nodes (name, `domain:op`) predicted for `tests/fixtures/nchwc/<model>`.
fn predicted_for(model: &str, ort: &str, block: u32) -> BTreeSet<(String, String)> {
    let dir = support::repo().join("tests/fixtures/nchwc");
    let m = onnx_lint::model::load(&dir.join(model)).unwrap();
    let table = tables::resolve(ort).unwrap().table();
    let p = placer::place(
        &m,
        table,
        &Options {
            eps: vec![Ep::Cpu],
            level: OptLevel::All,
            nchwc_block: block,
        },
    );
    assert!(
        p.outcome.placed(),
        "{model}: {ort} block {block}: not placed"
    );
    p.session
        .graphs
        .iter()
        .flat_map(|g| g.live_nodes())
        .map(|(_, n)| (n.name.to_string(), format!("{}:{}", n.domain, n.op)))
        .collect()
}

#[test]
fn nchwc_block_sizes_agree_with_ort() {
    let dir = support::repo().join("tests/fixtures/nchwc");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    let mut blocks = BTreeSet::new();
    for r in &truth {
        let ort = r["ort"].as_str().unwrap();
        let block = u32::try_from(r["block"].as_u64().unwrap()).unwrap();
        blocks.insert(block);
        assert_eq!(
            predicted(ort, block),
            nodes_of(r),
            "ORT {ort}, block {block}"
        );
    }
    assert_eq!(blocks, BTreeSet::from([8, 16]), "both block sizes recorded");
    // The two block sizes give different graphs: the setting matters for this model.
    assert_ne!(predicted("1.31.1", 8), predicted("1.31.1", 16));
}

fn nodes_of(r: &Value) -> BTreeSet<(String, String)> {
    r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n[0].as_str().unwrap().to_string(),
                n[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `tests/fixtures/nchwc/probes/`: one model per mechanism of the NCHWc pass (shapes matched by
/// `dim_param`, the input-channel alignment of 4, the shared `Reshape` shapes, the walk's order
/// over branches that `ConvActivationFusion` fused, an NHWC `Transpose` folded into the
/// `ReorderInput`, the element-wise and fused activations of each release, 1.31's `HardSwish`
/// fusion, batch dims traced through `FusedConv`/`ReduceMean`), with the session graphs of the
/// five CPU wheels, recorded natively by `tools/realworld/nchwc_probes.py` (block 16: AVX-512F).
#[test]
fn nchwc_probes_agree_with_ort() {
    let dir = support::repo().join("tests/fixtures/nchwc/probes");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    let mut seen = BTreeSet::new();
    for r in &truth {
        let (model, ort) = (r["model"].as_str().unwrap(), r["ort"].as_str().unwrap());
        let block = u32::try_from(r["block"].as_u64().unwrap()).unwrap();
        seen.insert(model);
        assert_eq!(
            predicted_for(&format!("probes/{model}"), ort, block),
            nodes_of(r),
            "{model}: ORT {ort}, block {block}"
        );
    }
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert_eq!(truth.len(), 8 * 5, "five releases per probe");
}

#[test]
fn nchwc_block_zero_means_no_nchwc_transformer() {
    let nodes = predicted("1.31.1", 0);
    assert!(
        nodes
            .iter()
            .all(|(_, op)| !op.starts_with("com.microsoft.nchwc")),
        "{nodes:?}"
    );
    assert!(nodes.iter().any(|(_, op)| op == "ai.onnx:Conv"));
}

/// `[cpu] nchwc-block` in `onnx-lint.toml` reaches `place`: the CPU session graph of the
/// fixture has 14 nodes with block 16 (the default) and 10 with block 8, as ORT's; a size MLAS
/// does not have is a configuration error (exit 2) pointing at the value.
#[test]
fn nchwc_block_is_a_configuration_setting() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        support::repo().join("tests/fixtures/nchwc/blocks.onnx"),
        dir.path().join("blocks.onnx"),
    )
    .unwrap();
    let args = [
        "place",
        "blocks.onnx",
        "--ep",
        "cpu",
        "--ort",
        "1.31.1",
        "--format",
        "json",
    ];
    let count = |run: &support::Run| -> Value {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        v[0]["all_nodes_on"]["CPUExecutionProvider"].clone()
    };
    assert_eq!(count(&support::run_in(dir.path(), &args)), 14);
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "[cpu]\nnchwc-block = 8\n",
    )
    .unwrap();
    assert_eq!(count(&support::run_in(dir.path(), &args)), 10);
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "[cpu]\nnchwc-block = 12\n",
    )
    .unwrap();
    let bad = support::run_in(dir.path(), &args);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("unsupported nchwc-block `12`"),
        "{}",
        bad.stderr
    );
    assert!(bad.stderr.contains("expected 16, 8 or 0"), "{}", bad.stderr);
}
