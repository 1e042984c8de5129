#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]
//! `cargo bench --bench speed`: `place` against its decode floor and against ONNX Runtime's own
//! (CPU) session creation, measured in the same run, each measurement in its own process so that
//! its peak RSS (`VmHWM`) is its own.
//!
//! Cases (generated into a temporary folder):
//! - decoder-like models of about 1k, 10k, 100k and 1M nodes (norm, QKV projections, the
//!   TorchScript Shape→Gather→Unsqueeze→Concat→Reshape chain, attention and MLP per layer),
//!   weights in the file; ORT must load each (checked when onnxruntime is importable);
//! - a TorchScript-style Llama decoder of about 7k nodes (`tools/probes/gen.py`'s `llama`, 66
//!   layers; needs python with `onnx`), compared whole-process with ORT's session creation;
//! - a model whose 2 GiB of weights live in an external-data file (sparse, never read);
//! - the shapes that made some pass quadratic once (one value read by thousands of nodes, a
//!   node reading thousands, thousands of `If`s to inline, of fusions that name something, of
//!   CPU fallbacks the rules report), each at two sizes four times apart, whole process: a
//!   ratio near 4x is linear growth, 16x quadratic.
//!
//! Python: `$ONNX_LINT_PYTHON`, else `python3`; without `onnxruntime` the ORT columns say so.
//! `ONNX_LINT_BENCH_MAX` (nodes, default 1000000) caps the decoder sizes,
//! `ONNX_LINT_BENCH_ORT_MAX` (default 100000) the sizes ORT is run on (its `DISABLE_ALL` session
//! grows super-linearly: minutes at 100k). Real TorchScript exports of 2,000 nodes or more in
//! `$ONNX_LINT_TSDECODERS` (default `target/tsdecoders`, where `tools/tsexport/export.py target/tsdecoders llama:64 qwen2:32` writes them) are compared whole-process too.
//! `speed --gen NODES PATH` writes the decoder, `speed --shape NAME UNITS PATH` a linearity case,
//! to profile them outside the bench.

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

/// A quantized chain of `blocks` blocks (7 nodes each) as QDQ exporters leave one: each block
/// `Q -> DQ -> Q -> DQ` (a double pair `DoubleQDQPairsRemover` removes), then the DQ read by a
/// `Relu` and a `Neg` (a shared DQ `EnsureUniqueDQForNodeUnit` copies), joined by an `Add`. The
/// QDQ transformers edit it once per block: what they cost per edit shows here.
fn qdq_chain(blocks: usize) -> ModelProto {
    let mut g = GraphProto {
        name: Some("qdq_chain".into()),
        input: vec![vi("x", FLOAT, &["1", "64"])],
        ..Default::default()
    };
    g.initializer.push(TensorProto {
        name: Some("s".into()),
        data_type: Some(FLOAT),
        float_data: vec![0.05],
        ..Default::default()
    });
    g.initializer.push(TensorProto {
        name: Some("z".into()),
        data_type: Some(tensor_proto::DataType::Uint8 as i32),
        int32_data: vec![128],
        ..Default::default()
    });
    let mut prev = "x".to_string();
    for i in 0..blocks {
        let v = |s: &str| format!("{s}_{i}");
        let (q1, d1, q2, d2) = (v("q1"), v("d1"), v("q2"), v("d2"));
        let (a, b, h) = (v("a"), v("b"), v("h"));
        g.node
            .push(node("QuantizeLinear", v("Q1"), &[&prev, "s", "z"], &[&q1]));
        g.node
            .push(node("DequantizeLinear", v("DQ1"), &[&q1, "s", "z"], &[&d1]));
        g.node
            .push(node("QuantizeLinear", v("Q2"), &[&d1, "s", "z"], &[&q2]));
        g.node
            .push(node("DequantizeLinear", v("DQ2"), &[&q2, "s", "z"], &[&d2]));
        g.node.push(node("Relu", v("R"), &[&d2], &[&a]));
        g.node.push(node("Neg", v("N"), &[&d2], &[&b]));
        g.node.push(node("Add", v("A"), &[&a, &b], &[&h]));
        prev = h;
    }
    g.output.push(vi(&prev, FLOAT, &["1", "64"]));
    model(g)
}

