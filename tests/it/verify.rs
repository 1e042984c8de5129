//! `verify`: ORT's log read back (on logs recorded from real ORT releases), the prediction diff on
//! that real output, the command without ORT, against a CPU `onnxruntime` from PyPI, and (ignored
//! by default) on a GPU with `onnxruntime-gpu`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use onnx_lint::verify::diff::{Predicted, Real, compare};
use onnx_lint::verify::log::{PlacementReport, parse};
use serde_json::Value;

use crate::support::repo;

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/verify")
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
}

/// Every recorded log reads back exactly as the oracle's own parser (`ortstub.py parse_log`) read
/// it: placements, single-provider summaries, copies per graph, copy lines, CPU-preferred nodes.
#[test]
fn recorded_logs_parse_like_the_oracle() {
    let mut seen = 0;
    for e in std::fs::read_dir(fixtures().join("logs")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "log") {
            continue;
        }
        seen += 1;
        let log = parse(&std::fs::read_to_string(&path).unwrap());
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(path.with_extension("expected.json")).unwrap(),
        )
        .unwrap();
        let name = path.display().to_string();

        let mut placement = BTreeMap::new();
        let mut all_nodes_on: BTreeMap<String, usize> = BTreeMap::new();
        for r in &log.reports {
            match r {
                PlacementReport::All { ep, count } => {
                    *all_nodes_on.entry(ep.clone()).or_default() += count
                }
                PlacementReport::Split(blocks) => {
                    for b in blocks {
                        assert_eq!(b.nodes.len(), b.declared, "{name}: {} block", b.ep);
                        for (_, n) in &b.nodes {
                            placement.insert(n.clone(), Value::String(b.ep.clone()));
                        }
                    }
                }
            }
        }
        assert_eq!(
            Value::Object(placement.into_iter().collect()),
            expected["placement"],
            "{name}"
        );
        let all = if all_nodes_on.is_empty() {
            Value::Null
        } else {
            serde_json::to_value(&all_nodes_on).unwrap()
        };
        assert_eq!(all, expected["all_nodes_on"], "{name}");
        assert_eq!(
            serde_json::to_value(log.memcpy_map()).unwrap(),
            expected["memcpy"],
            "{name}"
        );
        assert_eq!(
            serde_json::to_value(&log.copies).unwrap(),
            expected["copies"],
            "{name}"
        );
        assert_eq!(
            serde_json::to_value(&log.cpu_preferred).unwrap(),
            expected["cpu_preferred"],
            "{name}"
        );
        assert_eq!(
            log.no_cuda_kernel.len(),
            expected["no_cuda_kernel"].as_array().unwrap().len(),
            "{name}"
        );
    }
    assert!(seen >= 5, "recorded logs missing");
}

fn predicted(model: &str, ort: &str, level: OptLevel) -> Predicted {
    let m = onnx_lint::model::load(&fixtures().join("models").join(model)).unwrap();
    let table = tables::resolve(ort).unwrap().table();
    let p = placer::place(
        &m,
        table,
        &Options {
            eps: vec![Ep::Cuda, Ep::Cpu],
            level,
            ..Default::default()
        },
    );
    Predicted::from_placement(&p)
}

fn real(log: &str) -> Real {
    Real {
        session: Ok(()),
        log: parse(&std::fs::read_to_string(fixtures().join("logs").join(log)).unwrap()),
    }
}

/// The diff on real ORT output at level `disable`, where the simulator agrees with ORT: GPT-2
/// (TorchScript export: shape chains on CPU, 3 copies on 1.31.1) and the Gemma 4 decoder at
/// opset 24 on 1.24.4 (the Reshape registration gap: 42 copies) and 1.31.1 (none).
#[test]
fn diff_agrees_on_recorded_real_output() {
    for (model, ort, log) in [
        (
            "gpt2.ts.op17.onnx",
            "1.31.1",
            "gpt2.ts.op17.1.31.1.disable.log",
        ),
        (
            "mobius.gemma4.cuda.f16.model.op24.onnx",
            "1.24.4",
            "mobius.gemma4.cuda.f16.model.op24.1.24.4.disable.log",
        ),
        (
            "mobius.gemma4.cuda.f16.model.op24.onnx",
            "1.31.1",
            "mobius.gemma4.cuda.f16.model.op24.1.31.1.disable.log",
        ),
    ] {
        let d = compare(&predicted(model, ort, OptLevel::Disable), &real(log));
        assert!(d.agree, "{model} on {ort}: {d:#?}");
    }
}

