//! `--fix`, `--diff`, `-o`: each fix kind on a fixture model (`tests/fixtures/fix/`, written by
//! `tools/fix/make_fixtures.py`) with an insta snapshot of its diff, ORT's own placement of the
//! model before and after (`truth-1.24.4-all.jsonl`, recorded by `tools/fix/refresh_truth.sh` with
//! the stubbed-GPU oracle) equal to the prediction, and CPU onnxruntime outputs before and after
//! compared bit for bit (`tools/fix/ort_outputs.py`). Then the public mobius decoders: `--fix` on
//! each `.op24` file predicts exactly ORT's placement of the real `.op23` export. Then safety:
//! unknown fields survive, bad input is exit 2 and leaves the file byte-identical.
//!
//! `ONNX_LINT_BLESS=1` rewrites the fixed models `tests/fixtures/fix/*.fixed.onnx` (then run
//! `tools/fix/refresh_truth.sh`). Tests that need the shared corpus or onnxruntime say so when
//! they cannot run, and fail instead under `CI=true`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use onnx_lint::diagnostics::{Fix, FixSafety};
use onnx_lint::fix::wire;
use onnx_lint::model::proto::ModelProto;
use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use prost::Message;
use serde_json::Value;

use crate::support::{self, Run, run_in};

fn fixtures() -> PathBuf {
    support::repo().join("tests/fixtures/fix")
}

/// Says why a test cannot run (past libtest's capture); under `CI=true` that is a failure.
fn cannot_run(why: &str) {
    support::not_run("fix", why);
}

/// The public corpus kept in this repository (`tests/fixtures/corpus/models`).
fn corpus() -> Option<PathBuf> {
    Some(support::corpus_models()).filter(|p| p.join("mobius").is_dir())
}

