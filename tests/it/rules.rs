//! Per-rule fixtures: `tests/it/fixtures/rules/<CODE>/*.onnxtxt`, models in ONNX's textual
//! syntax with a leading comment block that sets the run (`# ort: 1.24.4`, `# level: disable`,
//! `# ep: cpu`, `# rules: OL103=warn`, `# dims: batch=1, seq=128`). A fixture named `ok_*` must
//! not fire its folder's rule;
//! every other fixture must fire it, and its rendered diagnostics (no colour, fixed width) are
//! an insta snapshot.

use std::path::Path;

use onnx_lint::diagnostics::Severity;
use onnx_lint::diagnostics::render::{self, Style};
use onnx_lint::lint::{Settings, analyse};
use onnx_lint::placer::{OptLevel, Options};
use onnx_lint::rules::Severities;
use onnx_lint::tables::{self, Ep};

fn header<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| {
            l.trim_start_matches('#')
                .trim()
                .strip_prefix(key)?
                .strip_prefix(':')
        })
        .map(str::trim)
}

/// Runs one fixture and returns (findings of its folder's rule, rendered text).
fn run_fixture(path: &Path) -> (usize, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let code = path
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let proto = onnx_lint::model::text::parse_model(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = format!("{code}/{}", path.file_name().unwrap().to_string_lossy());
    let model = onnx_lint::model::Model::from_proto(Path::new(&name), 0, proto).unwrap();
    let mut severities = Severities::default();
    for item in header(&text, "rules")
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.trim().is_empty())
    {
        let (rule, level) = item.trim().split_once('=').unwrap();
        severities
            .set(rule, Severity::parse(level).unwrap())
            .unwrap();
    }
    let settings = Settings {
        release: tables::resolve(header(&text, "ort").unwrap_or("1.24.4")).unwrap(),
        release_reason: "fixture".into(),
        options: Options {
            eps: if header(&text, "ep") == Some("cpu") {
                vec![Ep::Cpu]
            } else {
                vec![Ep::Cuda, Ep::Cpu]
            },
            level: match header(&text, "level").unwrap_or("all") {
                "disable" => OptLevel::Disable,
                "basic" => OptLevel::Basic,
                "extended" => OptLevel::Extended,
                _ => OptLevel::All,
            },
            ..Default::default()
        },
        severities,
        dims: onnx_lint::rules::cost::Dims(
            header(&text, "dims")
                .unwrap_or("")
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|d| onnx_lint::rules::cost::Dims::parse_one(d).unwrap())
                .collect(),
        ),
    };
    let a = analyse(model, &settings);
    let mine: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.code == code)
        .cloned()
        .collect();
    let style = Style {
        color: false,
        unicode: false,
        width: 100,
    };
    let rendered = render::human(&a.model, &mine, style);
    // What JSON carries beyond the human form: the cost and the machine-readable fix.
    let mut machine = String::new();
    for f in &mine {
        if f.bytes.is_none() && f.fix.is_none() {
            continue;
        }
        machine.push_str(&format!(
            "{} {}: bytes {:?}, bytes_expr {:?}, fix {}\n",
            f.code,
            f.node_name
                .as_deref()
                .or(f.values.first().map(|v| v.name.as_str()))
                .unwrap_or(""),
            f.bytes,
            f.bytes_expr,
            serde_json::to_string(&f.fix).unwrap()
        ));
    }
    let machine = if machine.is_empty() {
        String::new()
    } else {
        format!("# Cost and fixes\n{machine}")
    };
    (
        mine.len(),
        format!("# Input\n{text}\n# Diagnostics\n{rendered}{machine}"),
    )
}

#[test]
fn rule_fixtures() {
    insta::glob!("fixtures/rules/*/*.onnxtxt", |path| {
        let (count, rendered) = run_fixture(path);
        let ok = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("ok_");
        if ok {
            assert_eq!(count, 0, "{} must not fire:\n{rendered}", path.display());
        } else {
            assert!(count > 0, "{} must fire", path.display());
            insta::assert_snapshot!(rendered);
        }
    });
}

