//! The binary as users run it: both spellings, formats, exit codes.

use std::process::Command;

use crate::support::{self, run_in};

#[test]
fn runs_as_cargo_subcommand_and_directly() {
    let repo = support::repo();
    let via_cargo = run_in(
        &repo,
        &["examples/gemma4-decoder.op24.onnx", "--ort", "1.24.4"],
    );
    assert_eq!(via_cargo.code, 0, "{}", via_cargo.stderr);
    let direct = Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
        .args(["examples/gemma4-decoder.op24.onnx", "--ort", "1.24.4"])
        .env("NO_COLOR", "1")
        .env("ONNX_LINT_WIDTH", "100")
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(direct.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&direct.stdout), via_cargo.stdout);
    insta::assert_snapshot!(via_cargo.stdout);
}

#[test]
fn json_summary_of_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    support::write(dir.path(), "a.onnx", &support::relu_model());
    support::write(&dir.path().join("sub"), "b.onnx", &support::relu_model());
    std::fs::write(dir.path().join("notes.txt"), "not a model").unwrap();
    let run = run_in(dir.path(), &[".", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let models = v.as_array().unwrap();
    assert_eq!(models.len(), 2);
    assert_eq!(models[0]["model"], "./a.onnx");
    assert_eq!(models[1]["model"], "./sub/b.onnx");
    assert_eq!(models[0]["summary"]["nodes"], 1);
    assert_eq!(models[0]["summary"]["opsets"]["ai.onnx"], 17);
    assert_eq!(models[0]["session"], "ok");
    assert_eq!(models[0]["findings"].as_array().unwrap().len(), 0);
}

#[test]
fn json_reports_load_errors_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    support::write(dir.path(), "good.onnx", &support::relu_model());
    std::fs::write(dir.path().join("bad.onnx"), b"\xff\xff\xff").unwrap();
    let run = run_in(dir.path(), &["good.onnx", "bad.onnx", "--format", "json"]);
    assert_eq!(run.code, 2);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v[0]["session"], "ok");
    assert_eq!(v[1]["error"]["code"], "onnx_lint::load::not_protobuf");
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run_in(dir.path(), &["--no-such-flag"]).code, 2);
    assert_eq!(run_in(dir.path(), &["--ep", "tpu", "x.onnx"]).code, 2);
    let none = run_in(dir.path(), &[]);
    assert_eq!(none.code, 2);
    assert!(none.stderr.contains("no model given"), "{}", none.stderr);
    let empty = run_in(dir.path(), &["."]);
    assert_eq!(empty.code, 2);
    assert!(
        empty.stderr.contains("no `*.onnx` files"),
        "{}",
        empty.stderr
    );
}

#[test]
fn help_lists_every_command() {
    let run = run_in(&support::repo(), &["--help"]);
    assert_eq!(run.code, 0);
    for command in ["place", "explain", "tables", "verify"] {
        assert!(
            run.stdout.contains(command),
            "{command} missing from --help"
        );
    }
    insta::assert_snapshot!(run.stdout);
}