/// A graph attribute (an `If`'s branch).
fn graph_attr(name: &str, g: GraphProto) -> onnx_lint::model::proto::AttributeProto {
    use onnx_lint::model::proto::{AttributeProto, attribute_proto::AttributeType};
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(Box::new(g)),
        ..Default::default()
    }
}

/// An int attribute.
fn int_attr(name: &str, v: i64) -> onnx_lint::model::proto::AttributeProto {
    use onnx_lint::model::proto::{AttributeProto, attribute_proto::AttributeType};
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

/// The shapes of the linearity cases, `n` units each (see [`shape`]).
const SHAPES: [(&str, &str); 6] = [
    (
        "fan-in",
        "one value quantized n times, the n DQs summed by one node",
    ),
    ("fan-out", "one value read by n nodes, each a graph output"),
    (
        "shape-concat",
        "n Relu->Shape->Gather->Unsqueeze chains into one Concat",
    ),
    (
        "if-chain",
        "n Ifs on a constant condition in a chain (inlined at `all`)",
    ),
    (
        "relu-clip",
        "n Relu->Clip(max) pairs (FuseReluClip names a zero each)",
    ),
    (
        "cpu-blocks",
        "n Relu->Cast(string)->Cast(float) blocks: two copies and a CPU node each",
    ),
];

/// One linearity case of `n` units: the model, and the `place` level or lint it is timed with.
fn shape(name: &str, n: usize) -> ModelProto {
    let x = vi("x", FLOAT, &["1", "64"]);
    let mut g = GraphProto {
        name: Some(name.into()),
        input: vec![x],
        ..Default::default()
    };
    let scalar = |name: &str, data_type: i32| TensorProto {
        name: Some(name.into()),
        data_type: Some(data_type),
        ..Default::default()
    };
    let mut last = "x".to_string();
    match name {
        "fan-in" => {
            let mut s = scalar("s", FLOAT);
            s.float_data = vec![0.05];
            let mut z = scalar("z", tensor_proto::DataType::Uint8 as i32);
            z.int32_data = vec![128];
            g.initializer.extend([s, z]);
            g.node.push(node("Relu", "R".into(), &["x"], &["r"]));
            let mut dqs = Vec::new();
            for i in 0..n {
                let (q, d) = (format!("q{i}"), format!("d{i}"));
                g.node.push(node(
                    "QuantizeLinear",
                    format!("Q{i}"),
                    &["r", "s", "z"],
                    &[&q],
                ));
                g.node.push(node(
                    "DequantizeLinear",
                    format!("DQ{i}"),
                    &[&q, "s", "z"],
                    &[&d],
                ));
                dqs.push(d);
            }
            let dqs: Vec<&str> = dqs.iter().map(String::as_str).collect();
            g.node.push(node("Sum", "S".into(), &dqs, &["y"]));
            last = "y".into();
        }
        "fan-out" => {
            g.node.push(node("Relu", "R".into(), &["x"], &["r"]));
            for i in 0..n {
                let y = format!("y{i}");
                g.node.push(node("Neg", format!("N{i}"), &["r"], &[&y]));
                g.output.push(vi(&y, FLOAT, &["1", "64"]));
            }
            return model(g);
        }
        "shape-concat" => {
            let mut i0 = scalar("i0", INT64);
            i0.int64_data = vec![0];
            g.initializer.extend([i0, i64_tensor("ax", &[0])]);
            let mut parts = Vec::new();
            for i in 0..n {
                let v = |p: &str| format!("{p}{i}");
                g.node.push(node("Relu", v("R"), &["x"], &[&v("r")]));
                g.node.push(node("Shape", v("S"), &[&v("r")], &[&v("s")]));
                let mut gather = node("Gather", v("G"), &[&v("s"), "i0"], &[&v("g")]);
                gather.attribute.push(int_attr("axis", 0));
                g.node.push(gather);
                g.node
                    .push(node("Unsqueeze", v("U"), &[&v("g"), "ax"], &[&v("u")]));
                parts.push(v("u"));
            }
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let mut concat = node("Concat", "C".into(), &parts, &["c"]);
            concat.attribute.push(int_attr("axis", 0));
            g.node.push(concat);
            g.output.push(vi("c", INT64, &[&n.to_string()]));
            return model(g);
        }
        "if-chain" => {
            let mut cond = scalar("cond", tensor_proto::DataType::Bool as i32);
            cond.int32_data = vec![1];
            g.initializer.push(cond);
            for i in 0..n {
                let branch = |op: &str, tag: &str| {
                    let out = format!("{tag}{i}");
                    GraphProto {
                        name: Some(format!("{tag}_branch{i}")),
                        node: vec![node(op, format!("{op}{i}"), &[&last], &[&out])],
                        output: vec![vi(&out, FLOAT, &["1", "64"])],
                        ..Default::default()
                    }
                };
                let y = format!("i{i}");
                let mut n_if = node("If", format!("If{i}"), &["cond"], &[&y]);
                n_if.attribute
                    .push(graph_attr("then_branch", branch("Relu", "t")));
                n_if.attribute
                    .push(graph_attr("else_branch", branch("Neg", "e")));
                g.node.push(n_if);
                last = y;
            }
        }
        "relu-clip" => {
            let mut mx = scalar("mx", FLOAT);
            mx.float_data = vec![6.0];
            g.initializer.push(mx);
            for i in 0..n {
                let (r, c) = (format!("r{i}"), format!("c{i}"));
                g.node.push(node("Relu", format!("R{i}"), &[&last], &[&r]));
                g.node
                    .push(node("Clip", format!("C{i}"), &[&r, "", "mx"], &[&c]));
                last = c;
            }
        }
        _ => {
            for i in 0..n {
                let v = |p: &str| format!("{p}{i}");
                g.node.push(node("Relu", v("R"), &[&last], &[&v("r")]));
                let mut to_s = node("Cast", v("S"), &[&v("r")], &[&v("s")]);
                to_s.attribute
                    .push(int_attr("to", tensor_proto::DataType::String as i64));
                g.node.push(to_s);
                let mut to_f = node("Cast", v("F"), &[&v("s")], &[&v("f")]);
                to_f.attribute.push(int_attr("to", FLOAT as i64));
                g.node.push(to_f);
                last = v("f");
            }
        }
    }
    g.output.push(vi(&last, FLOAT, &["1", "64"]));
    model(g)
}

/// The whole process's median time of `bin args..` over `runs`, a finding exit (1) included;
/// `None` where it fails (exit 2: a bound it ran past, say).
fn whole(bin: &Path, args: &[&str], runs: usize) -> Option<f64> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(bin).args(args).output().ok()?;
        if !matches!(out.status.code(), Some(0 | 1)) {
            eprintln!(
                "{args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Some(times[times.len() / 2])
}

/// The linearity cases: each shape at `n` and `4n` units, `place` at both levels and the lint.
fn linearity(bin: &Path, dir: &Path, n: usize) {
    println!(
        "\nLinear growth, whole process, median of 3 (ms at {n} units / at {} units = ratio; 4x is \
         linear):",
        4 * n
    );
    println!("| shape | nodes at {n} | place disable | place all | lint |");
    println!("|---|---:|---:|---:|---:|");
    for (name, what) in SHAPES {
        let mut paths = Vec::new();
        let mut nodes = 0;
        for k in [n, 4 * n] {
            let m = shape(name, k);
            if k == n {
                nodes = m.graph.as_ref().map_or(0, |g| g.node.len());
            }
            let p = dir.join(format!("{name}-{k}.onnx"));
            if std::fs::write(&p, m.encode_to_vec()).is_err() {
                return;
            }
            paths.push(p.to_string_lossy().to_string());
        }
        let cell = |args: &dyn Fn(&str) -> Vec<String>| {
            let t: Vec<Option<f64>> = paths
                .iter()
                .map(|p| {
                    let a = args(p);
                    let a: Vec<&str> = a.iter().map(String::as_str).collect();
                    whole(bin, &a, 3)
                })
                .collect();
            match (t[0], t[1]) {
                (Some(a), Some(b)) => {
                    format!("{:.0} / {:.0} = {:.1}x", a * 1e3, b * 1e3, b / a)
                }
                _ => "failed".into(),
            }
        };
        let place = |level: &'static str| {
            move |p: &str| {
                [
                    "place",
                    p,
                    "--ort",
                    "1.31.1",
                    "--opt-level",
                    level,
                    "--format",
                    "json",
                ]
                .map(String::from)
                .to_vec()
            }
        };
        let lint = |p: &str| {
            [p, "--ort", "1.31.1", "--format", "json"]
                .map(String::from)
                .to_vec()
        };
        println!(
            "| {name} ({what}) | {nodes} | {} | {} | {} |",
            cell(&place("disable")),
            cell(&place("all")),
            cell(&lint)
        );
    }
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

/// Child mode: `speed --child load|decode|place PATH [ORT LEVEL]` prints `seconds peak_kib`.
fn child(args: &[String]) {
    let path = PathBuf::from(&args[1]);
    let start = Instant::now();
    if args[0] == "decode" {
        let proto = onnx_lint::model::read_model_proto(&path).expect("bench model decodes");
        std::hint::black_box(&proto);
        println!("{} {}", start.elapsed().as_secs_f64(), peak_kib());
        return;
    }
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
        // As the `place` command does it: the session built straight from the file.
        let p = onnx_lint::placer::place_file(&path, table, &options).expect("bench model loads");
        // A model the placer refuses is not a placement to time.
        assert!(
            p.outcome == onnx_lint::placer::Outcome::Ok,
            "the bench model must place: {:?}",
            p.outcome
        );
        std::hint::black_box(&p);
        // Load included: the time from the file to the placement, as `place` spends it.
        println!("{} {}", start.elapsed().as_secs_f64(), peak_kib());
        return;
    }
    let m = onnx_lint::model::load(&path).expect("bench model loads");
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

/// ORT's session creation (CPU provider), in-process time of `InferenceSession(...)` alone and
/// of the whole python process, with the process's peak RSS: `(in_process, whole, peak_kib)`.
/// `None` (with the reason printed) when python or onnxruntime is missing or ORT refuses it.
fn ort_session(python: &str, model: &str, level: &str, runs: usize) -> Option<(f64, f64, u64)> {
    let ort_level = if level == "disable" {
        "ORT_DISABLE_ALL"
    } else {
        "ORT_ENABLE_ALL"
    };
    let script = format!(
        "import time, resource, onnxruntime as ort\n\
         so = ort.SessionOptions()\n\
         so.graph_optimization_level = ort.GraphOptimizationLevel.{ort_level}\n\
         t = time.perf_counter()\n\
         ort.InferenceSession({model:?}, so, providers=['CPUExecutionProvider'])\n\
         print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    );
    let mut inner = Vec::new();
    let mut whole = Vec::new();
    let mut peak = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(python).args(["-c", &script]).output().ok()?;
        let elapsed = t.elapsed().as_secs_f64();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            println!(
                "       ORT session creation failed ({level}): {}",
                err.lines().last().unwrap_or("")
            );
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace();
        inner.push(it.next()?.parse::<f64>().ok()?);
        peak = peak.max(it.next()?.parse::<u64>().ok()?);
        whole.push(elapsed);
    }
    inner.sort_by(f64::total_cmp);
    whole.sort_by(f64::total_cmp);
    Some((inner[inner.len() / 2], whole[whole.len() / 2], peak))
}

/// `place` against ORT's session creation on `model`, whole process against whole process
/// (median of 7 and 5 runs), at `disable` and `all`.
fn side_by_side(bin: &Path, python: &str, ort: bool, label: &str, model: &Path) {
    const ORT_RELEASE: &str = "1.31.1";
    let l = model.to_string_lossy().to_string();
    let nodes = onnx_lint::model::load(model).map_or(0, |m| m.node_count());
    for level in ["disable", "all"] {
        let ours = peer(
            &[
                bin.to_str().unwrap_or_default(),
                "place",
                &l,
                "--ort",
                ORT_RELEASE,
                "--opt-level",
                level,
                "--format",
                "json",
            ],
            7,
        );
        let theirs = if ort {
            ort_session(python, &l, level, 5)
        } else {
            None
        };
        match (ours, theirs) {
            (Some(a), Some((inner, whole, _))) => println!(
                "place  {label} ({nodes} nodes), level {level}: cargo-onnx-lint {:.1} ms per \
                 process vs ORT session creation {:.0} ms per process ({:.0} ms in process) -> \
                 {:.0}x ({:.0}x in process)",
                a * 1e3,
                whole * 1e3,
                inner * 1e3,
                whole / a,
                inner / a
            ),
            (Some(a), None) => println!(
                "place  {label} ({nodes} nodes), level {level}: {:.1} ms per process (no ORT)",
                a * 1e3
            ),
            _ => println!("place  {label}: measuring failed"),
        }
    }
}

/// The checkout the bench was built from, or, when the bench binary was carried to another
/// machine (the device runs), the current folder: `speed` is then run from a copy of the
/// repository holding `tools/probes` and `target/release/cargo-onnx-lint`.
fn repo_root() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR"));
    if built.join("Cargo.toml").is_file() {
        built.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_else(|_| built.to_path_buf())
    }
}

fn python() -> String {
    std::env::var("ONNX_LINT_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn has_module(python: &str, module: &str) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    onnx_lint::alloc::tune();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    // `speed --shape NAME UNITS PATH`: write a linearity case, to profile it outside the bench.
    if args.first().map(String::as_str) == Some("--shape") {
        let units: usize = args[2].parse().expect("--shape NAME UNITS PATH");
        std::fs::write(&args[3], shape(&args[1], units).encode_to_vec()).expect("write shape");
        return;
    }
    // `speed --gen NODES PATH`: write the bench's decoder, to profile it outside the bench.
    if args.first().map(String::as_str) == Some("--gen") {
        let nodes: usize = args[1].parse().expect("--gen NODES PATH");
        std::fs::write(&args[2], decoder(nodes).encode_to_vec()).expect("write decoder");
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = tempfile::tempdir().expect("tempdir");
    let python = python();
    let ort = has_module(&python, "onnxruntime");
    const ORT_RELEASE: &str = "1.31.1";
    println!(
        "cargo-onnx-lint speed bench: median of runs, each in its own process; peak = VmHWM (ORT: \
         ru_maxrss); place = load + placement in process; ORT = InferenceSession(...) in process \
         (CPU provider, python {python})"
    );
    if !ort {
        println!("(onnxruntime is not importable by {python}: the ORT columns are skipped)");
    }
    let max: usize = std::env::var("ONNX_LINT_BENCH_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let ort_max: usize = std::env::var("ONNX_LINT_BENCH_ORT_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!(
        "| nodes | MiB | decode floor ms | place disable ms (peak MiB) | place all ms (peak MiB) | \
         ORT disable ms | ORT all ms | ORT/place disable | ORT/place all | place all / floor |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut per_node: Vec<(usize, f64)> = Vec::new();
    for target in [1_000usize, 10_000, 100_000, 1_000_000] {
        if target > max {
            continue;
        }
        let path = dir.path().join(format!("decoder-{target}.onnx"));
        let m = decoder(target);
        let nodes = m.graph.as_ref().map_or(0, |g| g.node.len());
        std::fs::write(&path, m.encode_to_vec()).expect("write decoder");
        drop(m);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let p = path.to_string_lossy().to_string();
        // Three runs at every size: one run of the 1M decoder on a shared machine (the device's
        // CPU time for the same work varies by a third from one run to the next) says little.
        let runs = 3;
        let floor = measure(&exe, &["decode", &p], runs);
        let dis = measure(&exe, &["place", &p, ORT_RELEASE, "disable"], runs);
        let all = measure(&exe, &["place", &p, ORT_RELEASE, "all"], runs);
        // ORT at 1M nodes takes minutes: the ratio is measured up to `ONNX_LINT_BENCH_ORT_MAX`.
        let (od, oa) = if ort && target <= ort_max {
            let r = if target >= 100_000 { 1 } else { 3 };
            (
                ort_session(&python, &p, "disable", r),
                ort_session(&python, &p, "all", r),
            )
        } else {
            (None, None)
        };
        let ms =
            |x: Option<(f64, u64)>| x.map_or("–".to_string(), |(t, _)| format!("{:.1}", t * 1e3));
        let with_peak = |x: Option<(f64, u64)>| {
            x.map_or("–".to_string(), |(t, k)| {
                format!("{:.1} ({:.0})", t * 1e3, mib(k))
            })
        };
        let ratio = |o: Option<(f64, f64, u64)>, p: Option<(f64, u64)>| match (o, p) {
            (Some((o, _, _)), Some((p, _))) => format!("{:.1}x", o / p),
            _ => "–".into(),
        };
        println!(
            "| {nodes} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |",
            size as f64 / 1048576.0,
            ms(floor),
            with_peak(dis),
            with_peak(all),
            od.map_or("–".into(), |(t, _, _)| format!("{:.0}", t * 1e3)),
            oa.map_or("–".into(), |(t, _, _)| format!("{:.0}", t * 1e3)),
            ratio(od, dis),
            ratio(oa, all),
            match (all, floor) {
                (Some((a, _)), Some((f, _))) => format!("{:.1}x", a / f),
                _ => "–".into(),
            },
        );
        if let Some((t, _)) = all {
            per_node.push((nodes, t / nodes as f64 * 1e9));
        }
        let _ = std::fs::remove_file(&path);
    }
    let growth: Vec<String> = per_node
        .iter()
        .map(|(n, ns)| format!("{n}: {ns:.0} ns/node"))
        .collect();
    println!(
        "place all, cost per node (linear growth keeps it flat): {}",
        growth.join(", ")
    );

    // A TorchScript-style decoder, whole process against whole process.
    let probes = repo_root().join("tools/probes");
    let llama = dir.path().join("llama66.ts.op17.onnx");
    let script = format!(
        "import sys; sys.argv = ['gen']; sys.path.insert(0, {:?}); import gen; \
         gen.llama({:?}, opset=17, layers=66)",
        probes.to_string_lossy(),
        llama.to_string_lossy()
    );
    let generated = Command::new(&python)
        .args(["-c", &script])
        .output()
        .is_ok_and(|o| o.status.success());
    let bin = repo_root().join("target/release/cargo-onnx-lint");
    if !bin.is_file() {
        println!(
            "(whole-process side by side skipped: needs a release build: cargo build --release)"
        );
    } else {
        if generated {
            side_by_side(
                &bin,
                &python,
                ort,
                "TorchScript-style Llama (gen.py)",
                &llama,
            );
        } else {
            println!(
                "(TorchScript-style decoder skipped: {python} cannot run tools/probes/gen.py)"
            );
        }
        // A quantized chain of 14,000 nodes, which the QDQ transformers edit 4,000 times.
        let chain = dir.path().join("qdq_chain.onnx");
        if std::fs::write(&chain, qdq_chain(2_000).encode_to_vec()).is_ok() {
            side_by_side(&bin, &python, ort, "QDQ chain (2,000 blocks)", &chain);
        }
        // Real TorchScript exports (torch.onnx.export, dynamo=False) of several thousand nodes:
        // `$ONNX_LINT_TSDECODERS` (default target/tsdecoders), when it exists.
        let ts =
            std::env::var("ONNX_LINT_TSDECODERS").unwrap_or_else(|_| "target/tsdecoders".into());
        let mut exports: Vec<PathBuf> = std::fs::read_dir(&ts)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
                    .collect()
            })
            .unwrap_or_default();
        exports.sort();
        let mut any = false;
        for p in exports {
            let nodes = onnx_lint::model::load(&p).map_or(0, |m| m.node_count());
            if nodes >= 2_000 {
                any = true;
                let name = p.file_name().map(|n| n.to_string_lossy().to_string());
                side_by_side(&bin, &python, ort, &name.unwrap_or_default(), &p);
            }
        }
        if !any {
            println!("(no real TorchScript export of 2,000 nodes or more in {ts})");
        }
    }

    if bin.is_file() {
        linearity(&bin, dir.path(), 5_000);
    }

    let ext = external(dir.path());
    let ext_s = ext.to_string_lossy().to_string();
    if let Some((t, kib)) = measure(&exe, &["load", &ext_s], 5) {
        println!(
            "load   2 GiB external-data model: {:.2} ms, peak {:.1} MiB (weights never read)",
            t * 1e3,
            mib(kib)
        );
    }
}
