#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]
//! `cargo bench --bench speed`: load time and peak memory, placement time, and the ratio against
//! peers measured in the same run.
//!
//! Cases (generated into a temporary folder):
//! - a decoder-like model with 100k nodes (5,000 layers of norm, QKV projections, a Shape-fed
//!   Reshape chain, attention and MLP), weights stored in the file;
//! - a model whose 2 GiB of weights live in an external-data file (sparse, never read).
//!
//! Peers, when present on the machine: `python3 -c 'onnx.load(..., load_external_data=False)'`
//! for loading, and ORT's own session creation through the oracle
//! (`../shared/oracle/ortstub.py place`) for placement. Each measurement runs in a child process
//! so that its peak RSS (`VmHWM`) is its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use onnx_lint::model::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, tensor_proto, tensor_shape_proto, type_proto,
};
use prost::Message;

/// The allocator the binary uses (`src/main.rs`), so that the in-process placement measured here
/// is the one users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FLOAT: i32 = tensor_proto::DataType::Float as i32;
const INT64: i32 = tensor_proto::DataType::Int64 as i32;

fn vi(name: &str, elem: i32, dims: &[&str]) -> ValueInfoProto {
    use tensor_shape_proto::dimension::Value;
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|d| tensor_shape_proto::Dimension {
                            value: Some(match d.parse::<i64>() {
                                Ok(v) => Value::DimValue(v),
                                Err(_) => Value::DimParam((*d).into()),
                            }),
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

fn node(op: &str, name: String, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn f32_tensor(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        raw_data: Some(vec![0u8; (n * 4) as usize].into()),
        ..Default::default()
    }
}

fn i64_tensor(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![values.len() as i64],
        data_type: Some(INT64),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// A decoder-like model with about `nodes` nodes.
fn decoder(nodes: usize) -> ModelProto {
    const H: i64 = 16;
    let mut g = GraphProto {
        name: Some("decoder".into()),
        input: vec![vi("x", FLOAT, &["batch", "seq", "16"])],
        ..Default::default()
    };
    g.initializer.push(i64_tensor("axes0", &[0]));
    // A scalar index: `Gather` gives a scalar, `Unsqueeze` a 1-D `[batch]`, and `Concat` joins
    // three 1-D tensors (with `[0]` the Unsqueeze gave 2-D and ORT refused the model at load).
    g.initializer.push(TensorProto {
        dims: Vec::new(),
        ..i64_tensor("idx0", &[0])
    });
    g.initializer.push(i64_tensor("idx1", &[1]));
    g.initializer.push(i64_tensor("heads", &[2, 8]));
    g.initializer.push(i64_tensor("flat", &[0, 0, 16]));
    let mut x = "x".to_string();
    let per_layer = 22;
    for l in 0..nodes / per_layer {
        let p = |s: &str| format!("l{l}.{s}");
        for w in ["wq", "wk", "wv", "wo", "w1", "w2"] {
            g.initializer.push(f32_tensor(&p(w), &[H, H]));
        }
        let n = |op: &str, ins: &[&str], outs: &[&str]| {
            node(op, format!("l{l}/{op}_{}", outs[0]), ins, outs)
        };
        let (mean, diff, sq, var, std, norm) =
            (p("mean"), p("diff"), p("sq"), p("var"), p("std"), p("norm"));
        g.node.push(n("ReduceMean", &[&x], &[&mean]));
        g.node.push(n("Sub", &[&x, &mean], &[&diff]));
        g.node.push(n("Mul", &[&diff, &diff], &[&sq]));
        g.node.push(n("ReduceMean", &[&sq], &[&var]));
        g.node.push(n("Sqrt", &[&var], &[&std]));
        g.node.push(n("Div", &[&diff, &std], &[&norm]));
        let (q, k, v) = (p("q"), p("k"), p("v"));
        g.node.push(n("MatMul", &[&norm, &p("wq")], &[&q]));
        g.node.push(n("MatMul", &[&norm, &p("wk")], &[&k]));
        g.node.push(n("MatMul", &[&norm, &p("wv")], &[&v]));
        // The TorchScript shape chain.
        let (s, b, bu, shape, q4) = (p("shape"), p("b"), p("bu"), p("shape4"), p("q4"));
        g.node.push(n("Shape", &[&q], &[&s]));
        g.node.push(n("Gather", &[&s, "idx0"], &[&b]));
        g.node.push(n("Unsqueeze", &[&b, "axes0"], &[&bu]));
        let mut concat = n("Concat", &[&bu, "idx1", "heads"], &[&shape]);
        // `axis` is required: ORT refuses a Concat without it at load.
        concat
            .attribute
            .push(onnx_lint::model::proto::AttributeProto {
                name: Some("axis".into()),
                i: Some(0),
                r#type: Some(onnx_lint::model::proto::attribute_proto::AttributeType::Int as i32),
                ..Default::default()
            });
        g.node.push(concat);
        g.node.push(n("Reshape", &[&q, &shape], &[&q4]));
        let (qf, att, probs, ctx, o, res, h1, a1, out) = (
            p("qf"),
            p("att"),
            p("probs"),
            p("ctx"),
            p("o"),
            p("res"),
            p("h1"),
            p("a1"),
            p("out"),
        );
        g.node.push(n("Reshape", &[&q4, "flat"], &[&qf]));
        g.node.push(n("MatMul", &[&qf, &k], &[&att]));
        g.node.push(n("Softmax", &[&att], &[&probs]));
        g.node.push(n("MatMul", &[&probs, &v], &[&ctx]));
        g.node.push(n("MatMul", &[&ctx, &p("wo")], &[&o]));
        g.node.push(n("Add", &[&x, &o], &[&res]));
        g.node.push(n("MatMul", &[&res, &p("w1")], &[&h1]));
        g.node.push(n("Relu", &[&h1], &[&a1]));
        g.node.push(n("MatMul", &[&a1, &p("w2")], &[&out]));
        x = out;
    }
    g.output.push(vi(&x, FLOAT, &["batch", "seq", "16"]));
    model(g)
}

fn model(g: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(g),
        ..Default::default()
    }
}

/// A small graph whose weights (2 GiB in 8 tensors) live in `weights.bin`, a sparse file.
fn external(dir: &Path) -> PathBuf {
    let size: u64 = 2 << 30;
    let file = std::fs::File::create(dir.join("weights.bin")).expect("create weights.bin");
    file.set_len(size).expect("sparse weights.bin");
    let chunk = size / 8;
    let mut g = GraphProto {
        name: Some("big".into()),
        input: vec![vi("x", FLOAT, &["n", "8192"])],
        ..Default::default()
    };
    let mut x = "x".to_string();
    for i in 0..8u64 {
        let w = format!("w{i}");
        g.initializer.push(TensorProto {
            name: Some(w.clone()),
            dims: vec![8192, (chunk / 4 / 8192) as i64],
            data_type: Some(FLOAT),
            data_location: Some(tensor_proto::DataLocation::External as i32),
            external_data: [
                ("location", "weights.bin".to_string()),
                ("offset", (i * chunk).to_string()),
                ("length", chunk.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| StringStringEntryProto {
                key: Some(k.into()),
                value: Some(v),
            })
            .collect(),
            ..Default::default()
        });
        let y = format!("y{i}");
        g.node
            .push(node("MatMul", format!("mm{i}"), &[&x, &w], &[&y]));
        x = y;
    }
    g.output.push(vi(&x, FLOAT, &["n", "8192"]));
    let path = dir.join("external.onnx");
    std::fs::write(&path, model(g).encode_to_vec()).expect("write external.onnx");
    path
}

/// Peak resident memory of this process, in KiB.
fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Child mode: `speed --child load|place PATH [ORT LEVEL]` prints `seconds peak_kib`.
fn child(args: &[String]) {
    let path = PathBuf::from(&args[1]);
    let start = Instant::now();
    let m = onnx_lint::model::load(&path).expect("bench model loads");
    if args[0] == "place" {
        let table = onnx_lint::tables::resolve(&args[2])
            .expect("release")
            .table();
        let level = match args[3].as_str() {
            "disable" => onnx_lint::placer::OptLevel::Disable,
            _ => onnx_lint::placer::OptLevel::All,
        };
        let options = onnx_lint::placer::Options {
            level,
            ..Default::default()
        };
        let t = Instant::now();
        let p = onnx_lint::placer::place(&m, table, &options);
        // A model the placer refuses is not a placement to time.
        assert!(
            p.outcome == onnx_lint::placer::Outcome::Ok,
            "the bench model must place: {:?}",
            p.outcome
        );
        std::hint::black_box(&p);
        println!("{} {}", t.elapsed().as_secs_f64(), peak_kib());
        return;
    }
    std::hint::black_box(&m);
    println!("{} {}", start.elapsed().as_secs_f64(), peak_kib());
}

fn measure(exe: &Path, args: &[&str], runs: usize) -> Option<(f64, u64)> {
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..runs {
        let out = Command::new(exe).arg("--child").args(args).output().ok()?;
        if !out.status.success() {
            eprintln!(
                "measuring {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace();
        times.push(it.next()?.parse::<f64>().ok()?);
        peak = peak.max(it.next()?.parse::<u64>().ok()?);
    }
    times.sort_by(f64::total_cmp);
    Some((times[times.len() / 2], peak))
}

fn peer(cmd: &[&str], runs: usize) -> Option<f64> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let status = Command::new(cmd[0]).args(&cmd[1..]).output().ok()?;
        if !status.status.success() {
            return None;
        }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Some(times[times.len() / 2])
}

fn main() {
    onnx_lint::alloc::tune();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = tempfile::tempdir().expect("tempdir");
    let dec = dir.path().join("decoder-100k.onnx");
    let m = decoder(100_000);
    let nodes = m.graph.as_ref().map_or(0, |g| g.node.len());
    std::fs::write(&dec, m.encode_to_vec()).expect("write decoder");
    let dec_size = std::fs::metadata(&dec).map(|m| m.len()).unwrap_or(0);
    let ext = external(dir.path());
    let (dec_s, ext_s) = (
        dec.to_string_lossy().to_string(),
        ext.to_string_lossy().to_string(),
    );

    println!(
        "cargo-onnx-lint speed bench (median of runs; peak = max VmHWM of the measuring process)"
    );
    if let Some((t, kib)) = measure(&exe, &["load", &dec_s], 5) {
        println!(
            "load   decoder, {nodes} nodes, {:.1} MiB file: {:.1} ms, peak {:.1} MiB",
            dec_size as f64 / 1048576.0,
            t * 1e3,
            kib as f64 / 1024.0
        );
        let py = format!("import onnx; onnx.load('{dec_s}', load_external_data=False)");
        if let Some(pt) = peer(&["python3", "-c", &py], 3) {
            println!(
                "       peer: python onnx.load {:.1} ms (process included) -> {:.1}x",
                pt * 1e3,
                pt / t
            );
        }
    }
    if let Some((t, kib)) = measure(&exe, &["load", &ext_s], 5) {
        println!(
            "load   2 GiB external-data model: {:.2} ms, peak {:.1} MiB (weights never read)",
            t * 1e3,
            kib as f64 / 1024.0
        );
    }
    for level in ["disable", "all"] {
        if let Some((t, kib)) = measure(&exe, &["place", &dec_s, "1.24.4", level], 3) {
            println!(
                "place  decoder, {nodes} nodes, ORT 1.24.4, level {level}: {:.0} ms, peak {:.1} MiB",
                t * 1e3,
                kib as f64 / 1024.0
            );
        }
    }
    // Against ORT's own session creation (the oracle), on real models, in the same run.
    let oracle = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/oracle/ortstub.py");
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/cargo-onnx-lint");
    let corpus = [
        "examples/gemma4-decoder.op24.onnx",
        "examples/bert.torchscript.op17.onnx",
    ];
    if oracle.is_file() && bin.is_file() {
        for model in corpus {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(model)
                .to_string_lossy()
                .to_string();
            let ours = peer(
                &[
                    bin.to_str().unwrap_or_default(),
                    "place",
                    &path,
                    "--ort",
                    "1.24.4",
                    "--format",
                    "json",
                ],
                5,
            );
            let ort = peer(
                &[
                    "python3",
                    oracle.to_str().unwrap_or_default(),
                    "place",
                    "1.24.4",
                    &path,
                    "--level",
                    "all",
                ],
                3,
            );
            if let (Some(a), Some(b)) = (ours, ort) {
                println!(
                    "place  {model}: cargo-onnx-lint {:.1} ms vs ORT session creation (oracle) {:.0} ms -> {:.0}x",
                    a * 1e3,
                    b * 1e3,
                    b / a
                );
            }
        }
    } else {
        println!(
            "(ORT peer skipped: needs ../shared/oracle and a release build: cargo build --release)"
        );
    }
}
