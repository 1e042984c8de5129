//! Every output format and exit code, through the real binary.

use crate::support::{self, run_in};

const GEMMA: &str = "examples/gemma4-decoder.op24.onnx";

#[test]
fn sarif_validates_against_the_sarif_2_1_0_schema() {
    let run = run_in(
        &support::repo(),
        &[GEMMA, "--ort", "1.24.4", "--format", "sarif", "--no-cache"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let log: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let schema_text = std::fs::read_to_string(
        support::repo().join("tests/fixtures/sarif/sarif-schema-2.1.0.json"),
    )
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
    // The official schema's `language` patterns have an unescaped `]`, valid in ECMA-262 regexes
    // but refused by the Rust regex engine; escape it (same meaning) before compiling.
    fn escape_language_patterns(v: &mut serde_json::Value) -> usize {
        const BAD: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
        match v {
            serde_json::Value::String(s) if s == BAD => {
                *s = BAD.replace("]?$", "\\]?$");
                1
            }
            serde_json::Value::Array(a) => a.iter_mut().map(escape_language_patterns).sum(),
            serde_json::Value::Object(o) => o.values_mut().map(escape_language_patterns).sum(),
            _ => 0,
        }
    }
    let mut schema = schema;
    assert!(escape_language_patterns(&mut schema) >= 1);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&log)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "SARIF schema violations:\n{}",
        errors.join("\n")
    );
    let run0 = &log["runs"][0];
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 11);
    assert!(
        rules
            .iter()
            .any(|r| r["id"] == "OL101" && r["name"] == "registration-gap")
    );
    let results = run0["results"].as_array().unwrap();
    assert!(
        results
            .iter()
            .any(|r| r["ruleId"] == "OL101" && r["level"] == "warning")
    );
    for r in results {
        let index = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], r["ruleId"]);
        assert_eq!(
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            GEMMA
        );
    }
}

#[test]
fn github_annotations_and_job_summary() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
        .args([
            "onnx-lint",
            GEMMA,
            "--ort",
            "1.24.4",
            "--format",
            "github",
            "--no-cache",
        ])
        .current_dir(support::repo())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(!lines.is_empty());
    for l in &lines {
        assert!(
            l.starts_with("::warning file=examples/gemma4-decoder.op24.onnx,title=OL"),
            "{l}"
        );
        let (_, message) = l
            .split_once("::")
            .and_then(|(_, rest)| rest.split_once("::"))
            .unwrap();
        assert!(!message.contains('\n'));
    }
    // One annotation per cause, not per copy.
    let copies = lines
        .iter()
        .filter(|l| l.contains("title=OL201 memcpy"))
        .count();
    assert!(copies < 10, "{copies} memcpy annotations");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("title=OL101 registration-gap ("))
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("## cargo onnx-lint"), "{md}");
    assert!(
        md.contains("| `examples/gemma4-decoder.op24.onnx` | ORT 1.24.4 (all)"),
        "{md}"
    );
}

#[test]
fn json_findings_are_stable_and_complete() {
    let run = run_in(
        &support::repo(),
        &[GEMMA, "--ort", "1.24.4", "--format", "json", "--no-cache"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 1, "always an array");
    let v = &all[0];
    assert_eq!(v["ort"], "1.24.4");
    assert_eq!(v["level"], "all");
    assert_eq!(v["session"], "ok");
    assert_eq!(v["summary"]["copies"], 28);
    assert_eq!(v["summary"]["memcpy"]["main_graph"], 28);
    let findings = v["findings"].as_array().unwrap();
    let reshape = findings
        .iter()
        .find(|f| f["code"] == "OL101" && f["op"] == "Reshape")
        .expect("OL101 on a Reshape");
    for key in [
        "rule",
        "severity",
        "message",
        "graph",
        "node",
        "values",
        "help",
        "evidence",
        "cause",
        "text_span",
    ] {
        assert!(!reshape[key].is_null(), "{key} missing: {reshape}");
    }
    assert!(
        reshape["help"]
            .as_str()
            .unwrap()
            .contains("lower the ai.onnx opset to 23")
    );
    assert!(findings.iter().filter(|f| f["code"] == "OL201").count() == 28);
}

#[test]
fn opset_24_gap_fires_on_1_24_and_not_on_1_31() {
    let old = run_in(
        &support::repo(),
        &[GEMMA, "--ort", "1.24.4", "--format", "json", "--no-cache"],
    );
    let new = run_in(
        &support::repo(),
        &[GEMMA, "--ort", "1.31.1", "--format", "json", "--no-cache"],
    );
    let count = |r: &support::Run, code: &str| {
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == code)
            .count()
    };
    assert!(count(&old, "OL101") > 0);
    assert_eq!(count(&new, "OL101"), 0);
    assert_eq!(count(&new, "OL201"), 0);
}

