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

/// `../shared` beside the repository, when this checkout has it.
pub fn shared() -> Option<PathBuf> {
    let p = repo().join("../shared");
    p.is_dir().then_some(p)
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
