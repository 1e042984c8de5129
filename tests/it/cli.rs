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

const GEMMA: &str = "examples/gemma4-decoder.op24.onnx";

/// A temporary folder (not a Cargo project) holding `relu.onnx`.
fn relu_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    support::write(dir.path(), "relu.onnx", &support::relu_model());
    dir
}

/// The binary in `dir` with `env` (colour variables cleared unless given).
fn run_env(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> support::Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"));
    cmd.args(args)
        .current_dir(dir)
        .env("ONNX_LINT_WIDTH", "100")
        .env_remove("GITHUB_STEP_SUMMARY");
    for k in ["NO_COLOR", "CLICOLOR_FORCE", "FORCE_COLOR"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    support::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(run: &support::Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}\nstdout: {}\nstderr: {}", run.stdout, run.stderr))
}

#[test]
fn the_release_note_names_the_release_and_why() {
    let dir = relu_dir();
    let newest = onnx_lint::tables::newest().version;
    let default = run_in(dir.path(), &["relu.onnx"]);
    assert_eq!(default.code, 0, "{}", default.stderr);
    assert!(
        default.stdout.starts_with(&format!(
            "note: ORT {newest}: the newest bundled release: no --ort"
        )),
        "{}",
        default.stdout
    );
    assert!(default.stdout.contains("pass --ort"), "{}", default.stdout);
    let flag = run_in(dir.path(), &["relu.onnx", "--ort", "1.24.4"]);
    assert!(
        flag.stdout.starts_with("note: ORT 1.24.4: --ort 1.24.4\n"),
        "{}",
        flag.stdout
    );
    std::fs::write(dir.path().join("onnx-lint.toml"), "ort = \"1.28\"\n").unwrap();
    let config = run_in(dir.path(), &["relu.onnx"]);
    assert!(
        config
            .stdout
            .starts_with("note: ORT 1.28.0: ort = \"1.28\" in onnx-lint.toml\n"),
        "{}",
        config.stdout
    );
    // Machine formats keep stdout clean: the note goes to stderr, JSON has `ort_reason`.
    let j = run_in(dir.path(), &["relu.onnx", "--format", "json"]);
    assert!(j.stderr.contains("note: ORT 1.28.0"), "{}", j.stderr);
    assert_eq!(
        json(&j)[0]["ort_reason"],
        "ort = \"1.28\" in onnx-lint.toml"
    );
}

#[test]
fn patch_releases_map_to_their_minor_table_with_a_note() {
    let dir = relu_dir();
    let run = run_in(
        dir.path(),
        &["relu.onnx", "--ort", "1.24.1", "--format", "json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(json(&run)[0]["ort"], "1.24.4");
    assert!(
        run.stderr.contains(
            "ORT 1.24.1 has no bundled table of its own: simulating the 1.24 kernel table (1.24.4)"
        ),
        "{}",
        run.stderr
    );
    std::fs::write(dir.path().join("onnx-lint.toml"), "ort = \"1.24.2\"\n").unwrap();
    let config = run_in(dir.path(), &["relu.onnx"]);
    assert_eq!(config.code, 0, "{}", config.stderr);
    assert!(
        config.stdout.contains("ORT 1.24.2 has no bundled table"),
        "{}",
        config.stdout
    );
    // A release of no bundled minor is still refused, with a suggestion.
    let wrong = run_in(dir.path(), &["relu.onnx", "--ort", "1.3"]);
    assert_eq!(wrong.code, 2);
    assert!(
        wrong.stderr.contains("unknown ORT release `1.3`"),
        "{}",
        wrong.stderr
    );
    assert!(
        wrong.stderr.contains("did you mean `1.31"),
        "{}",
        wrong.stderr
    );
}

#[test]
fn closing_summary_statistics_and_quiet() {
    let repo = support::repo();
    let dir = relu_dir();
    std::fs::copy(repo.join(GEMMA), dir.path().join("gemma.onnx")).unwrap();
    let all = run_in(dir.path(), &[".", "--ort", "1.24.4"]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let last = all.stdout.lines().last().unwrap();
    assert_eq!(
        last,
        "Found 0 errors and 47 warnings in 1 of 2 models; 19 nodes on CPU, 28 copies in all"
    );
    let stats = run_in(dir.path(), &[".", "--ort", "1.24.4", "--statistics"]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
    assert!(
        stats.stdout.contains("    28  OL201  memcpy"),
        "{}",
        stats.stdout
    );
    assert!(
        stats.stdout.contains("    19  OL101  registration-gap"),
        "{}",
        stats.stdout
    );
    assert!(
        !stats.stdout.contains("OL101(registration-gap)"),
        "no findings: {}",
        stats.stdout
    );
    let sj = run_in(
        dir.path(),
        &[".", "--ort", "1.24.4", "--statistics", "--format", "json"],
    );
    let rows = json(&sj);
    assert_eq!(rows[0]["code"], "OL201");
    assert_eq!(rows[0]["count"], 28);
    let quiet = run_in(dir.path(), &[".", "--ort", "1.24.4", "-q"]);
    assert_eq!(quiet.code, 0);
    assert!(quiet.stdout.contains("OL101(registration-gap)"));
    for absent in ["note:", "Found ", "relu.onnx: ir 8"] {
        assert!(!quiet.stdout.contains(absent), "{absent}: {}", quiet.stdout);
    }
    let both = run_in(dir.path(), &[".", "--statistics", "--format", "sarif"]);
    assert_eq!(both.code, 2);
}

#[test]
fn color_follows_the_flag_and_the_conventional_variables() {
    let dir = relu_dir();
    let esc = |r: &support::Run| r.stdout.contains('\u{1b}');
    let args = [
        "relu.onnx",
        "--ort",
        "1.24.4",
        "--allow",
        "all",
        "--warn",
        "cpu-preferred",
    ];
    // A model whose run has a finding, so that something is coloured: the gemma decoder.
    let repo = support::repo();
    let lint = |extra: &[&str], env: &[(&str, &str)]| {
        let mut a = vec![GEMMA, "--ort", "1.24.4", "--no-cache"];
        a.extend_from_slice(extra);
        run_env(&repo, &a, env)
    };
    assert!(!esc(&lint(&[], &[])), "not a terminal: no colour");
    assert!(esc(&lint(&["--color", "always"], &[("NO_COLOR", "1")])));
    assert!(!esc(&lint(&["--color", "never"], &[("FORCE_COLOR", "1")])));
    assert!(esc(&lint(&[], &[("CLICOLOR_FORCE", "1")])));
    assert!(esc(&lint(&[], &[("FORCE_COLOR", "1")])));
    assert!(!esc(&lint(&[], &[("FORCE_COLOR", "0")])));
    assert!(!esc(&lint(&[], &[("NO_COLOR", "1"), ("FORCE_COLOR", "1")])));
    assert_eq!(run_env(dir.path(), &args, &[]).code, 0);
    assert_eq!(
        run_env(dir.path(), &["relu.onnx", "--color", "sometimes"], &[]).code,
        2
    );
}

#[test]
fn output_format_alias_output_file_and_exit_zero() {
    let repo = support::repo();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let run = run_in(
        &repo,
        &[
            GEMMA,
            "--ort",
            "1.24.4",
            "--no-cache",
            "--output-format",
            "json",
            "-o",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "", "the report went to the file");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v[0]["summary"]["copies"], 28);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file left beside the report");
    // An unwritable destination is an error, exit 2.
    let bad = run_in(
        &repo,
        &[GEMMA, "--ort", "1.24.4", "-o", "/nonexistent/dir/r.txt"],
    );
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("cannot write the report"),
        "{}",
        bad.stderr
    );

    let deny = [
        GEMMA,
        "--ort",
        "1.24.4",
        "--no-cache",
        "--deny",
        "registration-gap",
    ];
    assert_eq!(run_in(&repo, &deny).code, 1);
    let mut zero = deny.to_vec();
    zero.push("--exit-zero");
    assert_eq!(run_in(&repo, &zero).code, 0);
    // Unreadable input still exits 2.
    std::fs::write(dir.path().join("bad.onnx"), b"\xff\xff").unwrap();
    assert_eq!(run_in(dir.path(), &["bad.onnx", "--exit-zero"]).code, 2);
}

#[test]
fn rules_are_listed_by_rules_and_by_explain_without_a_rule() {
    let repo = support::repo();
    let list = run_in(&repo, &["rules"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    for r in onnx_lint::rules::all() {
        assert!(
            list.stdout.contains(&format!("{}  {}", r.code, r.name)),
            "{}: {}",
            r.code,
            list.stdout
        );
    }
    assert_eq!(run_in(&repo, &["explain"]).stdout, list.stdout);
    let j = json(&run_in(&repo, &["rules", "--format", "json"]));
    assert_eq!(j.as_array().unwrap().len(), 11);
    assert_eq!(j[3]["code"], "OL101");
    assert_eq!(j[3]["default"], "warn");
}

#[test]
fn did_you_mean_for_rules_keys_and_releases() {
    let dir = relu_dir();
    let rule = run_in(dir.path(), &["relu.onnx", "--deny", "registration-gpa"]);
    assert_eq!(rule.code, 2);
    assert!(
        rule.stderr.contains("did you mean `registration-gap`?"),
        "{}",
        rule.stderr
    );
    let explain = run_in(dir.path(), &["explain", "memcopy"]);
    assert_eq!(explain.code, 2);
    assert!(
        explain.stderr.contains("did you mean `memcpy`?"),
        "{}",
        explain.stderr
    );
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.24\"\nopt_level = \"all\"\n[rules]\ncpu-fallbak = \"deny\"\n",
    )
    .unwrap();
    let config = run_in(dir.path(), &["relu.onnx"]);
    assert_eq!(config.code, 2);
    assert!(
        config.stderr.contains("did you mean `opt-level`?"),
        "{}",
        config.stderr
    );
    assert!(
        config.stderr.contains("did you mean `cpu-fallback`?"),
        "{}",
        config.stderr
    );
}

#[test]
fn every_configuration_and_flag_error_is_reported_at_once() {
    let dir = relu_dir();
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"9.9\"\nep = \"tpu\"\ncolour = true\n[rules]\nOL999 = \"deny\"\nmemcpy = \"loud\"\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["relu.onnx"]);
    assert_eq!(run.code, 2);
    for needle in [
        "unknown ORT release `9.9`",
        "unknown ep `tpu`",
        "unknown field `colour`",
        "unknown rule `OL999`",
        "unknown level `loud`",
    ] {
        assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
    }
    std::fs::remove_file(dir.path().join("onnx-lint.toml")).unwrap();
    let flags = run_in(
        dir.path(),
        &[
            "relu.onnx",
            "--deny",
            "OL998",
            "--warn",
            "nope",
            "--ort",
            "7.7",
        ],
    );
    assert_eq!(flags.code, 2);
    for needle in [
        "unknown rule `OL998`",
        "unknown rule `nope`",
        "unknown ORT release `7.7`",
    ] {
        assert!(flags.stderr.contains(needle), "{needle}: {}", flags.stderr);
    }
}

#[test]
fn deny_all_escalates_only_the_enabled_rules() {
    let repo = support::repo();
    let codes = |extra: &[&str]| {
        let mut a = vec![GEMMA, "--ort", "1.24.4", "--no-cache", "--format", "json"];
        a.extend_from_slice(extra);
        let run = run_in(&repo, &a);
        let v = json(&run);
        let mut c: Vec<(String, String)> = v[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["code"].as_str().unwrap().into(),
                    f["severity"].as_str().unwrap().into(),
                )
            })
            .collect();
        c.dedup();
        (run.code, c)
    };
    let (code, all) = codes(&["--deny", "all"]);
    assert_eq!(code, 1);
    assert!(all.iter().all(|(_, s)| s == "deny"), "{all:?}");
    assert!(
        !all.iter().any(|(c, _)| c == "OL103" || c == "OL202"),
        "allow-by-default rules stay off: {all:?}"
    );
    let (_, named) = codes(&["--warn", "cuda-graph-blocker", "--deny", "all"]);
    assert!(
        named.contains(&("OL202".into(), "deny".into())),
        "{named:?}"
    );
    let (code, none) = codes(&["--allow", "all"]);
    assert_eq!((code, none.len()), (0, 0));
}

#[test]
fn human_output_wraps_code_lines_and_labels_once() {
    let run = run_in(&support::repo(), &[GEMMA, "--ort", "1.24.4", "--no-cache"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let code_line = regex::Regex::new(r"^\s*\d+ \|").unwrap();
    let mut code_lines = 0;
    for l in run.stdout.lines().filter(|l| code_line.is_match(l)) {
        code_lines += 1;
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert!(code_lines > 20, "{}", run.stdout);
    // Input types ride on the node's own label; no label is drawn on a producer's line.
    assert!(!run.stdout.contains("`-- input "), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("-- Cast (OL101), input tensor(float16)[?, ?, 2, 16]"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("`-- Shape (OL201), copied: tensor(int64)[2]"),
        "{}",
        run.stdout
    );
}

#[test]
fn one_node_and_no_dangling_same_cause_line() {
    let dir = relu_dir();
    let run = run_in(dir.path(), &["relu.onnx", "--ort", "1.24.4"]);
    assert!(
        run.stdout.contains("; 1 node in 1 graph; 0 initializers"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("ORT 1.24.4 (all): 1 node on CUDA, 0 on CPU, 0 copies"),
        "{}",
        run.stdout
    );
    let place = run_in(dir.path(), &["place", "relu.onnx", "--ort", "1.24.4"]);
    assert!(place.stdout.contains("1 node on CUDA"), "{}", place.stdout);
    // Two OL001 findings with one cause (the model's and its local function's opset import).
    let old = run_in(&support::repo(), &[GEMMA, "--ort", "1.23.2", "--no-cache"]);
    assert!(
        old.stdout.contains("and 1 more with the same cause\n"),
        "{}",
        old.stdout
    );
    assert!(!old.stdout.contains("same cause:\n"), "{}", old.stdout);
}

#[test]
fn place_and_verify_refuse_flags_they_do_not_use() {
    let dir = relu_dir();
    for args in [
        &["place", "relu.onnx", "--format", "sarif"][..],
        &["place", "relu.onnx", "--format", "github"],
        &["place", "relu.onnx", "--deny", "memcpy"],
        &["place", "relu.onnx", "--statistics"],
        &["verify", "relu.onnx", "--format", "sarif"],
        &["verify", "relu.onnx", "--allow", "all"],
    ] {
        let run = run_in(dir.path(), args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains("error:"), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn place_takes_folders_and_always_prints_an_array() {
    let dir = relu_dir();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    support::write(&dir.path().join("sub"), "b.onnx", &support::relu_model());
    let run = run_in(
        dir.path(),
        &["place", ".", "--ort", "1.24.4", "--format", "json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = json(&run);
    let models: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["./relu.onnx", "./sub/b.onnx"]);
    let one = json(&run_in(
        dir.path(),
        &["place", "relu.onnx", "--format", "json"],
    ));
    assert_eq!(
        one.as_array().unwrap().len(),
        1,
        "an array for one model too"
    );
    assert_eq!(one[0]["session"], "ok");
}

/// `place` honours the configuration as the lint command does.
#[test]
fn place_honours_the_configuration() {
    let dir = relu_dir();
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.28\"\nep = \"cpu\"\nopt-level = \"basic\"\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["place", "relu.onnx", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = json(&run);
    assert_eq!(v[0]["ort"], "1.28.0");
    assert_eq!(v[0]["level"], "basic");
    assert_eq!(v[0]["all_nodes_on"]["CPUExecutionProvider"], 1);
    assert!(
        run.stderr.contains("note: ORT 1.28.0: ort = \"1.28\""),
        "{}",
        run.stderr
    );
}

/// `verify` takes several models and prints one JSON array. It needs an ONNX Runtime library:
/// an `onnxruntime` in `support::python()` (CPU is enough); without one it says so, and fails
/// under `CI=true`.
#[test]
#[cfg(feature = "live")]
fn verify_takes_several_models() {
    let found = Command::new(crate::support::python())
        .args([
            "-c",
            "import onnxruntime,os;print(os.path.join(os.path.dirname(onnxruntime.__file__),'capi'))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(capi) = found else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true: the tests' Python has no onnxruntime, so verify could not run"
        );
        eprintln!("skipped: python3 has no onnxruntime (pip install onnxruntime)");
        return;
    };
    let dir = relu_dir();
    support::write(dir.path(), "again.onnx", &support::relu_model());
    let run = run_in(
        dir.path(),
        &[
            "verify",
            "relu.onnx",
            "again.onnx",
            "--ep",
            "cpu",
            "--ort-dylib",
            &capi,
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let v = json(&run);
    let models: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["relu.onnx", "again.onnx"], "in the order given");
    assert_eq!(v[0]["agree"], true);
    assert_eq!(v[1]["agree"], true);
}

#[test]
fn tables_take_their_format_before_or_after_the_action() {
    let repo = support::repo();
    for args in [
        &["tables", "--format", "json"][..],
        &["tables", "list", "--format", "json"],
        &["tables", "show", "1.24", "--format", "json"],
        &["tables", "--format", "json", "show", "1.24"],
        &["tables", "show", "1.24", "--output-format", "json"],
    ] {
        let run = run_in(&repo, args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        let v = json(&run);
        assert!(v.is_object(), "{args:?}");
    }
    let unknown = run_in(&repo, &["tables", "show", "2.0"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("unknown ORT release `2.0`"),
        "{}",
        unknown.stderr
    );
    assert_eq!(run_in(&repo, &["tables", "--format", "sarif"]).code, 2);
}

#[test]
fn the_command_line_definition_is_consistent() {
    use clap::CommandFactory;
    onnx_lint::cli::Cli::command().debug_assert();
    let repo = support::repo();
    for sub in ["place", "verify", "rules", "explain", "tables"] {
        let run = run_in(&repo, &[sub, "--help"]);
        assert_eq!(run.code, 0, "{sub} --help: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}
