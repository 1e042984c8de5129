//! The differential test: the placer against ONNX Runtime itself.
//!
//! `tests/fixtures/oracle/<set>-<ort>-<level>.jsonl.gz` are ORT's own answers, recorded with the
//! stubbed-GPU oracle (`tools/oracle/refresh.sh`), for the public corpus (`models`, read from
//! `../shared/corpus/models`) and the ONNX backend node-test models (`node`, read from
//! `$ONNX_LINT_NODE_CORPUS`), and for probe models kept in this repository (sets named
//! `probes*`, e.g. `probes_l1`, read from `tests/fixtures/probes`; each is written, with its
//! records, by a script under `tools/probes/`). Every record is compared as
//! `../shared/oracle/compare.py` does: load outcome, copies per graph, node placements.
//!
//! Known differences are listed in `tests/fixtures/oracle/known-differences.txt`; the test fails
//! on any difference not listed there (a regression) and on any listed one that now agrees (a
//! stale entry: delete the line). `ONNX_LINT_BLESS=1` rewrites the list.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

fn fixtures() -> PathBuf {
    support::repo().join("tests/fixtures/oracle")
}

fn records(path: &Path) -> Vec<Value> {
    let file = std::fs::File::open(path).unwrap();
    std::io::BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

/// compare.py's outcome classes; failures of the stubbed oracle after placement count as ok.
fn outcome(r: &Value) -> &'static str {
    if r["session"] == "ok" {
        return "ok";
    }
    let e = r["error"].as_str().unwrap_or("").to_lowercase();
    if e.starts_with("load")
        || e.contains("load model")
        || e.contains("invalid_graph")
        || e.contains("opset")
    {
        "load-fail"
    } else if e.starts_with("no-kernel")
        // ORT 1.23 words the same failure (a node no provider took) differently.
        || e.contains("unable to get provider associated with provider type")
        || e.contains("provider type for")
        || e.contains("could not find an implementation")
    {
        "no-kernel"
    } else {
        "ok"
    }
}

fn placement_of(
    r: &Value,
) -> (
    serde_json::Map<String, Value>,
    Option<&serde_json::Map<String, Value>>,
) {
    let p = r["placement"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !k.starts_with("Memcpy"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    (p, r["all_nodes_on"].as_object().filter(|m| !m.is_empty()))
}

/// compare.py's `same_placement`.
fn same_placement(x: &Value, y: &Value) -> bool {
    let ((px, ax), (py, ay)) = (placement_of(x), placement_of(y));
    if !px.is_empty() && !py.is_empty() {
        let agree = px.iter().filter(|(n, e)| py.get(*n) == Some(e)).count();
        return agree == px.len() && (px.len() == py.len() || ax.is_some());
    }
    if px.is_empty() && py.is_empty() {
        return ax == ay;
    }
    let (explicit, summary) = if ax.is_some() { (&py, ax) } else { (&px, ay) };
    let Some(summary) = summary.filter(|s| s.len() == 1) else {
        return false;
    };
    let (ep, n) = summary.iter().next().unwrap();
    let agree = explicit.values().filter(|e| *e == ep).count();
    agree == explicit.len() && Some(agree as u64) == n.as_u64()
}

fn level(name: &str) -> OptLevel {
    match name {
        "disable" => OptLevel::Disable,
        "basic" => OptLevel::Basic,
        "extended" => OptLevel::Extended,
        _ => OptLevel::All,
    }
}

#[test]
fn placer_agrees_with_the_oracle() {
    let Some(shared) = support::shared() else {
        eprintln!("skipped: ../shared (the public corpus) is not beside this checkout");
        return;
    };
    let node_corpus = std::env::var_os("ONNX_LINT_NODE_CORPUS").map(PathBuf::from);
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "oracle fixtures missing");
    let mut differences = BTreeSet::new();
    let mut summary = Vec::new();
    for file in files {
        let stem = file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".jsonl.gz")
            .to_string();
        let mut parts = stem.splitn(3, '-');
        let (set, ort, lvl) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let root = match set {
            "models" => shared.join("corpus/models"),
            _ if set.starts_with("probes") => support::repo().join("tests/fixtures/probes"),
            _ => match &node_corpus {
                Some(d) => d.clone(),
                None => {
                    eprintln!("skipped {stem}: set ONNX_LINT_NODE_CORPUS to the node-test models");
                    continue;
                }
            },
        };
        let table = tables::resolve(ort).unwrap().table();
        let options = Options {
            eps: vec![Ep::Cuda, Ep::Cpu],
            level: level(lvl),
        };
        let (mut n, mut copies_ok, mut outcome_ok, mut place_ok) = (0, 0, 0, 0);
        for truth in records(&file) {
            let name = truth["model"].as_str().unwrap();
            let path = root.join(
                name.strip_prefix("node/")
                    .or_else(|| name.strip_prefix("probes/"))
                    .unwrap_or(name),
            );
            let mine = match onnx_lint::model::load(&path) {
                Ok(m) => onnx_lint::cli::placement_json(name, &placer::place(&m, table, &options)),
                Err(e) => {
                    serde_json::json!({"session": "fail", "error": format!("load: {e}"), "memcpy": {}})
                }
            };
            n += 1;
            let same_outcome = outcome(&truth) == outcome(&mine);
            let same_copies = truth["memcpy"] == mine["memcpy"]
                || (truth["memcpy"].as_object().is_none_or(|m| m.is_empty())
                    && mine["memcpy"].as_object().is_none_or(|m| m.is_empty()));
            let same_place = same_placement(&truth, &mine);
            outcome_ok += usize::from(same_outcome);
            copies_ok += usize::from(same_copies);
            place_ok += usize::from(same_place);
            if !(same_outcome && same_copies && same_place) {
                differences.insert(format!("{stem} {name}"));
            }
        }
        summary.push(format!(
            "{stem:24} models {n:5}  outcome {outcome_ok:5}  copies {copies_ok:5} ({:.2}%)  placement {place_ok:5}",
            100.0 * copies_ok as f64 / n.max(1) as f64
        ));
    }
    eprintln!("{}", summary.join("\n"));

    let known_path = fixtures().join("known-differences.txt");
    if std::env::var_os("ONNX_LINT_BLESS").is_some() {
        let mut text = String::from(
            "# Models where the placer and the oracle disagree today (see tests/it/placement.rs).\n",
        );
        for d in &differences {
            text += d;
            text.push('\n');
        }
        std::fs::write(&known_path, text).unwrap();
        return;
    }
    let known: BTreeSet<String> = std::fs::read_to_string(&known_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let new: Vec<_> = differences.difference(&known).collect();
    let ran =
        |d: &String| node_corpus.is_some() || d.starts_with("models-") || d.starts_with("probes");
    let fixed: Vec<_> = known.difference(&differences).filter(|d| ran(d)).collect();
    assert!(
        new.is_empty(),
        "{} new differences from the oracle:\n{new:#?}",
        new.len()
    );
    assert!(
        fixed.is_empty(),
        "{} known differences now agree; remove them from known-differences.txt:\n{fixed:#?}",
        fixed.len()
    );
}