/// ORT's records for the public corpus at 1.24.4, `all` (`tests/fixtures/oracle`), by model path
/// relative to the corpus's `models/`.
fn corpus_truth() -> BTreeMap<String, Value> {
    use std::io::BufRead;
    let file = std::fs::File::open(
        support::repo().join("tests/fixtures/oracle/models-1.24.4-all.jsonl.gz"),
    )
    .unwrap();
    std::io::BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
            (v["model"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// A temporary folder holding a copy of fixture `name` (writable).
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join(name);
    std::fs::copy(fixtures().join(name), &to).unwrap();
    (dir, to)
}

/// ORT's records for the fixtures, by file name.
fn truth() -> BTreeMap<String, Value> {
    std::fs::read_to_string(fixtures().join("truth-1.24.4-all.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["model"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    onnx_lint::cache::sha256_hex(bytes)
}

/// The predicted placement record (the oracle's field names) of a model file at 1.24.4, `all`.
fn predicted(path: &Path) -> Value {
    let m = onnx_lint::model::load(path).unwrap();
    let table = tables::resolve("1.24.4").unwrap().table();
    let options = Options {
        eps: vec![Ep::Cuda, Ep::Cpu],
        level: OptLevel::All,
        ..Default::default()
    };
    onnx_lint::cli::placement_json("m", &placer::place(&m, table, &options))
}

fn total_copies(r: &Value) -> u64 {
    r["memcpy"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

/// The prediction equals ORT's record: outcome, copies per graph, every node's provider.
fn assert_agrees(what: &str, truth: &Value, mine: &Value) {
    let empty = |v: &Value| v.as_object().is_none_or(|m| m.is_empty());
    assert!(
        truth["memcpy"] == mine["memcpy"] || (empty(&truth["memcpy"]) && empty(&mine["memcpy"])),
        "{what}: copies: ORT {} vs predicted {}",
        truth["memcpy"],
        mine["memcpy"]
    );
    let placement = |v: &Value| -> BTreeMap<String, Value> {
        v["placement"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !k.starts_with("Memcpy"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(placement(truth), placement(mine), "{what}: placement");
    assert_eq!(
        truth["all_nodes_on"], mine["all_nodes_on"],
        "{what}: all nodes on"
    );
}

/// CPU onnxruntime on both models with the same random inputs: `Some(report)` when they ran
/// (asserting bit-identical outputs), `None` when onnxruntime is not available (said, and a
/// failure under `CI=true`).
fn assert_same_outputs(before: &Path, after: &Path) -> Option<Value> {
    let out = Command::new(support::python())
        .arg(support::repo().join("tools/fix/ort_outputs.py"))
        .args([before, after])
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            cannot_run(&format!("no Python to run onnxruntime: {e}"));
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    match out.status.code() {
        Some(3) => {
            cannot_run(&format!(
                "onnxruntime is not installed for {}: {stdout}",
                support::python().display()
            ));
            None
        }
        Some(0) => {
            assert_eq!(report["equal"], true, "{stdout}");
            Some(report)
        }
        _ => panic!(
            "CPU onnxruntime outputs of {} and {} differ or did not run: {stdout}{}",
            before.display(),
            after.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Writes (under `ONNX_LINT_BLESS`) or checks the committed fixed model `name`.
fn check_fixed(name: &str, bytes: &[u8]) {
    let path = fixtures().join(name);
    if std::env::var_os("ONNX_LINT_BLESS").is_some() {
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == bytes,
        "{name}: the fixer now writes other bytes; bless with ONNX_LINT_BLESS=1 and re-record the truth (tools/fix/refresh_truth.sh)"
    );
}

/// The truth records of a fixture and of its fixed model agree with the prediction, and are
/// about these very bytes.
fn check_truth(before: &str, after: &str) -> (u64, u64) {
    let truth = truth();
    let mut copies = Vec::new();
    for name in [before, after] {
        let path = fixtures().join(name);
        let record = truth
            .get(name)
            .unwrap_or_else(|| panic!("no ORT record for {name}: run tools/fix/refresh_truth.sh"));
        assert_eq!(
            record["sha256"].as_str().unwrap(),
            sha256(&std::fs::read(&path).unwrap()),
            "{name}: the ORT record is about other bytes: run tools/fix/refresh_truth.sh"
        );
        assert_eq!(record["session"], "ok", "{name}");
        assert_agrees(name, record, &predicted(&path));
        copies.push(total_copies(record));
    }
    (copies[0], copies[1])
}

fn bin(dir: &Path, args: &[&str]) -> Run {
    run_in(dir, args)
}

// ---------------------------------------------------------------------------------------------
// One fixture per fix kind

/// set-opset-import: the decoder block at ai.onnx 24 lowers to 23 with its local function.
#[test]
fn lowering_the_opset_fixes_the_registration_gap() {
    let (dir, model) = copy_fixture("lower_opset.op24.onnx");
    let original = std::fs::read(&model).unwrap();
    let diff = bin(
        dir.path(),
        &["--ort", "1.24.4", "--diff", "lower_opset.op24.onnx"],
    );
    assert_eq!(
        diff.code, 1,
        "--diff exits 1 when there is a fix: {}",
        diff.stderr
    );
    assert_eq!(
        std::fs::read(&model).unwrap(),
        original,
        "--diff writes nothing"
    );
    insta::assert_snapshot!("diff_lower_opset", diff.stdout);
    assert!(
        diff.stderr
            .contains("would apply 1 fix: 3 → 0 copies, 4 → 0 CPU nodes"),
        "{}",
        diff.stderr
    );

    let run = bin(
        dir.path(),
        &[
            "--ort",
            "1.24.4",
            "--fix",
            "-o",
            "fixed.onnx",
            "lower_opset.op24.onnx",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("3 → 0 copies, 4 → 0 CPU nodes"),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read(&model).unwrap(),
        original,
        "-o leaves the input"
    );
    let fixed = std::fs::read(dir.path().join("fixed.onnx")).unwrap();
    // Same length: only the two one-byte versions (model and function import) changed.
    assert_eq!(fixed.len(), original.len());
    let changed: Vec<(u8, u8)> = original
        .iter()
        .zip(&fixed)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (*a, *b))
        .collect();
    assert_eq!(changed, vec![(24, 23), (24, 23)]);
    check_fixed("lower_opset.op24.fixed.onnx", &fixed);
    // Converged: the fixed model has nothing left to fix and is left as it is.
    let again = bin(dir.path(), &["--ort", "1.24.4", "--fix", "fixed.onnx"]);
    assert!(
        again.stdout.contains("nothing to fix: 0 → 0 copies"),
        "{}",
        again.stdout
    );
    assert_eq!(std::fs::read(dir.path().join("fixed.onnx")).unwrap(), fixed);
    let (before, after) = check_truth("lower_opset.op24.onnx", "lower_opset.op24.fixed.onnx");
    assert_eq!((before, after), (3, 0), "ORT's copies before and after");
    assert_same_outputs(&model, &dir.path().join("fixed.onnx"));
}

/// set-function-opset-import: the local function still at 24 in an opset-23 model (OL003).
#[test]
fn aligning_a_function_import_keeps_everything_else() {
    let (dir, model) = copy_fixture("function_opset.op23.onnx");
    let original = std::fs::read(&model).unwrap();
    // Off by default: nothing to fix.
    let quiet = bin(
        dir.path(),
        &["--ort", "1.24.4", "--diff", "function_opset.op23.onnx"],
    );
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert!(quiet.stdout.trim().is_empty());
    let diff = bin(
        dir.path(),
        &[
            "--ort",
            "1.24.4",
            "--warn",
            "OL003",
            "--diff",
            "function_opset.op23.onnx",
        ],
    );
    assert_eq!(diff.code, 1, "{}", diff.stderr);
    insta::assert_snapshot!("diff_function_opset", diff.stdout);
    let run = bin(
        dir.path(),
        &[
            "--ort",
            "1.24.4",
            "--warn",
            "OL003",
            "--fix",
            "function_opset.op23.onnx",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("applied 1 fix: 0 → 0 copies, 0 → 0 CPU nodes"),
        "{}",
        run.stdout
    );
    let fixed = std::fs::read(&model).unwrap();
    let changed: Vec<(u8, u8)> = original
        .iter()
        .zip(&fixed)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (*a, *b))
        .collect();
    assert_eq!(changed, vec![(24, 23)], "only the function's import");
    // Converged: a second run has nothing to do and leaves the file as it is.
    let again = bin(
        dir.path(),
        &[
            "--ort",
            "1.24.4",
            "--warn",
            "OL003",
            "--fix",
            "function_opset.op23.onnx",
        ],
    );
    assert!(again.stdout.contains("nothing to fix"), "{}", again.stdout);
    assert_eq!(std::fs::read(&model).unwrap(), fixed);
    check_fixed("function_opset.op23.fixed.onnx", &fixed);
    check_truth("function_opset.op23.onnx", "function_opset.op23.fixed.onnx");
    assert_same_outputs(&fixtures().join("function_opset.op23.onnx"), &model);
}

/// replace-input-with-constant: the TorchScript `bsz, q_len, _ = hidden.size()` chain. The
/// constant is OL301's JSON `fix`, checked against the hand-derived one, applied through the
/// library. The chain costs no copy at 1.24.4 (ORT's record: `copies: []`), so OL301 reports it
/// only with the opt-in `zero-cost` group.
#[test]
fn replacing_a_shape_chain_with_its_constant_removes_the_cpu_nodes() {
    let path = fixtures().join("shape_chain.op17.onnx");
    let bytes = std::fs::read(&path).unwrap();
    let model = onnx_lint::model::load(&path).unwrap();
    let lint = bin(
        &fixtures(),
        &[
            "--ort",
            "1.24.4",
            "--warn",
            "zero-cost",
            "--format",
            "json",
            "shape_chain.op17.onnx",
        ],
    );
    let record: Value = match serde_json::from_str(&lint.stdout).unwrap() {
        Value::Array(mut a) => a.remove(0),
        one => one,
    };
    let ol301 = record["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "OL301")
        .expect("OL301 fires on the chain")
        .clone();
    // The hand-derived constant (what the issue's reporter verified on CPU onnxruntime).
    let fix = Fix::ReplaceInputWithConstant {
        graph: "main_graph".into(),
        node: "/Reshape".into(),
        input: 1,
        values: vec![0, 0, 4, 8],
        safety: FixSafety::Safe,
    };
    // OL301's own constant, proved through the projection: the same edit, same numerics.
    assert_eq!(
        ol301["fix"]["kind"], "replace-input-with-constant",
        "{ol301}"
    );
    {
        let own = Fix::ReplaceInputWithConstant {
            graph: ol301["fix"]["graph"].as_str().unwrap().into(),
            node: ol301["fix"]["node"].as_str().unwrap().into(),
            input: ol301["fix"]["input"].as_u64().unwrap() as usize,
            values: ol301["fix"]["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect(),
            safety: FixSafety::Safe,
        };
        let dir = tempfile::tempdir().unwrap();
        let r = onnx_lint::fix::apply(&bytes, &model, std::slice::from_ref(&own)).unwrap();
        assert_eq!(r.applied.len(), 1, "{:?}", r.skipped);
        std::fs::write(dir.path().join("own.onnx"), &r.bytes).unwrap();
        assert_same_outputs(&path, &dir.path().join("own.onnx"));
    }
    let applied = onnx_lint::fix::apply(&bytes, &model, std::slice::from_ref(&fix)).unwrap();
    assert_eq!(applied.applied, vec![fix]);
    assert_eq!(
        applied.removed_nodes,
        [
            "/Shape",
            "/Gather",
            "/Gather_1",
            "/Unsqueeze",
            "/Unsqueeze_1",
            "/Concat"
        ]
    );
    let after = ModelProto::decode(applied.bytes.as_slice()).unwrap();
    let diff = onnx_lint::fix::text_diff(&model.proto, &after, "shape_chain.op17.onnx");
    insta::assert_snapshot!("diff_shape_chain", diff);
    check_fixed("shape_chain.op17.fixed.onnx", &applied.bytes);
    check_truth("shape_chain.op17.onnx", "shape_chain.op17.fixed.onnx");
    let fixed = predicted(&fixtures().join("shape_chain.op17.fixed.onnx"));
    assert_eq!(
        fixed["all_nodes_on"],
        serde_json::json!({"CUDAExecutionProvider": 3}),
        "no CPU node left"
    );
    assert_same_outputs(&path, &fixtures().join("shape_chain.op17.fixed.onnx"));
}

/// OL301's fixes of fixture `name` at 1.24.4 and `level` (the `zero-cost` group enabled), read
/// back from the lint JSON.
fn ol301_fixes(name: &str, level: &str) -> Vec<Fix> {
    let lint = bin(
        &fixtures(),
        &[
            "--ort",
            "1.24.4",
            "--opt-level",
            level,
            "--warn",
            "zero-cost",
            "--no-cache",
            "--format",
            "json",
            name,
        ],
    );
    let record: Value = match serde_json::from_str(&lint.stdout).unwrap() {
        Value::Array(mut a) => a.remove(0),
        one => one,
    };
    let text = |f: &Value, k: &str| f[k].as_str().unwrap().to_string();
    record["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "OL301")
        .map(|f| {
            let f = &f["fix"];
            let values = || {
                f["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
                    .collect()
            };
            let safety = if f["safety"] == "safe" {
                FixSafety::Safe
            } else {
                FixSafety::Unsafe
            };
            match f["kind"].as_str() {
                Some("collapse-reshape") => Fix::CollapseReshape {
                    graph: text(f, "graph"),
                    node: text(f, "node"),
                    data: text(f, "data"),
                    values: values(),
                    safety,
                },
                Some("unflatten-gemm") => Fix::UnflattenGemm {
                    graph: text(f, "graph"),
                    flatten: text(f, "flatten"),
                    gemm: text(f, "gemm"),
                    unflatten: text(f, "unflatten"),
                    safety,
                },
                Some("replace-input-with-constant") => Fix::ReplaceInputWithConstant {
                    graph: text(f, "graph"),
                    node: text(f, "node"),
                    input: f["input"].as_u64().unwrap() as usize,
                    values: values(),
                    safety,
                },
                _ => panic!("{name}: an OL301 finding without a fix: {f}"),
            }
        })
        .collect()
}

/// collapse-reshape: transformers' padding mask as TorchScript exports it. The mask indexed by
/// `batch_idx * seq + kv_idx` is `[batch, 1, 1, seq, 1]`, flattened by `Reshape(-1)` and viewed
/// back as `[batch, 1, 1, seq]` from a `Shape`: no constant splits `batch·seq`, but the view can
/// read the `Gather` directly with `[0, 1, 1, 0]`. The flattening Reshape and the shape chain go.
#[test]
fn collapsing_the_padding_mask_view_reads_the_gather_directly() {
    let name = "padding_mask.op17.onnx";
    let path = fixtures().join(name);
    let bytes = std::fs::read(&path).unwrap();
    let model = onnx_lint::model::load(&path).unwrap();
    let fix = Fix::CollapseReshape {
        graph: "main_graph".into(),
        node: "/m/model/Reshape_1".into(),
        data: "/m/model/Gather_3_output_0".into(),
        values: vec![0, 1, 1, 0],
        safety: FixSafety::Safe,
    };
    for level in ["disable", "all"] {
        assert_eq!(ol301_fixes(name, level), vec![fix.clone()], "{level}");
    }
    let applied = onnx_lint::fix::apply(&bytes, &model, std::slice::from_ref(&fix)).unwrap();
    assert_eq!(applied.applied, vec![fix]);
    assert_eq!(
        applied.removed_nodes,
        [
            "/m/model/Shape_3",
            "/m/model/Constant_13",
            "/m/model/Reshape",
            "/m/model/Concat"
        ]
    );
    let after = ModelProto::decode(applied.bytes.as_slice()).unwrap();
    insta::assert_snapshot!(
        "diff_padding_mask",
        onnx_lint::fix::text_diff(&model.proto, &after, name)
    );
    check_fixed("padding_mask.op17.fixed.onnx", &applied.bytes);
    let (before, after) = check_truth(name, "padding_mask.op17.fixed.onnx");
    assert!(after <= before, "copies {before} → {after}");
    assert_same_outputs(&path, &fixtures().join("padding_mask.op17.fixed.onnx"));
}

/// replace-input-with-constant at `all`: Llama's `repeat_kv`, whose four `Shape → Gather`s ORT
/// fuses into one `Split` (GatherSliceToSplitFusion); the split pieces keep the shape's
/// elements, so the Expand's and the Reshape's constants are proven there too.
#[test]
fn repeat_kv_constants_are_proven_through_ort_split_fusion() {
    let name = "repeat_kv.op17.onnx";
    let path = fixtures().join(name);
    let bytes = std::fs::read(&path).unwrap();
    let model = onnx_lint::model::load(&path).unwrap();
    let fixes = ol301_fixes(name, "all");
    let scope = "/m/model/layers.0/self_attn";
    assert_eq!(
        fixes,
        vec![
            Fix::ReplaceInputWithConstant {
                graph: "main_graph".into(),
                node: format!("{scope}/Expand"),
                input: 1,
                values: vec![1, 2, 2, 1, 8],
                safety: FixSafety::Safe,
            },
            // `-1` beside a `0` that copies the batch: unsafe (an empty batch), see OL301.
            Fix::ReplaceInputWithConstant {
                graph: "main_graph".into(),
                node: format!("{scope}/Reshape_1"),
                input: 1,
                values: vec![0, 4, -1, 8],
                safety: FixSafety::Unsafe,
            },
        ]
    );
    let applied = onnx_lint::fix::apply(&bytes, &model, &fixes).unwrap();
    assert_eq!(applied.applied.len(), 2, "{:?}", applied.skipped);
    assert!(
        applied
            .removed_nodes
            .iter()
            .any(|n| n.ends_with("/Shape_4")),
        "{:?}",
        applied.removed_nodes
    );
    let after = ModelProto::decode(applied.bytes.as_slice()).unwrap();
    insta::assert_snapshot!(
        "diff_repeat_kv",
        onnx_lint::fix::text_diff(&model.proto, &after, name)
    );
    check_fixed("repeat_kv.op17.fixed.onnx", &applied.bytes);
    let (before, after) = check_truth(name, "repeat_kv.op17.fixed.onnx");
    assert!(after <= before, "copies {before} → {after}");
    assert_same_outputs(&path, &fixtures().join("repeat_kv.op17.fixed.onnx"));
}

/// unflatten-gemm: GPT-2's `Conv1D` (`view(-1, k)`, `Gemm`, `view(bsz, q_len, n)`). The
/// second view has no constant; the rewrite to `MatMul` + `Add` on the 3-D input removes both
/// views and the chains. It is `unsafe` (ORT's CPU Gemm adds the bias into the first K-block of
/// the product: identical sums up to K = 256, different in the last bits beyond), so `--fix`
/// alone applies only the first view's constant and `--unsafe-fixes` the rewrite; at K = 16 the
/// outputs stay bit-identical.
#[test]
fn unflattening_a_gemm_removes_the_view_no_constant_can_give() {
    let name = "gpt2_conv1d.op17.onnx";
    let path = fixtures().join(name);
    let bytes = std::fs::read(&path).unwrap();
    let model = onnx_lint::model::load(&path).unwrap();
    let scope = "/m/transformer/h.0/mlp/c_fc";
    let rewrite = Fix::UnflattenGemm {
        graph: "main_graph".into(),
        flatten: format!("{scope}/Reshape"),
        gemm: format!("{scope}/Gemm"),
        unflatten: format!("{scope}/Reshape_1"),
        safety: FixSafety::Unsafe,
    };
    let fixes = ol301_fixes(name, "all");
    assert!(fixes.contains(&rewrite), "{fixes:?}");
    // Both fixes at once: the rewrite goes first and the first view's constant, whose node it
    // removes, is skipped with the reason.
    let applied = onnx_lint::fix::apply(&bytes, &model, &fixes).unwrap();
    assert_eq!(applied.applied, vec![rewrite.clone()]);
    assert!(
        applied.skipped[0].1.contains("already removes"),
        "{:?}",
        applied.skipped
    );
    let after = ModelProto::decode(applied.bytes.as_slice()).unwrap();
    let ops: Vec<&str> = after
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.op_type())
        .collect();
    assert_eq!(ops, ["MatMul", "Add"], "only the projection is left");
    insta::assert_snapshot!(
        "diff_gpt2_conv1d",
        onnx_lint::fix::text_diff(&model.proto, &after, name)
    );
    check_fixed("gpt2_conv1d.op17.fixed.onnx", &applied.bytes);
    let (before, after) = check_truth(name, "gpt2_conv1d.op17.fixed.onnx");
    assert!(after <= before, "copies {before} → {after}");
    assert_same_outputs(&path, &fixtures().join("gpt2_conv1d.op17.fixed.onnx"));
    // Through the command line: the rewrite only with --unsafe-fixes.
    let (dir, local) = copy_fixture(name);
    let args = [
        "--ort",
        "1.24.4",
        "--warn",
        "zero-cost",
        "--no-cache",
        "--format",
        "json",
    ];
    let run = bin(dir.path(), &[&args[..], &["--fix", name]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let record: Value = serde_json::from_str(&run.stdout).unwrap();
    let left: Vec<&Value> = record[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "OL301")
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["fix"]["kind"], "unflatten-gemm");
    let run = bin(
        dir.path(),
        &[&args[..], &["--fix", "--unsafe-fixes", name]].concat(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let record: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        !record[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "OL301"),
        "{}",
        run.stdout
    );
    assert_same_outputs(&path, &local);
}

/// `-o/--output` has two meanings: without `--fix`/`--diff` it is the lint report's file (the
/// model is only read); with `--fix` it is the fixed model's path (the report goes to stdout).
#[test]
fn dash_o_is_the_report_file_when_linting_and_the_fixed_model_with_fix() {
    let (dir, model) = copy_fixture("lower_opset.op24.onnx");
    let original = std::fs::read(&model).unwrap();
    let lint = bin(
        dir.path(),
        &[
            "--ort",
            "1.24.4",
            "--format",
            "json",
            "-o",
            "report.json",
            "lower_opset.op24.onnx",
        ],
    );
    assert_eq!(lint.code, 0, "{}", lint.stderr);
    assert_eq!(lint.stdout, "", "the report went to the file");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report[0]["model"], "lower_opset.op24.onnx");
    assert_eq!(report[0]["summary"]["copies"], 3);
    assert!(report[0].get("fix").is_none(), "linting fixes nothing");
    assert_eq!(
        std::fs::read(&model).unwrap(),
        original,
        "linting writes no model"
    );

    let fix = bin(
        dir.path(),
        &[
            "--ort",
            "1.24.4",
            "--fix",
            "--format",
            "json",
            "-o",
            "fixed.onnx",
            "lower_opset.op24.onnx",
        ],
    );
    assert_eq!(fix.code, 0, "{}", fix.stderr);
    let v: Value = serde_json::from_str(&fix.stdout).expect("the report on stdout");
    assert_eq!(v[0]["fix"]["written"], "fixed.onnx");
    assert_eq!(v[0]["fix"]["after"]["copies"], 0);
    assert_eq!(
        std::fs::read(&model).unwrap(),
        original,
        "-o leaves the input"
    );
    let fixed = onnx_lint::model::load(&dir.path().join("fixed.onnx")).unwrap();
    assert!(
        fixed
            .opsets
            .iter()
            .any(|(d, v)| (d.is_empty() || d == "ai.onnx") && *v == 23),
        "{:?}",
        fixed.opsets
    );
}

/// Every format reports the change per model.
#[test]
fn every_format_reports_before_and_after() {
    for format in ["human", "json", "sarif", "github"] {
        let (dir, _) = copy_fixture("lower_opset.op24.onnx");
        let run = bin(
            dir.path(),
            &[
                "--ort",
                "1.24.4",
                "--fix",
                "--format",
                format,
                "lower_opset.op24.onnx",
            ],
        );
        assert_eq!(run.code, 0, "{format}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("3 → 0 copies, 4 → 0 CPU nodes"),
            "{format}: {}",
            run.stdout
        );
        if format == "json" {
            let v: Value = serde_json::from_str(&run.stdout).unwrap();
            let fix = &v[0]["fix"];
            assert_eq!(fix["before"]["copies"], 3);
            assert_eq!(fix["after"]["copies"], 0);
            assert_eq!(fix["applied"][0]["kind"], "set-opset-import");
            assert_eq!(v[0]["summary"]["opsets"]["ai.onnx"], 23);
        }
        if format == "sarif" {
            let v: Value = serde_json::from_str(&run.stdout).unwrap();
            let fixes = &v["runs"][0]["properties"]["fixes"];
            assert_eq!(fixes[0]["change"], "3 → 0 copies, 4 → 0 CPU nodes");
            assert_eq!(fixes[0]["model"], "lower_opset.op24.onnx");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The public mobius decoders: `.op24` fixed == ORT on the real `.op23`

#[test]
fn fixing_mobius_op24_decoders_predicts_ort_on_their_op23_export() {
    let Some(models) = corpus() else {
        cannot_run("the public corpus (tests/fixtures/corpus/models) is not here");
        return;
    };
    let corpus = models.join("mobius");
    let truth = corpus_truth();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".op24.onnx"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 12);
    let mut lines = Vec::new();
    for op24 in files {
        let name = op24.file_name().unwrap().to_string_lossy().to_string();
        let op23_name = name.replace(".op24.", ".op23.");
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join(&name);
        std::fs::copy(&op24, &local).unwrap();
        let mut perms = std::fs::metadata(&local).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&local, perms).unwrap();
        let run = bin(
            dir.path(),
            &["--ort", "1.24.4", "--fix", "--format", "json", &name],
        );
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let record: Value = serde_json::from_str(&run.stdout).unwrap();
        let fix = &record[0]["fix"];
        assert_eq!(fix["applied"][0]["kind"], "set-opset-import", "{name}");
        let ort = &truth[&format!("mobius/{op23_name}")];
        assert_eq!(
            fix["after"]["copies"].as_u64(),
            Some(total_copies(ort)),
            "{name}: predicted copies after the fix vs ORT on {op23_name}"
        );
        assert_agrees(&name, ort, &predicted(&local));
        // Every function kept; the fixed model is the op23 export with its functions at 23.
        let fixed = ModelProto::decode(std::fs::read(&local).unwrap().as_slice()).unwrap();
        let mut real =
            ModelProto::decode(std::fs::read(corpus.join(&op23_name)).unwrap().as_slice()).unwrap();
        assert_eq!(fixed.functions.len(), real.functions.len(), "{name}");
        for f in &mut real.functions {
            for o in &mut f.opset_import {
                if o.domain().is_empty() {
                    o.version = Some(23);
                }
            }
        }
        assert!(
            fixed == real,
            "{name}: fixed model differs from the op23 export"
        );
        let outputs = match assert_same_outputs(&op24, &local) {
            Some(r) => format!("CPU outputs bit-identical ({} outputs)", r["outputs"]),
            None => "CPU run skipped".into(),
        };
        lines.push(format!(
            "{name}: {} ; ORT on {op23_name}: {} copies; {outputs}",
            fix["change"].as_str().unwrap(),
            total_copies(ort)
        ));
    }
    eprintln!("{}", lines.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Nothing is lost; nothing is half-written

/// Appends unknown fields (numbers ONNX does not use) to the model, its first opset import, its
/// graph and its first node, at the wire level.
fn with_unknown_fields(bytes: &[u8]) -> Vec<u8> {
    fn append_to_first(b: &[u8], number: u32, extra: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut done = false;
        for f in wire::fields(b).unwrap() {
            if f.number == number && f.wire_type == 2 && !done {
                let mut inner = wire::payload(b, &f).to_vec();
                inner.extend_from_slice(extra);
                wire::put_bytes(&mut out, number, &inner);
                done = true;
            } else {
                out.extend_from_slice(&b[f.start..f.end]);
            }
        }
        out
    }
    let marker = |n: u32, text: &str| {
        let mut v = Vec::new();
        wire::put_bytes(&mut v, n, text.as_bytes());
        v
    };
    let mut b = append_to_first(bytes, 8, &marker(77, "unknown-in-opset-import"));
    // Graph (7): its first node (1) gets a field, then the graph one.
    let graph_field = wire::fields(&b)
        .unwrap()
        .into_iter()
        .find(|f| f.number == 7)
        .unwrap();
    let graph = wire::payload(&b, &graph_field).to_vec();
    let mut graph = append_to_first(&graph, 1, &marker(66, "unknown-in-node"));
    graph.extend_from_slice(&marker(88, "unknown-in-graph"));
    let mut out = Vec::new();
    for f in wire::fields(&b).unwrap() {
        if f.number == 7 {
            wire::put_bytes(&mut out, 7, &graph);
        } else {
            out.extend_from_slice(&b[f.start..f.end]);
        }
    }
    b = out;
    b.extend_from_slice(&marker(99, "unknown-in-model"));
    b
}

#[test]
fn unknown_fields_metadata_and_functions_survive_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let original =
        with_unknown_fields(&std::fs::read(fixtures().join("lower_opset.op24.onnx")).unwrap());
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, &original).unwrap();
    let run = bin(dir.path(), &["--ort", "1.24.4", "--fix", "m.onnx"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let fixed = std::fs::read(&path).unwrap();
    for marker in [
        "unknown-in-opset-import",
        "unknown-in-node",
        "unknown-in-graph",
        "unknown-in-model",
        "fixture for cargo onnx-lint --fix",
        "ReshapeSquare",
    ] {
        assert!(
            fixed.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "{marker} lost"
        );
    }
    let changed: Vec<(u8, u8)> = original
        .iter()
        .zip(&fixed)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (*a, *b))
        .collect();
    assert_eq!(fixed.len(), original.len());
    assert_eq!(
        changed,
        vec![(24, 23), (24, 23)],
        "nothing but the two versions"
    );
}

fn no_temporaries(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// Whether this process may mount file systems (root in a privileged container).
fn mount(args: &[&str]) -> bool {
    Command::new("mount")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn umount(dir: &Path) {
    let _ = Command::new("umount").arg(dir).output();
}

#[test]
fn a_read_only_folder_is_exit_2_and_the_model_is_untouched() {
    let (dir, model) = copy_fixture("lower_opset.op24.onnx");
    let original = std::fs::read(&model).unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    // A read-only mount when this process may mount (root ignores permission bits), else a
    // folder without write permission.
    let mounted = mount(&[
        "-t",
        "tmpfs",
        "-o",
        "size=1m",
        "tmpfs",
        ro.to_str().unwrap(),
    ]);
    std::fs::copy(&model, ro.join("m.onnx")).unwrap();
    if mounted {
        assert!(mount(&["-o", "remount,ro", ro.to_str().unwrap()]));
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let run = bin(&ro, &["--ort", "1.24.4", "--fix", "m.onnx"]);
    let after = std::fs::read(ro.join("m.onnx")).unwrap();
    no_temporaries(&ro);
    if mounted {
        umount(&ro);
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("cannot write the fixed model"),
        "{}",
        run.stderr
    );
    assert_eq!(after, original);
}

#[test]
fn a_full_disk_is_exit_2_and_the_model_is_untouched() {
    // Real: a tmpfs that holds the model but not a second copy of it. Else: a writer that fails
    // half-way (the same code path, through `write_atomic_with`).
    let src = support::repo().join("examples/gemma4-decoder.op24.onnx");
    let original = std::fs::read(&src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let size = format!("size={}k", original.len() / 1024 + 64);
    if mount(&["-t", "tmpfs", "-o", &size, "tmpfs", small.to_str().unwrap()]) {
        std::fs::copy(&src, small.join("m.onnx")).unwrap();
        let run = bin(&small, &["--ort", "1.24.4", "--fix", "m.onnx"]);
        let after = std::fs::read(small.join("m.onnx")).unwrap();
        no_temporaries(&small);
        umount(&small);
        assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("cannot write the fixed model"),
            "{}",
            run.stderr
        );
        assert_eq!(after, original);
    } else {
        eprintln!("cannot mount a tmpfs here: the failing writer stands in for a full disk");
        struct Full;
        impl onnx_lint::fix::write::Sink for Full {
            fn write_all(&mut self, f: &mut std::fs::File, b: &[u8]) -> std::io::Result<()> {
                use std::io::Write;
                f.write_all(&b[..b.len() / 3])?;
                Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "no space left on device",
                ))
            }
        }
        let target = small.join("m.onnx");
        std::fs::copy(&src, &target).unwrap();
        let r = onnx_lint::fix::write::write_atomic_with(&target, b"fixed", None, &mut Full);
        assert!(r.is_err());
        assert_eq!(std::fs::read(&target).unwrap(), original);
        no_temporaries(&small);
    }
}

/// A model whose weights live in `weights.bin`.
fn external_model(dir: &Path, with_file: bool) -> PathBuf {
    let mut m = ModelProto::decode(
        std::fs::read(fixtures().join("lower_opset.op24.onnx"))
            .unwrap()
            .as_slice(),
    )
    .unwrap();
    let g = m.graph.as_mut().unwrap();
    let w = g.initializer.iter_mut().find(|t| t.name() == "wq").unwrap();
    let data = w.raw_data.take().unwrap();
    *w = support::external_tensor("wq", &w.dims, "weights.bin", 0, Some(data.len() as u64));
    if with_file {
        std::fs::write(dir.join("weights.bin"), &data).unwrap();
    }
    support::write(dir, "m.onnx", &m)
}

#[test]
fn missing_external_data_is_exit_2_and_the_model_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = external_model(dir.path(), false);
    let original = std::fs::read(&path).unwrap();
    let run = bin(dir.path(), &["--ort", "1.24.4", "--fix", "m.onnx"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("not fixed"), "{}", run.stderr);
    assert_eq!(std::fs::read(&path).unwrap(), original);
    no_temporaries(dir.path());
}

#[test]
fn external_data_is_never_rewritten_and_stays_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = external_model(dir.path(), true);
    let weights = std::fs::read(dir.path().join("weights.bin")).unwrap();
    let mtime = std::fs::metadata(dir.path().join("weights.bin"))
        .unwrap()
        .modified()
        .unwrap();
    // Elsewhere, the relative location would dangle: refused.
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let elsewhere = bin(
        dir.path(),
        &["--ort", "1.24.4", "--fix", "-o", "out/m.onnx", "m.onnx"],
    );
    assert_eq!(elsewhere.code, 2, "{}", elsewhere.stderr);
    assert!(
        elsewhere.stderr.contains("external data"),
        "{}",
        elsewhere.stderr
    );
    assert!(!dir.path().join("out/m.onnx").exists());
    let run = bin(dir.path(), &["--ort", "1.24.4", "--fix", "m.onnx"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("3 → 0 copies"), "{}", run.stdout);
    assert_eq!(
        std::fs::read(dir.path().join("weights.bin")).unwrap(),
        weights
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("weights.bin"))
            .unwrap()
            .modified()
            .unwrap(),
        mtime
    );
    let m = onnx_lint::model::load(&path).unwrap();
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    assert_eq!(m.external.len(), 1);
    assert_eq!(m.opset("ai.onnx"), Some(23));
}

#[test]
fn bad_input_and_bad_flags_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.onnx"), b"\x0a\x05abc").unwrap();
    let run = bin(dir.path(), &["--fix", "junk.onnx"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        std::fs::read(dir.path().join("junk.onnx")).unwrap(),
        b"\x0a\x05abc"
    );
    std::fs::copy(
        fixtures().join("lower_opset.op24.onnx"),
        dir.path().join("a.onnx"),
    )
    .unwrap();
    std::fs::copy(
        fixtures().join("shape_chain.op17.onnx"),
        dir.path().join("b.onnx"),
    )
    .unwrap();
    let two = bin(dir.path(), &["--fix", "-o", "x.onnx", "a.onnx", "b.onnx"]);
    assert_eq!(two.code, 2);
    assert!(two.stderr.contains("one model"), "{}", two.stderr);
    let no_fix = bin(dir.path(), &["--unsafe-fixes", "a.onnx"]);
    assert_eq!(no_fix.code, 2);
}

// ---------------------------------------------------------------------------------------------
// Cargo workspace and pre-commit

#[test]
fn in_a_cargo_workspace_fix_fixes_the_configured_models() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
         [package.metadata.onnx-lint]\nmodels = [\"models/*.onnx\"]\nort = \"1.24.4\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "").unwrap();
    std::fs::create_dir_all(root.join("models")).unwrap();
    std::fs::copy(
        fixtures().join("lower_opset.op24.onnx"),
        root.join("models/block.onnx"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
        .args(["onnx-lint", "--fix"])
        .current_dir(root)
        .env("CARGO", env!("CARGO"))
        .env("NO_COLOR", "1")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("models/block.onnx: applied 1 fix: 3 → 0 copies"),
        "{stdout}"
    );
    let m = onnx_lint::model::load(&root.join("models/block.onnx")).unwrap();
    assert_eq!(m.opset("ai.onnx"), Some(23));
}

#[test]
fn the_pre_commit_fix_hook_fails_when_it_changed_files_then_passes() {
    let text = std::fs::read_to_string(support::repo().join(".pre-commit-hooks.yaml")).unwrap();
    let hooks: Value = serde_norway::from_str(&text).unwrap();
    let hook = hooks
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "onnx-lint-fix")
        .expect("hook onnx-lint-fix");
    assert_eq!(hook["pass_filenames"], true);
    let (dir, _) = copy_fixture("lower_opset.op24.onnx");
    let run = || {
        let mut words = hook["entry"].as_str().unwrap().split_whitespace();
        let program = words.next().unwrap();
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
            .parent()
            .unwrap();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new(program)
            .args(words)
            .args(["--ort", "1.24.4", "lower_opset.op24.onnx"])
            .current_dir(dir.path())
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        out.status.code()
    };
    let before = std::fs::read(dir.path().join("lower_opset.op24.onnx")).unwrap();
    assert_eq!(run(), Some(1), "files changed: the hook fails");
    let after = std::fs::read(dir.path().join("lower_opset.op24.onnx")).unwrap();
    assert_ne!(before, after);
    assert_eq!(run(), Some(0), "nothing left to fix: the hook passes");
    assert_eq!(
        std::fs::read(dir.path().join("lower_opset.op24.onnx")).unwrap(),
        after
    );
}

// ---------------------------------------------------------------------------------------------
// The opset-lowering analysis: what each node uses

fn lowering(fixture: &str) -> onnx_lint::analysis::opset_lowering::Lowering {
    let m = onnx_lint::model::load(&fixtures().join(fixture)).unwrap();
    let table = tables::resolve("1.24.4").unwrap().table();
    onnx_lint::analysis::opset_lowering::analyse(&m, table, None, "ai.onnx", 23)
}

/// Attention-24 added a seventh input: a node passing six means the same under Attention-23.
#[test]
fn lowering_compares_the_inputs_a_node_passes_not_whole_schemas() {
    use onnx_lint::analysis::opset_lowering::Verdict;
    assert_eq!(
        lowering("attention_six_inputs.op24.onnxtxt").model,
        Verdict::Safe
    );
    let seven = lowering("attention_seven_inputs.op24.onnxtxt").model;
    assert_eq!(
        seven,
        Verdict::Breaks("`attn` (Attention) uses input 6, which Attention-23 does not have".into())
    );
    // The fixture block: the Cast after the local function call has an input type only the
    // placer's session knows (it inlines the function); given it, every node and the function
    // lower.
    let alone = lowering("lower_opset.op24.onnx");
    assert!(matches!(alone.model, Verdict::Unproven(_)), "{alone:?}");
    let m = onnx_lint::model::load(&fixtures().join("lower_opset.op24.onnx")).unwrap();
    let table = tables::resolve("1.24.4").unwrap().table();
    let options = Options {
        eps: vec![Ep::Cuda, Ep::Cpu],
        level: OptLevel::All,
        ..Default::default()
    };
    let placed = placer::place(&m, table, &options);
    let block = onnx_lint::analysis::opset_lowering::analyse(
        &m,
        table,
        Some(&placed.session),
        "ai.onnx",
        23,
    );
    assert!(block.all_safe(), "{block:?}");
    assert_eq!(block.functions.len(), 1);
    // The fixer checks every opset edit again, whoever proposed it.
    let lower = |functions| Fix::SetOpsetImport {
        domain: "".into(),
        from: 24,
        to: 23,
        functions,
        safety: FixSafety::Safe,
    };
    let verdict = |fixture: &str, fix: &Fix| {
        let m = onnx_lint::model::load(&fixtures().join(fixture)).unwrap();
        let placed = placer::place(&m, table, &options);
        onnx_lint::analysis::opset_lowering::verdict_of(&m, table, Some(&placed.session), fix)
    };
    assert_eq!(
        verdict("attention_six_inputs.op24.onnxtxt", &lower(true)),
        Verdict::Safe
    );
    assert!(matches!(
        verdict("attention_seven_inputs.op24.onnxtxt", &lower(false)),
        Verdict::Breaks(_)
    ));
    assert_eq!(
        verdict("lower_opset.op24.onnx", &lower(true)),
        Verdict::Safe
    );
    let function_to = |to| Fix::SetFunctionOpsetImport {
        function_domain: "local".into(),
        function: "ReshapeSquare".into(),
        domain: "ai.onnx".into(),
        from: 24,
        to,
        safety: FixSafety::Safe,
    };
    // At 17 the body's Reshape-14, Mul-14 and Cast-13 take what it passes; at 4, Reshape-1 takes
    // its shape as an attribute, not an input.
    assert_eq!(
        verdict("function_opset.op23.onnx", &function_to(17)),
        Verdict::Safe
    );
    assert_eq!(
        verdict("function_opset.op23.onnx", &function_to(4)),
        Verdict::Breaks(
            "in function `ReshapeSquare`: a Reshape node uses input 1, which Reshape-1 does not have"
                .into()
        )
    );
}

/// Only nodes left without any consumer go: a `Shape` whose output is also a graph output stays,
/// and a fix whose node is gone or ambiguous is skipped with the reason, the bytes unchanged.
#[test]
fn replacement_deletes_only_what_nothing_reads_and_skips_what_it_cannot_find() {
    let text = r#"
<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float[N, 4, 8] x) => (float[N, 32] y, int64[3] s)
<
  int64[1] zero = {0},
  int64[1] rest = {32}
>
{
  [shape] s = Shape (x)
  [take] b = Gather <axis = 0> (s, zero)
  [cat] target = Concat <axis = 0> (b, rest)
  [reshape] y = Reshape (x, target)
}
"#;
    let proto = onnx_lint::model::text::parse_model(text).unwrap();
    let bytes = proto.encode_to_vec();
    let model = onnx_lint::model::Model::from_proto(Path::new("m.onnx"), 0, proto).unwrap();
    let fix = |node: &str| Fix::ReplaceInputWithConstant {
        graph: "g".into(),
        node: node.into(),
        input: 1,
        values: vec![0, 32],
        safety: FixSafety::Safe,
    };
    let r = onnx_lint::fix::apply(&bytes, &model, &[fix("reshape")]).unwrap();
    assert_eq!(r.removed_nodes, ["take", "cat"]);
    let after = ModelProto::decode(r.bytes.as_slice()).unwrap();
    let g = after.graph.unwrap();
    assert_eq!(
        g.node.iter().map(|n| n.name()).collect::<Vec<_>>(),
        ["shape", "reshape"]
    );
    assert_eq!(g.node[1].input, ["x", "target_const"]);
    let missing = onnx_lint::fix::apply(&bytes, &model, &[fix("nope")]).unwrap();
    assert!(missing.applied.is_empty());
    assert!(
        missing.skipped[0].1.contains("no node"),
        "{:?}",
        missing.skipped
    );
    assert_eq!(missing.bytes, bytes);
    let stale = Fix::SetOpsetImport {
        domain: "ai.onnx".into(),
        from: 24,
        to: 23,
        functions: false,
        safety: FixSafety::Safe,
    };
    let r = onnx_lint::fix::apply(&bytes, &model, &[stale]).unwrap();
    assert!(
        r.skipped[0].1.contains("imports ai.onnx 17, not 24"),
        "{:?}",
        r.skipped
    );
    assert_eq!(r.bytes, bytes);
}

/// A Reshape inside an `If` branch: the constant becomes an initializer of that branch, the chain
/// inside the branch goes, and everything outside it is copied as it was.
#[test]
fn replacement_inside_a_subgraph_edits_only_that_subgraph() {
    let text = r#"
<
  ir_version: 9,
  opset_import: ["" : 19]
>
g (bool cond, float[N, 4, 8] x) => (float[N, 32] y)
{
  [branch] y = If (cond) <then_branch: graph = then_g () => (float[N, 32] t) {
    [shape] s = Shape (x)
    [take] b = Slice (s, zero, one)
    [cat] target = Concat <axis = 0> (b, rest)
    [reshape] t = Reshape (x, target)
  }, else_branch: graph = else_g () => (float[N, 32] e) {
    [flat] e = Flatten <axis = 1> (x)
  }>
}
"#;
    let mut proto = onnx_lint::model::text::parse_model(text).unwrap();
    // The branch's constants, as initializers of the branch.
    {
        use onnx_lint::model::proto::{TensorProto, tensor_proto};
        let then_g = proto.graph.as_mut().unwrap().node[0].attribute[0]
            .g
            .as_mut()
            .unwrap();
        for (name, v) in [("zero", 0i64), ("one", 1), ("rest", 32)] {
            then_g.initializer.push(TensorProto {
                name: Some(name.into()),
                dims: vec![1],
                data_type: Some(tensor_proto::DataType::Int64 as i32),
                int64_data: vec![v],
                ..Default::default()
            });
        }
    }
    let bytes = proto.encode_to_vec();
    let model = onnx_lint::model::Model::from_proto(Path::new("m.onnx"), 0, proto).unwrap();
    let fix = Fix::ReplaceInputWithConstant {
        graph: "then_g".into(),
        node: "reshape".into(),
        input: 1,
        values: vec![0, 32],
        safety: FixSafety::Safe,
    };
    let r = onnx_lint::fix::apply(&bytes, &model, &[fix]).unwrap();
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    assert_eq!(r.removed_nodes, ["shape", "take", "cat"]);
    let after = ModelProto::decode(r.bytes.as_slice()).unwrap();
    let if_node = &after.graph.as_ref().unwrap().node[0];
    let then_g = if_node.attribute[0].g.as_ref().unwrap();
    assert_eq!(
        then_g.node.iter().map(|n| n.name()).collect::<Vec<_>>(),
        ["reshape"]
    );
    assert_eq!(then_g.node[0].input, ["x", "target_const"]);
    assert_eq!(then_g.initializer.last().unwrap().name(), "target_const");
    let before = ModelProto::decode(bytes.as_slice()).unwrap();
    assert_eq!(
        if_node.attribute[1],
        before.graph.as_ref().unwrap().node[0].attribute[1],
        "the else branch is untouched"
    );
    onnx_lint::model::Model::from_proto(Path::new("m.onnx"), 0, after).unwrap();
}

/// A fix that could not be proved safe (a function nobody calls: its body's types are unknown) is
/// shown and left alone by `--fix`, and applied with `--unsafe-fixes`.
#[test]
fn unsafe_fixes_are_only_shown_unless_asked_for() {
    let mut m = ModelProto::decode(
        std::fs::read(fixtures().join("function_opset.op23.onnx"))
            .unwrap()
            .as_slice(),
    )
    .unwrap();
    let mut unused = m.functions[0].clone();
    unused.name = Some("Unused".into());
    m.functions.push(unused);
    let dir = tempfile::tempdir().unwrap();
    support::write(dir.path(), "m.onnx", &m);
    let args = [
        "--ort", "1.24.4", "--warn", "OL003", "--fix", "--format", "json", "m.onnx",
    ];
    let safe = bin(dir.path(), &args);
    assert_eq!(safe.code, 0, "{}", safe.stderr);
    let v: Value = serde_json::from_str(&safe.stdout).unwrap();
    let fix = &v[0]["fix"];
    assert_eq!(fix["applied"].as_array().unwrap().len(), 1);
    assert_eq!(fix["applied"][0]["function"], "ReshapeSquare");
    assert_eq!(fix["unsafe_not_applied"][0]["function"], "Unused");
    assert_eq!(fix["unsafe_not_applied"][0]["safety"], "unsafe");
    let mut with_unsafe = args.to_vec();
    with_unsafe.insert(0, "--unsafe-fixes");
    let both = bin(dir.path(), &with_unsafe);
    assert_eq!(both.code, 0, "{}", both.stderr);
    let v: Value = serde_json::from_str(&both.stdout).unwrap();
    assert_eq!(v[0]["fix"]["applied"][0]["function"], "Unused");
    assert!(
        v[0]["fix"]["unsafe_not_applied"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let fixed =
        ModelProto::decode(std::fs::read(dir.path().join("m.onnx")).unwrap().as_slice()).unwrap();
    assert!(
        fixed
            .functions
            .iter()
            .all(|f| f.opset_import[0].version() == 23)
    );
}

/// The issue's TorchScript criterion: `--fix` removes at least half of the OL301 findings of the
/// TorchScript decoders in the public corpus, adds no copy, and keeps CPU outputs bit-identical.
/// Their OL301 findings cost no copy at 1.24.4, so the opt-in `zero-cost` group is enabled.
#[test]
fn fixing_torchscript_decoders_halves_their_shape_chains() {
    let Some(models) = corpus() else {
        cannot_run("the public corpus (tests/fixtures/corpus/models) is not here");
        return;
    };
    let mut lines = Vec::new();
    for name in ["bert.ts.op17.onnx", "gpt2.ts.op17.onnx", "opt.ts.op17.onnx"] {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join(name);
        std::fs::write(
            &local,
            std::fs::read(models.join("torch").join(name)).unwrap(),
        )
        .unwrap();
        let args = [
            "--ort",
            "1.24.4",
            "--warn",
            "OL301",
            "--warn",
            "zero-cost",
            "--no-cache",
            "--format",
            "json",
        ];
        let before = bin(dir.path(), &[&args[..], &[name]].concat());
        let before: Value = serde_json::from_str(&before.stdout).unwrap();
        // Lint JSON: one record, or an array of one (as `main` prints it).
        let before = match before {
            Value::Array(a) => Value::Array(a),
            one => Value::Array(vec![one]),
        };
        let ol301 = |v: &Value| {
            v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["code"] == "OL301")
                .count()
        };
        let fixable = before[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "OL301" && !f["fix"].is_null())
            .count();
        assert!(fixable > 0, "{name}: no OL301 finding carries a `fix`");
        let run = bin(dir.path(), &[&args[..], &["--fix", name]].concat());
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let after: Value = serde_json::from_str(&run.stdout).unwrap();
        let fix = &after[0]["fix"];
        assert!(
            fix["after"]["copies"].as_u64() <= fix["before"]["copies"].as_u64(),
            "{name}: the fixes added copies: {}",
            fix["change"]
        );
        let (n_before, n_after) = (ol301(&before[0]), ol301(&after[0]));
        assert!(
            n_after * 2 <= n_before,
            "{name}: OL301 {n_before} → {n_after}, less than half removed"
        );
        assert_same_outputs(&models.join("torch").join(name), &local);
        lines.push(format!(
            "{name}: OL301 {n_before} → {n_after} ({fixable} carried a fix); {}",
            fix["change"]
        ));
    }
    support::report(&lines.join("\n"));
}