#[test]
fn severities_and_exit_codes() {
    let repo = support::repo();
    // Warnings only: 0. A rule raised to deny: 1. Everything allowed: no findings.
    assert_eq!(
        run_in(&repo, &[GEMMA, "--ort", "1.24.4", "--no-cache"]).code,
        0
    );
    let deny = run_in(
        &repo,
        &[
            GEMMA,
            "--ort",
            "1.24.4",
            "--deny",
            "registration-gap",
            "--no-cache",
        ],
    );
    assert_eq!(deny.code, 1);
    assert!(
        deny.stdout.contains("x Reshape-24") || deny.stdout.contains("Reshape-24"),
        "{}",
        deny.stdout
    );
    let quiet = run_in(
        &repo,
        &[
            GEMMA,
            "--ort",
            "1.24.4",
            "--allow",
            "all",
            "--format",
            "json",
            "--no-cache",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&quiet.stdout).unwrap();
    assert_eq!(v[0]["findings"].as_array().unwrap().len(), 0);
    // Usage errors: 2.
    let unknown = run_in(&repo, &[GEMMA, "--deny", "OL999"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("unknown rule `OL999`"),
        "{}",
        unknown.stderr
    );
    let release = run_in(&repo, &[GEMMA, "--ort", "9.9"]);
    assert_eq!(release.code, 2);
    assert!(
        release.stderr.contains("1.24.4"),
        "lists the bundled releases: {}",
        release.stderr
    );
}

#[test]
fn config_file_errors_point_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    support::write(dir.path(), "m.onnx", &support::relu_model());
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.24\"\n\n[rules]\nOL101 = \"deny\"\nno-such-rule = \"warn\"\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["m.onnx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown rule `no-such-rule`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("onnx-lint.toml:5:1"),
        "points at line 5: {}",
        run.stderr
    );
    insta::assert_snapshot!(run.stderr);

    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.24\"\nopt_level = \"all\"\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["m.onnx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown field `opt_level`"),
        "{}",
        run.stderr
    );

    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.24\"\n[rules]\nmemcpy = \"loud\"\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["m.onnx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown level `loud`"),
        "{}",
        run.stderr
    );

    // A valid file sets the release and the severities.
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.24\"\nep = \"cpu\"\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["m.onnx", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v[0]["ort"], "1.24.4");
    assert_eq!(v[0]["ep"], "cpu");
}

#[test]
fn node_metadata_suppresses_rules() {
    use onnx_lint::model::proto::StringStringEntryProto;
    let text = std::fs::read_to_string(
        support::repo().join("tests/it/fixtures/rules/OL101/reshape_opset24.onnxtxt"),
    )
    .unwrap();
    let mut proto = onnx_lint::model::text::parse_model(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    support::write(dir.path(), "plain.onnx", &proto);
    if let Some(g) = proto.graph.as_mut() {
        for n in &mut g.node {
            n.metadata_props.push(StringStringEntryProto {
                key: Some("onnx-lint.allow".into()),
                value: Some("OL101, memcpy".into()),
            });
        }
    }
    support::write(dir.path(), "quiet.onnx", &proto);
    let codes = |file: &str| {
        let run = run_in(dir.path(), &[file, "--ort", "1.24.4", "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        v[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(codes("plain.onnx").contains(&"OL101".to_string()));
    let quiet = codes("quiet.onnx");
    assert!(
        !quiet.contains(&"OL101".to_string()) && !quiet.contains(&"OL201".to_string()),
        "{quiet:?}"
    );
}

#[test]
fn github_job_summary_rows_stay_one_table_over_several_models() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::repo().join(GEMMA), dir.path().join("a.onnx")).unwrap();
    std::fs::copy(support::repo().join(GEMMA), dir.path().join("b.onnx")).unwrap();
    support::write(dir.path(), "c.onnx", &support::relu_model());
    let summary = dir.path().join("summary.md");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
        .args([".", "--ort", "1.24.4", "--format", "github"])
        .current_dir(dir.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let md = std::fs::read_to_string(&summary).unwrap();
    let table: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("| model |"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(table.len(), 2 + 3, "header, rule, one row per model:\n{md}");
    assert!(
        table[2].starts_with("| `./a.onnx` | ORT 1.24.4 (all)"),
        "{md}"
    );
    assert!(
        table[4].starts_with("| `./c.onnx` | ORT 1.24.4 (all): 1 node on CUDA"),
        "{md}"
    );
    assert_eq!(
        md.matches("\n### `").count(),
        2,
        "a section per model with findings:\n{md}"
    );
}

#[test]
fn sarif_uris_are_relative_to_srcroot_and_failures_are_reported() {
    let repo = support::repo();
    let absolute = repo.join(GEMMA);
    let run = run_in(
        &repo,
        &[
            absolute.to_str().unwrap(),
            "--ort",
            "1.24.4",
            "--format",
            "sarif",
            "--no-cache",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let log: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let run0 = &log["runs"][0];
    let location = &run0["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(location["uri"], GEMMA, "relative, although typed absolute");
    assert_eq!(location["uriBaseId"], "%SRCROOT%");
    let base = run0["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert!(
        base.starts_with("file:///") && base.ends_with('/'),
        "{base}"
    );
    assert_eq!(run0["invocations"][0]["executionSuccessful"], true);

    let dir = tempfile::tempdir().unwrap();
    support::write(dir.path(), "good model.onnx", &support::relu_model());
    std::fs::write(dir.path().join("bad.onnx"), b"\xff\xff\xff").unwrap();
    let run = run_in(dir.path(), &[".", "--format", "sarif"]);
    assert_eq!(run.code, 2);
    let log: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let inv = &log["runs"][0]["invocations"][0];
    assert_eq!(inv["executionSuccessful"], false);
    let n = &inv["toolExecutionNotifications"][0];
    assert_eq!(n["level"], "error");
    assert_eq!(
        n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "bad.onnx"
    );
    assert_eq!(n["descriptor"]["id"], "onnx_lint::load::not_protobuf");
}
