//! The differential test on real-world kinds of models (issue 16): quantized graphs (dynamic,
//! QDQ, QOperator), fp16 conversions, ORT-transformer-optimised encoders and decoders, and
//! architectures the public corpus lacks (a detector with a decode head, a CRNN with an LSTM, a
//! streaming model with If/Loop, inputs declared `dim_value: -1`), all in
//! `tests/fixtures/realworld/` (made by `tools/realworld/gen.py`).
//!
//! Truth, in `tests/fixtures/realworld/oracle/`:
//! - `realworld-<ort>-<level>.jsonl.gz` (and `tests/fixtures/tsdecoders/oracle/tsdecoders-*`, the
//!   real TorchScript decoders of that folder's README): the stubbed-GPU oracle (`tools/realworld/record.sh`),
//!   compared as `tests/it/placement.rs` compares (load outcome, copies per graph, placements);
//! - `cpu-<set>-<ort>-<level>.jsonl.gz`: CPU-only sessions of the CPU `onnxruntime` wheels
//!   (`tools/realworld/cpu_truth.py`) for this corpus (`realworld`) and the public one
//!   (`models`, `tests/fixtures/corpus/models`), compared with `--ep cpu` predictions: load outcome,
//!   the node count and the names of the session graph's nodes.
//!
//! `unseen.txt` lists quantized models made after the QDQ transformers were written, with
//! settings and sources they were not tuned on (`tools/realworld/gen.py --unseen`): a third
//! tally, apart from the held-out half and the rest.
//!
//! `tests/fixtures/realworld/known-differences.txt` lists the sessions that differ today; the
//! test fails on a difference not listed (a regression) and on a listed one that now agrees
//! (delete the line). `ONNX_LINT_BLESS=1` rewrites it. The figures per file, split into the
//! held-out half (`heldout.txt`) and the rest, go to stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::{Map, Value};

use crate::placement::{outcome, placement_of, records};
use crate::support;

fn fixtures() -> PathBuf {
    support::repo().join("tests/fixtures/realworld")
}

/// Nodes of the truth's placement that the prediction places on the same provider, and the
/// truth's node count plus the predicted nodes ORT does not have: by name where both list names, by count per provider where one of them
/// only says "all nodes on".
fn node_agreement(truth: &Value, mine: &Value) -> (u64, u64) {
    let ((pt, at), (pm, am)) = (placement_of(truth), placement_of(mine));
    let per_ep = |m: &Map<String, Value>| {
        let mut c: BTreeMap<String, u64> = BTreeMap::new();
        for v in m.values() {
            *c.entry(v.as_str().unwrap_or("").to_string()).or_default() += 1;
        }
        c
    };
    let counts = |s: &Map<String, Value>| -> BTreeMap<String, u64> {
        s.iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect()
    };
    if !pt.is_empty() {
        let total = pt.len() as u64;
        if !pm.is_empty() {
            let agree = pt.iter().filter(|(n, e)| pm.get(*n) == Some(e)).count();
            // A node ORT removed and the prediction kept counts against it too.
            let extra = pm.keys().filter(|n| !pt.contains_key(*n)).count();
            return (agree as u64, total + extra as u64);
        }
        let Some(am) = am else { return (0, total) };
        let theirs = per_ep(&pt);
        let mine = counts(am);
        let agree = theirs
            .iter()
            .map(|(ep, n)| (*n).min(mine.get(ep).copied().unwrap_or(0)))
            .sum();
        return (agree, total);
    }
    let Some(at) = at else { return (0, 0) };
    let theirs = counts(at);
    let total = theirs.values().sum();
    let mine = if !pm.is_empty() {
        per_ep(&pm)
    } else {
        am.map(counts).unwrap_or_default()
    };
    let agree = theirs
        .iter()
        .map(|(ep, n)| (*n).min(mine.get(ep).copied().unwrap_or(0)))
        .sum();
    (agree, total)
}

fn level(name: &str) -> OptLevel {
    match name {
        "disable" => OptLevel::Disable,
        "basic" => OptLevel::Basic,
        "extended" => OptLevel::Extended,
        _ => OptLevel::All,
    }
}