/// Copies a rule fixture into a fresh folder (no configuration above it) and returns the folder.
fn fixture_dir(code: &str, name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures/rules")
        .join(code)
        .join(name);
    std::fs::copy(&src, dir.path().join(name)).unwrap();
    dir
}

fn json_of(run: &crate::support::Run) -> serde_json::Value {
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    // Lint JSON is always an array, one object per model: these tests lint one model.
    let models = v.as_array().expect("a JSON array");
    assert_eq!(models.len(), 1, "{}", run.stdout);
    models[0].clone()
}

#[test]
fn copies_have_bytes_at_the_dims_and_findings_are_ordered_by_cost() {
    let name = "attention_copies_bytes.onnxtxt";
    let dir = fixture_dir("OL201", name);
    let v = json_of(&crate::support::run_in(
        dir.path(),
        &[
            name, "--ort", "1.24.4", "--format", "json", "--dim", "batch=2", "--dim", "seq=8",
        ],
    ));
    let findings = v["findings"].as_array().unwrap();
    let copies: Vec<_> = findings.iter().filter(|f| f["code"] == "OL201").collect();
    assert_eq!(
        copies.len(),
        v["summary"]["copies"].as_u64().unwrap() as usize
    );
    assert!(!copies.is_empty());
    for f in &copies {
        assert!(f["bytes"].is_u64(), "{f}");
        assert!(f["bytes_expr"].is_string(), "{f}");
    }
    // 2·batch·seq·16 B at batch = 2, seq = 8.
    let q = copies
        .iter()
        .find(|f| f["bytes_expr"] == "2·batch·seq·16 B")
        .expect("a [batch, seq, 16] float16 copy");
    assert_eq!(q["bytes"], 2 * 2 * 8 * 16);
    // Highest cost first, in the whole list.
    let bytes: Vec<u64> = findings
        .iter()
        .map(|f| f["bytes"].as_u64().unwrap_or(0))
        .collect();
    assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "{bytes:?}");
    // The model's total is the sum of its copies.
    let total: u64 = copies.iter().map(|f| f["bytes"].as_u64().unwrap()).sum();
    assert_eq!(v["summary"]["bytes_copied"], total);
    assert_eq!(v["summary"]["dims"]["seq"], 8);
    // Each copy names the finding behind it.
    assert!(
        copies.iter().all(|f| f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("caused by OL10"))),
        "{copies:?}"
    );
}

#[test]
fn dims_come_from_the_configuration_and_the_command_line_wins() {
    let name = "attention_copies_bytes.onnxtxt";
    let dir = fixture_dir("OL201", name);
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "ort = \"1.24.4\"\n[dims]\nbatch = 2\nseq = 8\n",
    )
    .unwrap();
    let bytes_of = |args: &[&str]| {
        let mut all = vec![name, "--format", "json"];
        all.extend_from_slice(args);
        let v = json_of(&crate::support::run_in(dir.path(), &all));
        v["summary"]["bytes_copied"].as_u64().unwrap()
    };
    let from_config = bytes_of(&[]);
    assert_eq!(
        from_config,
        bytes_of(&["--dim", "batch=2", "--dim", "seq=8"])
    );
    assert_eq!(bytes_of(&["--dim", "seq=16"]), 2 * from_config);
    // Not a number, or negative in the file: errors, exit code 2.
    let bad = crate::support::run_in(dir.path(), &[name, "--dim", "seq"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("NAME=VALUE"), "{}", bad.stderr);
    std::fs::write(dir.path().join("onnx-lint.toml"), "[dims]\nseq = -1\n").unwrap();
    let bad = crate::support::run_in(dir.path(), &[name]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("non-negative"), "{}", bad.stderr);
}

