//! The differential test: the placer against ONNX Runtime itself.
//!
//! `tests/fixtures/oracle/<set>-<ort>-<level>.jsonl.gz` are ORT's own answers, recorded with the
//! stubbed-GPU oracle (`tools/oracle/refresh.sh`), for the public corpus (`models`, kept in
//! `tests/fixtures/corpus/models`), the ONNX backend node-test models (`node`, written at test
//! time from the pinned `onnx` package by `tools/corpus/node_corpus.py`, or read from
//! `$ONNX_LINT_NODE_CORPUS`: see [`support::node_corpus`]), and probe models kept in this
//! repository (sets named `probes*`, e.g. `probes_l1`, read from `tests/fixtures/probes`; each is
//! written, with its records, by a script under `tools/probes/`). Every record is compared as
//! the oracle's `compare.py` does: load outcome, copies per graph, node placements.
//!
//! A set whose models are missing (the node tests without a Python that has `onnx==1.23.2`) is
//! reported as NOT RUN in the output, and is a failure under `CI=true`.
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

pub(crate) fn records(path: &Path) -> Vec<Value> {
    let file = std::fs::File::open(path).unwrap();
    std::io::BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

/// compare.py's outcome classes; failures of the stubbed oracle after placement count as ok
/// (also the CPU package's wording of a node without a kernel, "Could not find an
/// implementation"; `realworld.rs` uses them too).
pub(crate) fn outcome(r: &Value) -> &'static str {
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

pub(crate) fn placement_of(
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
    let node_corpus = support::node_corpus();
    let corpus = support::corpus_models();
    let mut not_run = Vec::new();
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
            "models" => corpus.clone(),
            _ if set.starts_with("probes") => support::repo().join("tests/fixtures/probes"),
            "node" => match &node_corpus {
                Ok(d) => d.clone(),
                Err(why) => {
                    not_run.push((stem, why.clone()));
                    continue;
                }
            },
            _ => panic!("{stem}: unknown set {set} (models, node or probes*)"),
        };
        let table = tables::resolve(ort).unwrap().table();
        let options = Options {
            eps: vec![Ep::Cuda, Ep::Cpu],
            level: level(lvl),
            ..Default::default()
        };
        let (mut n, mut copies_ok, mut outcome_ok, mut place_ok) = (0, 0, 0, 0);
        let mut names = BTreeSet::new();
        for truth in records(&file) {
            let name = truth["model"].as_str().unwrap();
            names.insert(name.to_string());
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
        if set == "models" {
            // Every model kept in the repository has its record, and every record its model.
            let kept: BTreeSet<String> = support::corpus_manifest().into_keys().collect();
            assert_eq!(
                names, kept,
                "{stem}: records and tests/fixtures/corpus differ"
            );
        }
        summary.push(format!(
            "{stem:24} models {n:5}  outcome {outcome_ok:5}  copies {copies_ok:5} ({:.2}%)  placement {place_ok:5}",
            100.0 * copies_ok as f64 / n.max(1) as f64
        ));
    }
    support::report(&format!(
        "oracle agreement (tests/it/placement.rs):\n{}",
        summary.join("\n")
    ));
    if let Some((_, why)) = not_run.first() {
        let sets: Vec<&str> = not_run.iter().map(|(stem, _)| stem.as_str()).collect();
        support::not_run(&format!("placement vs oracle, {}", sets.join(" ")), why);
    }

    let known_path = fixtures().join("known-differences.txt");
    let known: BTreeSet<String> = std::fs::read_to_string(&known_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let ran = |d: &String| {
        !not_run
            .iter()
            .any(|(stem, _)| d.starts_with(&format!("{stem} ")))
    };
    if std::env::var_os("ONNX_LINT_BLESS").is_some() {
        let mut text = String::from(
            "# Models where the placer and the oracle disagree today (see tests/it/placement.rs).\n",
        );
        // The entries of sets that could not run stay as they were.
        let kept = known.iter().filter(|d| !ran(d));
        for d in differences.iter().chain(kept).collect::<BTreeSet<_>>() {
            text += d;
            text.push('\n');
        }
        std::fs::write(&known_path, text).unwrap();
        return;
    }
    let new: Vec<_> = differences.difference(&known).collect();
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

/// The public corpus in `tests/fixtures/corpus/models` is the one the oracle's records were
/// made from: every file listed in `SHA256SUMS` is there with that digest, and nothing else.
#[test]
fn public_corpus_matches_its_manifest() {
    use sha2::{Digest, Sha256};
    let manifest = support::corpus_manifest();
    assert!(manifest.len() >= 179, "{} models listed", manifest.len());
    let root = support::corpus_models();
    for (name, digest) in &manifest {
        let bytes = std::fs::read(root.join(name))
            .unwrap_or_else(|e| panic!("tests/fixtures/corpus/models/{name}: {e}"));
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(&actual, digest, "{name} differs from SHA256SUMS");
    }
    let files = onnx_lint::cli::expand_paths(std::slice::from_ref(&root)).unwrap();
    let listed: BTreeSet<PathBuf> = manifest.keys().map(|n| root.join(n)).collect();
    let extra: Vec<_> = files.iter().filter(|f| !listed.contains(*f)).collect();
    assert!(extra.is_empty(), "models not in SHA256SUMS: {extra:?}");
}