/// The names of the nodes of the model ORT would save for the predicted session (every graph:
/// `Session::saved_node_names`, what the CPU truth lists), sorted.
fn node_names(p: &placer::Placement) -> Vec<String> {
    let mut out: Vec<String> = p
        .session
        .saved_node_names()
        .into_iter()
        .map(|n| n.to_string())
        .collect();
    out.sort();
    out
}

/// With `ONNX_LINT_DIFF=<substring of the fixture stem or model>` set, prints the session graph
/// nodes only ORT has and only the prediction has (with their ops), for classifying differences.
fn print_name_diff(
    stem: &str,
    key: &str,
    truth: &Value,
    path: &std::path::Path,
    table: &'static tables::KernelTable,
    options: &Options,
) {
    let Some(filter) = std::env::var_os("ONNX_LINT_DIFF") else {
        return;
    };
    let filter = filter.to_string_lossy();
    if !stem.contains(filter.as_ref()) && !key.contains(filter.as_ref()) {
        return;
    }
    let Ok(m) = onnx_lint::model::load(path) else {
        return;
    };
    let p = placer::place(&m, table, options);
    let mut mine: BTreeMap<String, usize> = BTreeMap::new();
    let mut ops: BTreeMap<String, String> = BTreeMap::new();
    for g in &p.session.graphs {
        for (_, n) in g.live_nodes() {
            ops.insert(n.name.to_string(), format!("{}:{}", n.domain, n.op));
        }
    }
    for n in p.session.saved_node_names() {
        *mine.entry(n.to_string()).or_default() += 1;
        ops.entry(n.to_string())
            .or_insert_with(|| "ai.onnx:Constant".into());
    }
    let mut theirs: BTreeMap<String, usize> = BTreeMap::new();
    for n in truth["nodes"].as_array().into_iter().flatten() {
        *theirs
            .entry(n.as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    eprintln!("== {stem} {key}");
    for (n, k) in &theirs {
        let m = mine.get(n).copied().unwrap_or(0);
        if *k > m {
            eprintln!("  ORT only   {n:?} x{}", k - m);
        }
    }
    for (n, k) in &mine {
        let t = theirs.get(n).copied().unwrap_or(0);
        if *k > t {
            eprintln!("  mine only  {n:?} x{} {}", k - t, ops[n]);
        }
    }
}

#[derive(Default)]
struct Tally {
    sessions: u64,
    outcome: u64,
    copies: u64,
    placement: u64,
    nodes_agree: u64,
    nodes: u64,
}

impl Tally {
    fn line(&self, what: &str) -> String {
        format!(
            "{what:34} sessions {:4}  outcome {:4}  copies {:4} ({:6.2}%)  graphs placed alike {:4}  nodes {:6}/{:6} ({:6.2}%)",
            self.sessions,
            self.outcome,
            self.copies,
            100.0 * self.copies as f64 / self.sessions.max(1) as f64,
            self.placement,
            self.nodes_agree,
            self.nodes,
            100.0 * self.nodes_agree as f64 / self.nodes.max(1) as f64,
        )
    }
}

#[test]
fn realworld_agrees_with_the_oracle() {
    let heldout: BTreeSet<String> = std::fs::read_to_string(fixtures().join("heldout.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| format!("realworld/{}", l.trim()))
        .collect();
    assert!(heldout.len() >= 20, "the held-out half is missing");
    // Quantized models the QDQ work was not tuned on (`tools/realworld/gen.py --unseen`).
    let unseen: BTreeSet<String> = std::fs::read_to_string(fixtures().join("unseen.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| format!("realworld/{}", l.trim()))
        .collect();
    assert!(unseen.len() >= 5, "the unseen quantized models are missing");
    // The real TorchScript decoders (`tests/fixtures/tsdecoders`) have their own truth.
    let tsdecoders = support::repo().join("tests/fixtures/tsdecoders");
    let mut files: Vec<PathBuf> = [fixtures().join("oracle"), tsdecoders.join("oracle")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "real-world oracle fixtures missing");
    assert!(
        files
            .iter()
            .filter(|f| f.starts_with(tsdecoders.join("oracle")))
            .count()
            >= 12,
        "TorchScript decoder oracle fixtures missing"
    );
    // The second unseen set: the stubbed-GPU oracle (8 sessions kinds) and CPU-only truth (12).
    let of_set = |prefix: &str| {
        files
            .iter()
            .filter(|f| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .count()
    };
    assert!(of_set("unseen2-") >= 8, "unseen2 oracle fixtures missing");
    assert!(
        of_set("cpu-unseen2-") >= 12,
        "unseen2 CPU-only fixtures missing"
    );
    // The third unseen set (issue 16): torchvision/timm/tf2onnx/transformers kinds, more
    // quantization modes (`tools/realworld/unseen3.py`).
    assert!(of_set("unseen3-") >= 8, "unseen3 oracle fixtures missing");
    assert!(
        of_set("cpu-unseen3-") >= 12,
        "unseen3 CPU-only fixtures missing"
    );
    // The fourth (issue 16), made after the fixes of 2026-12-02 to measure them: SSD/FCOS/
    // Keypoint R-CNN, ShuffleNetV2, SqueezeNet, Swin, MobileViT, BART, a Conformer block,
    // nn.TransformerEncoder, and their quantized/fp16/ORT-optimised forms (`tools/realworld/unseen4.py`).
    assert!(of_set("unseen4-") >= 8, "unseen4 oracle fixtures missing");
    assert!(
        of_set("cpu-unseen4-") >= 12,
        "unseen4 CPU-only fixtures missing"
    );
    // The fifth (issue 16), measured before any change for it: optimum exports (past KV, merged
    // decoders), ORTOptimizer O1-O4, onnxruntime-genai builder models, ultralytics YOLO, a dynamo
    // EfficientNet, xgboost/catboost, external data (`tools/realworld/unseen5.py`).
    assert!(of_set("unseen5-") >= 8, "unseen5 oracle fixtures missing");
    assert!(
        of_set("cpu-unseen5-") >= 12,
        "unseen5 CPU-only fixtures missing"
    );
    let mut differences = BTreeSet::new();
    let mut summary = Vec::new();
    for file in files {
        let stem = file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".jsonl.gz")
            .to_string();
        let parts: Vec<&str> = stem.split('-').collect();
        let (cpu, set, ort, lvl) = match parts.as_slice() {
            ["cpu", set, ort, lvl] => (true, *set, *ort, *lvl),
            [set, ort, lvl] => (false, *set, *ort, *lvl),
            _ => panic!("unexpected fixture name {stem}"),
        };
        let root = match set {
            "realworld" => fixtures(),
            // Made after the CPU-only transformers, never tuned on (`tools/realworld/unseen.py`).
            "unseen" => fixtures().join("unseen"),
            // Kinds never measured before: dynamo exports, MatMulNBits, 16-bit QDQ, onnxslim,
            // version_converter, skl2onnx, models from PyPI wheels (`tools/realworld/unseen2.py`).
            "unseen2" => fixtures().join("unseen2"),
            // Kinds no earlier set had: torchvision detection, timm, tf2onnx, wav2vec2/T5/DETR/
            // SegFormer, a diffusers UNet, quant_pre_process/float8/DynamicQuantizeLSTM/HQQ,
            // onnxsim, onnxoptimizer, LightGBM (`tools/realworld/unseen3.py`).
            "unseen3" => fixtures().join("unseen3"),
            // Made after the fixes of 2026-12-02, never tuned on (`tools/realworld/unseen4.py`).
            "unseen4" => fixtures().join("unseen4"),
            // Made on 2026-12-02 of kinds none of the others has, never tuned on
            // (`tools/realworld/unseen5.py`).
            "unseen5" => fixtures().join("unseen5"),
            // The public corpus, kept in the repository (`tests/fixtures/corpus`).
            "models" => support::corpus_models(),
            // Keyed `tsdecoders/<file>`.
            "tsdecoders" => support::repo().join("tests/fixtures"),
            _ => panic!("unknown set in {stem}"),
        };
        let table = tables::resolve(ort).unwrap().table();
        let options = Options {
            eps: if cpu {
                vec![Ep::Cpu]
            } else {
                vec![Ep::Cuda, Ep::Cpu]
            },
            level: level(lvl),
            ..Default::default()
        };
        let (mut all, mut held, mut tuned, mut fresh) = (
            Tally::default(),
            Tally::default(),
            Tally::default(),
            Tally::default(),
        );
        for truth in records(&file) {
            let name = truth["model"].as_str().unwrap();
            let (key, path) = match set {
                "realworld" | "unseen" | "unseen2" | "unseen3" | "unseen4" | "unseen5" => {
                    let rel = name.strip_prefix(&format!("{set}/")).unwrap_or(name);
                    (format!("{set}/{rel}"), root.join(rel))
                }
                _ => (name.to_string(), root.join(name)),
            };
            let (mine, names) = match onnx_lint::model::load(&path) {
                Ok(m) => {
                    let p = placer::place(&m, table, &options);
                    (
                        onnx_lint::cli::placement_json(name, &p),
                        p.outcome.placed().then(|| node_names(&p)),
                    )
                }
                Err(e) => (
                    serde_json::json!({"session": "fail", "error": format!("load: {e}"), "memcpy": {}}),
                    None,
                ),
            };
            let same_outcome = outcome(&truth) == outcome(&mine);
            let same_copies = truth["memcpy"] == mine["memcpy"]
                || (truth["memcpy"].as_object().is_none_or(|m| m.is_empty())
                    && mine["memcpy"].as_object().is_none_or(|m| m.is_empty()));
            let (agree, total) = if outcome(&truth) == "ok" && outcome(&mine) == "ok" {
                node_agreement(&truth, &mine)
            } else if outcome(&truth) == "ok" {
                node_agreement(&truth, &serde_json::json!({}))
            } else {
                (0, 0)
            };
            // CPU-only: the session graph's node names too (fusions, inserted Casts).
            let same_names = match (truth["nodes"].as_array(), &names) {
                (Some(t), Some(m)) if cpu && truth["session"] == "ok" => {
                    let mut t: Vec<&str> = t.iter().filter_map(Value::as_str).collect();
                    t.sort_unstable();
                    t == m.iter().map(String::as_str).collect::<Vec<_>>()
                }
                _ => true,
            };
            let same_place = agree == total && same_names;
            if !same_names {
                print_name_diff(&stem, &key, &truth, &path, table, &options);
            }
            for t in [
                Some(&mut all),
                if heldout.contains(&key) {
                    Some(&mut held)
                } else if unseen.contains(&key) {
                    Some(&mut fresh)
                } else if set == "realworld" {
                    Some(&mut tuned)
                } else {
                    None
                },
            ]
            .into_iter()
            .flatten()
            {
                t.sessions += 1;
                t.outcome += u64::from(same_outcome);
                t.copies += u64::from(same_copies);
                t.placement += u64::from(same_place);
                t.nodes_agree += agree;
                t.nodes += total;
            }
            if !(same_outcome && same_copies && same_place) {
                differences.insert(format!("{stem} {key}"));
            }
        }
        summary.push(all.line(&stem));
        if set == "realworld" {
            summary.push(held.line(&format!("  held out ({stem})")));
            summary.push(tuned.line(&format!("  tuned on ({stem})")));
            summary.push(fresh.line(&format!("  unseen ({stem})")));
        }
    }
    eprintln!("{}", summary.join("\n"));
    let known_path = fixtures().join("known-differences.txt");
    if std::env::var_os("ONNX_LINT_BLESS").is_some() {
        let mut text = String::from(
            "# Sessions where the placer and ORT disagree today (see tests/it/realworld.rs).\n",
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
    let fixed: Vec<_> = known.difference(&differences).collect();
    assert!(
        new.is_empty(),
        "{} new differences from ORT:\n{new:#?}",
        new.len()
    );
    assert!(
        fixed.is_empty(),
        "{} known differences now agree; remove them from known-differences.txt:\n{fixed:#?}",
        fixed.len()
    );
}