#[test]
fn zero_cost_findings_are_opt_in() {
    let name = "ok_torchscript_decoder_zero_cost.onnxtxt";
    let dir = fixture_dir("OL301", name);
    let count = |args: &[&str]| {
        let mut all = vec![name, "--ort", "1.31.1", "--format", "json"];
        all.extend_from_slice(args);
        let v = json_of(&crate::support::run_in(dir.path(), &all));
        assert_eq!(v["summary"]["copies"], 0);
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "OL301")
            .map(|f| {
                assert_eq!(f["zero_cost"], true);
                assert_eq!(f["fix"]["kind"], "replace-input-with-constant", "{f}");
                f["severity"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>()
    };
    // 0 copies: nothing at warn or deny by default.
    assert!(count(&[]).is_empty());
    assert_eq!(count(&["--warn", "zero-cost"]), vec!["warn"; 4]);
    assert!(count(&["--warn", "zero-cost", "--allow", "OL301"]).is_empty());
    std::fs::write(
        dir.path().join("onnx-lint.toml"),
        "[rules]\nzero-cost = \"deny\"\n",
    )
    .unwrap();
    assert_eq!(count(&[]), vec!["deny"; 4]);
}

/// The oracle's records (`tests/fixtures/oracle/*.jsonl.gz`, or the shared corpus's `.jsonl`).
fn oracle_records(path: &Path) -> Vec<serde_json::Value> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).unwrap();
    let lines: Vec<String> = if path.to_string_lossy().ends_with(".gz") {
        std::io::BufReader::new(flate2::read::GzDecoder::new(file))
            .lines()
            .map(Result::unwrap)
            .collect()
    } else {
        std::io::BufReader::new(file)
            .lines()
            .map(Result::unwrap)
            .collect()
    };
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// No noise: on every model ORT runs with 0 copies (the oracle's record) the default run reports
/// nothing at warn or deny. Probes always; the shared corpus when it is there.
#[test]
fn no_findings_at_warn_on_models_ort_runs_without_copies() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sets: Vec<(std::path::PathBuf, std::path::PathBuf)> = vec![
        (
            repo.join("tests/fixtures/oracle/probes-1.31.1-all.jsonl.gz"),
            repo.join("tests/fixtures"),
        ),
        (
            repo.join("tests/fixtures/oracle/probes-1.24.4-all.jsonl.gz"),
            repo.join("tests/fixtures"),
        ),
    ];
    // The public corpus, kept in the repository (`tests/fixtures/corpus`).
    sets.push((
        repo.join("tests/fixtures/oracle/models-1.31.1-all.jsonl.gz"),
        crate::support::corpus_models(),
    ));
    let mut checked = 0;
    let mut noisy = Vec::new();
    for (truth, root) in sets {
        for r in oracle_records(&truth) {
            if r["session"] != "ok" || r["copies"].as_array().is_some_and(|c| !c.is_empty()) {
                continue;
            }
            let name = r["model"].as_str().unwrap();
            let Ok(model) = onnx_lint::model::load(&root.join(name)) else {
                continue;
            };
            let settings = Settings {
                release: tables::resolve(r["ort"].as_str().unwrap()).unwrap(),
                release_reason: "oracle".into(),
                options: Options {
                    eps: vec![Ep::Cuda, Ep::Cpu],
                    level: OptLevel::All,
                    ..Default::default()
                },
                severities: Severities::default(),
                dims: Default::default(),
            };
            let a = analyse(model, &settings);
            checked += 1;
            let loud: Vec<_> = a
                .findings
                .iter()
                .filter(|f| f.severity != Severity::Allow)
                .map(|f| f.code)
                .collect();
            if !loud.is_empty() {
                noisy.push(format!("{name} ({}): {loud:?}", r["ort"]));
            }
        }
    }
    assert!(checked >= 70, "only {checked} models with 0 copies");
    assert!(
        noisy.is_empty(),
        "findings at warn/deny on models with 0 copies:\n{}",
        noisy.join("\n")
    );
}
