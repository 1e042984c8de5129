//! Builders for small models and a runner for the real binary. Shared by the test modules.

use std::path::{Path, PathBuf};
use std::process::Command;

use onnx_lint::model::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, tensor_proto, tensor_shape_proto, type_proto,
};
use prost::Message;

pub const FLOAT: i32 = tensor_proto::DataType::Float as i32;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn value(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                            denotation: None,
                        })
                        .collect(),
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A model with graph `g` at ai.onnx opset 17, IR 8.
pub fn model(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = Relu(x)` on float[2, 3].
pub fn relu_model() -> ModelProto {
    model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value("x", FLOAT, &[2, 3])],
        vec![value("y", FLOAT, &[2, 3])],
    )
}

/// An initializer whose data lives in `location` at `offset`/`length`.
pub fn external_tensor(
    name: &str,
    dims: &[i64],
    location: &str,
    offset: u64,
    length: Option<u64>,
) -> TensorProto {
    let mut entries = vec![
        StringStringEntryProto {
            key: Some("location".into()),
            value: Some(location.into()),
        },
        StringStringEntryProto {
            key: Some("offset".into()),
            value: Some(offset.to_string()),
        },
    ];
    if let Some(l) = length {
        entries.push(StringStringEntryProto {
            key: Some("length".into()),
            value: Some(l.to_string()),
        });
    }
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        data_location: Some(tensor_proto::DataLocation::External as i32),
        external_data: entries,
        ..Default::default()
    }
}

/// `y = Add(x, w)` where `w` is the given initializer of float[dims].
pub fn model_with_initializer(w: TensorProto) -> ModelProto {
    let dims = w.dims.clone();
    let mut m = model(
        vec![node("Add", "add", &["x", "w"], &["y"])],
        vec![value("x", FLOAT, &dims)],
        vec![value("y", FLOAT, &dims)],
    );
    if let Some(g) = m.graph.as_mut() {
        g.initializer.push(w);
    }
    m
}

pub fn write(dir: &Path, name: &str, m: &ModelProto) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, m.encode_to_vec()).expect("write test model");
    p
}

/// The result of running the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cargo-onnx-lint onnx-lint ARGS` (the way cargo runs it) in `dir`, without colour and at
/// a fixed width so output is deterministic.
pub fn run_in(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
        .arg("onnx-lint")
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("ONNX_LINT_WIDTH", "100")
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("run cargo-onnx-lint");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The public corpus (mobius-onnx decoders, torch exports, the `onnx` package's model-zoo test
/// graphs) kept in this repository: see `tests/fixtures/corpus/README.md`.
pub fn corpus_models() -> PathBuf {
    repo().join("tests/fixtures/corpus/models")
}

/// `tests/fixtures/corpus/SHA256SUMS`: model path (relative to `models/`) to its SHA-256.
pub fn corpus_manifest() -> std::collections::BTreeMap<String, String> {
    let path = repo().join("tests/fixtures/corpus/SHA256SUMS");
    let text = std::fs::read_to_string(&path).expect("tests/fixtures/corpus/SHA256SUMS");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (digest, name) = l.split_once("  ").expect("`DIGEST  NAME` lines");
            (name.to_string(), digest.to_string())
        })
        .collect()
}

/// Whether this run is CI's (`CI=true`), where a data source the tests cannot find is a failure
/// rather than something reported and left out.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Reports that `what` could not run because `why`. Written to the process's stderr directly,
/// past libtest's output capture, so that `cargo test` shows it; under `CI=true` it fails the
/// test instead.
pub fn not_run(what: &str, why: &str) {
    use std::io::Write;
    assert!(
        !ci(),
        "{what} could not run under CI=true: {why} (see README, Testing)"
    );
    let _ = writeln!(std::io::stderr().lock(), "NOT RUN: {what}: {why}");
}

/// Prints `text` past libtest's capture (a summary worth seeing in every `cargo test`).
pub fn report(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The Python the tests use for what needs Python (the node-test corpus, a CPU `onnxruntime`):
/// `ONNX_LINT_PYTHON`, else the clone's `.venv` (made by `.ci/run`), else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("ONNX_LINT_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    for venv in [".venv/bin/python", ".venv/Scripts/python.exe"] {
        let p = repo().join(venv);
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("python3")
}

/// The 1884 ONNX backend node-test models whose ORT answers are `tests/fixtures/oracle/node-*`:
/// the folder `ONNX_LINT_NODE_CORPUS` names, else written once (per target folder) by
/// `tools/corpus/node_corpus.py` with [`python`], which needs the pinned `onnx==1.23.2`.
/// `Err` says why there is none.
pub fn node_corpus() -> Result<PathBuf, String> {
    static CORPUS: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(find_node_corpus).clone()
}

fn find_node_corpus() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("ONNX_LINT_NODE_CORPUS").filter(|p| !p.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.is_dir() {
            Ok(dir)
        } else {
            Err(format!(
                "ONNX_LINT_NODE_CORPUS={} is not a folder",
                dir.display()
            ))
        };
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("onnx-node-corpus-1.23.2");
    let python = python();
    let out = Command::new(&python)
        .arg(repo().join("tools/corpus/node_corpus.py"))
        .arg(&dir)
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} ({e}); set ONNX_LINT_PYTHON to a Python with onnx==1.23.2, \
                 or run .ci/run once",
                python.display()
            )
        })?;
    if out.status.success() {
        Ok(dir)
    } else {
        Err(format!(
            "tools/corpus/node_corpus.py with {} failed: {}; set ONNX_LINT_PYTHON to a Python \
             with onnx==1.23.2 (.ci/run makes one in .venv)",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Places a model written in the ONNX text syntax at one release and level; the session must
/// load (`Outcome::Ok`).
pub fn place_text(
    text: &str,
    ort: &str,
    level: onnx_lint::placer::OptLevel,
    eps: Vec<onnx_lint::tables::Ep>,
) -> onnx_lint::placer::Placement {
    let p = place_text_any(text, ort, level, eps);
    assert_eq!(p.outcome, onnx_lint::placer::Outcome::Ok, "{ort} {level:?}");
    p
}

/// [`place_text`] whatever the outcome.
pub fn place_text_any(
    text: &str,
    ort: &str,
    level: onnx_lint::placer::OptLevel,
    eps: Vec<onnx_lint::tables::Ep>,
) -> onnx_lint::placer::Placement {
    use onnx_lint::placer::{self, Options};
    let proto = onnx_lint::model::text::parse_model(text).unwrap();
    let model =
        onnx_lint::model::Model::from_proto(std::path::Path::new("m.onnx"), 0, proto).unwrap();
    let table = onnx_lint::tables::resolve(ort).unwrap().table();
    placer::place(
        &model,
        table,
        &Options {
            eps,
            level,
            ..Default::default()
        },
    )
}

/// The names of a placement's live nodes, every graph (what ORT's saved session graph is
/// compared by).
pub fn live_node_names(p: &onnx_lint::placer::Placement) -> std::collections::BTreeSet<String> {
    p.session
        .graphs
        .iter()
        .flat_map(|g| g.live_nodes())
        .map(|(_, n)| n.name.to_string())
        .collect()
}

/// A truth record's `nodes` (the names of ORT's saved session graph).
pub fn truth_node_names(nodes: &serde_json::Value) -> std::collections::BTreeSet<String> {
    nodes
        .as_array()
        .expect("a truth record without `nodes`")
        .iter()
        .map(|n| n.as_str().expect("a node name").to_string())
        .collect()
}