/// The same real output against a prediction for the wrong release: the diff names the nodes
/// and the copies that differ.
#[test]
fn diff_names_what_differs() {
    let d = compare(
        &predicted(
            "mobius.gemma4.cuda.f16.model.op24.onnx",
            "1.31.1",
            OptLevel::Disable,
        ),
        &real("mobius.gemma4.cuda.f16.model.op24.1.24.4.disable.log"),
    );
    assert!(!d.agree);
    assert!(d.nodes_differ.iter().any(|n| n.op == "Reshape"
        && n.predicted == "CUDAExecutionProvider"
        && n.real == "CPUExecutionProvider"));
    assert_eq!(d.copies_real_only.len(), 42);
    assert!(d.copies_predicted_only.is_empty());
    assert!(!d.graphs[0].agree);
}

/// With no ORT anywhere: a plain error, exit 2, no panic.
#[test]
fn without_ort_exit_2_and_say_nothing_was_confirmed() {
    let out = bin()
        .args(["verify"])
        .arg(fixtures().join("models/gpt2.ts.op17.onnx"))
        .args(["--ort-dylib", "/nonexistent/libonnxruntime.so.1.31.1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing was confirmed"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The `capi` folder of a pip-installed `onnxruntime` (CPU or GPU build) and its version, if the
/// tests' Python (`support::python`: `ONNX_LINT_PYTHON`, the clone's `.venv`, or `python3`) has
/// one; `Err` says why not.
#[cfg(feature = "live")]
fn python_ort() -> Result<(PathBuf, String), String> {
    let python = crate::support::python();
    let out = Command::new(&python)
        .args([
            "-c",
            "import onnxruntime,os;print(os.path.dirname(onnxruntime.__file__));print(onnxruntime.__version__)",
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} has no onnxruntime (.ci/run installs the pinned CPU build into .venv; or set \
             ONNX_LINT_PYTHON): {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    let (Some(dir), Some(version)) = (lines.next(), lines.next()) else {
        return Err(format!(
            "unexpected output from {}: {text}",
            python.display()
        ));
    };
    Ok((
        PathBuf::from(dir.trim()).join("capi"),
        version.trim().to_string(),
    ))
}

/// The record of the one model verified (`verify --format json` prints an array).
#[cfg(feature = "live")]
fn json(out: &std::process::Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let records = v.as_array().expect("verify --format json prints an array");
    assert_eq!(records.len(), 1, "{v:#}");
    records[0].clone()
}

/// Against the CPU `onnxruntime` from PyPI (`.ci/run` installs it): the model loads, every node
/// has a CPU kernel as predicted at level `disable`, and the report says CUDA was not confirmed.
#[test]
#[cfg(feature = "live")]
fn against_a_cpu_onnxruntime_from_pypi() {
    let what = "verify against a CPU onnxruntime from PyPI";
    let (capi, version) = match python_ort() {
        Ok(found) => found,
        Err(why) => return crate::support::not_run(what, &why),
    };
    if capi.join("libonnxruntime_providers_cuda.so").exists() {
        let why = format!("the Python's onnxruntime {version} is a GPU build; see verify_on_gpu");
        return crate::support::not_run(what, &why);
    }
    if onnx_lint::verify::simulated_release(&version).is_none_or(|(_, exact)| !exact) {
        eprintln!("note: onnxruntime {version} has no bundled table; the nearest is simulated");
    }
    let model = fixtures().join("models/gpt2.ts.op17.onnx");
    // Found through the Python (`ONNX_LINT_PYTHON`), as a user's environment would.
    let python = crate::support::python();
    let out = bin()
        .env_remove("ORT_DYLIB_PATH")
        .env("ONNX_LINT_PYTHON", &python)
        .args(["verify", "--opt-level", "disable"])
        .arg(&model)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    assert!(text.contains("result: AGREE"), "{text}");
    assert!(text.contains("CUDA placement was NOT confirmed"), "{text}");
    assert!(text.contains("no CUDA execution provider"), "{text}");
    // What a CPU-only session confirms: the node names too, from the session graph ORT saved.
    assert!(text.contains("confirmed: the session is created"), "{text}");
    assert!(
        text.contains("on CPUExecutionProvider, by name (the session graph ORT saved)"),
        "{text}"
    );
    assert!(!text.contains("not confirmed: the node names"), "{text}");
    assert!(!err.contains("panicked"), "{err}");

    // At level `all` the names carry the CPU-only fusions, the inserted Casts and the NCHWc
    // layout nodes, and they agree (an fp16 Whisper encoder: Casts, FusedInitializers, Gelu).
    let fp16 = crate::support::repo().join("tests/fixtures/realworld/fp16.whisper-enc.op17.onnx");
    let out = bin()
        .env_remove("ORT_DYLIB_PATH")
        .env("ONNX_LINT_PYTHON", &python)
        .args(["verify", "--ep", "cpu", "--opt-level", "all"])
        .arg(&fp16)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("on CPUExecutionProvider, by name (the session graph ORT saved)"),
        "{text}"
    );

    let out = bin()
        .env_remove("ORT_DYLIB_PATH")
        .env("ONNX_LINT_PYTHON", &python)
        .args(["verify", "--opt-level", "disable", "--format", "json"])
        .arg(&model)
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(v["cuda_placement"], "not checked");
    assert_eq!(v["agree"], true);
    assert_eq!(v["providers"], serde_json::json!(["CPUExecutionProvider"]));
    assert_eq!(v["ort_library"]["version"], version.as_str());
    assert_eq!(v["real"]["session"], "ok");
    assert!(
        v["confirmed"].as_array().is_some_and(|c| c.iter().any(|l| l
            .as_str()
            .is_some_and(|l| l.ends_with("by name (the session graph ORT saved)")))),
        "{v:#}"
    );

    // --require-cuda: nothing on CUDA was checked, so exit 2.
    let out = bin()
        .env_remove("ORT_DYLIB_PATH")
        .env("ONNX_LINT_PYTHON", &python)
        .args(["verify", "--opt-level", "disable", "--require-cuda"])
        .arg(&model)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// On a machine with a CUDA device and `onnxruntime-gpu` (its library in `ORT_DYLIB_PATH`, or
/// python3's package): CUDA placement confirmed at level `disable`.
/// `cargo test -- --ignored verify_on_gpu`
#[test]
#[cfg(feature = "live")]
#[ignore = "needs a CUDA device and onnxruntime-gpu"]
fn verify_on_gpu() {
    let lib = std::env::var("ORT_DYLIB_PATH")
        .ok()
        .map(PathBuf::from)
        .or_else(|| python_ort().ok().map(|(d, _)| d))
        .expect("set ORT_DYLIB_PATH to onnxruntime-gpu's libonnxruntime.so.*");
    for model in [
        "gpt2.ts.op17.onnx",
        "mobius.gemma4.cuda.f16.model.op24.onnx",
    ] {
        let out = bin()
            .args([
                "verify",
                "--opt-level",
                "disable",
                "--require-cuda",
                "--format",
                "json",
            ])
            .arg(fixtures().join("models").join(model))
            .arg("--ort-dylib")
            .arg(&lib)
            .output()
            .unwrap();
        let v = json(&out);
        assert_eq!(out.status.code(), Some(0), "{model}: {v:#}");
        assert_eq!(v["cuda_placement"], "confirmed", "{model}");
    }
}

/// The transcript of `verify` on every public corpus model with `onnxruntime-gpu` 1.31.1 on an
/// H200 (`gpu-1.31.1/`, see its README): every record is a CUDA session on the device, and at
/// level `disable` every one agrees.
#[test]
fn gpu_transcript_fixture() {
    let path = fixtures().join("gpu-1.31.1/verify.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} (recorded by gpu.sh): {e}", path.display()));
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        n += 1;
        assert_ne!(v["cuda_placement"], "not checked", "{}", v["model"]);
        if v["level"] == "disable" {
            assert_eq!(v["agree"], true, "{} at disable", v["model"]);
        }
    }
    assert!(n > 0);
}
