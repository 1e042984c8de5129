//! Per-rule fixtures: `tests/it/fixtures/rules/<CODE>/*.onnxtxt`, models in ONNX's textual
//! syntax with a leading comment block that sets the run (`# ort: 1.24.4`, `# level: disable`,
//! `# ep: cpu`, `# rules: OL103=warn`, `# dims: batch=1, seq=128`). A fixture named `ok_*` must
//! not fire its folder's rule;
//! every other fixture must fire it, and its rendered diagnostics (no colour, fixed width) are
//! an insta snapshot.

use std::path::Path;

use onnx_lint::cli::check::{Settings, analyse};
use onnx_lint::diagnostics::Severity;
use onnx_lint::diagnostics::render::{self, Style};
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
        },
        severities,
        format: onnx_lint::cli::Format::Human,
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
