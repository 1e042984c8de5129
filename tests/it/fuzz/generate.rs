//! A structure-aware generator of ONNX models: valid protobuf, ops drawn from the op schemas
//! the bundled tables carry (with their attribute names), random attributes, shapes and
//! constants, `If`/`Loop`/`Scan` subgraphs, model-local functions (recursive ones too) and
//! external-data entries. Values are biased towards what breaks code: extreme integers,
//! shape-computation ops, mismatched data lengths, dangling and duplicate names.

use onnx_lint::model::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
    attribute_proto::AttributeType, tensor_shape_proto, type_proto,
};
use onnx_lint::tables::{self, attributes::SchemaAttributes};

use super::rng::Rng;

/// One op the generator may emit: (domain, name, since, inputs min..max, outputs min..max).
#[derive(Clone)]
struct Op {
    domain: String,
    name: String,
    since: i64,
    inputs: (usize, usize),
    outputs: (usize, usize),
}

/// Ops that exercise the constant evaluator, shape inference and the optimisers.
const HOT: &[&str] = &[
    "Constant",
    "ConstantOfShape",
    "Shape",
    "Size",
    "Gather",
    "Concat",
    "Reshape",
    "Flatten",
    "Slice",
    "Unsqueeze",
    "Squeeze",
    "Clip",
    "Range",
    "Expand",
    "Tile",
    "Transpose",
    "Cast",
    "CastLike",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Equal",
    "Less",
    "Where",
    "Sum",
    "Max",
    "Min",
    "Not",
    "If",
    "Loop",
    "ReduceSum",
    "ReduceMean",
    "ReduceProd",
    "MatMul",
    "Identity",
    "CumSum",
    "Softmax",
    "LayerNormalization",
    "Dropout",
    "Relu",
    "NonZero",
    "Split",
];

pub struct Gen {
    rng: Rng,
    ops: Vec<Op>,
    attrs: &'static SchemaAttributes,
    opset: i64,
    functions: Vec<String>,
    fresh: usize,
    /// One model in eight breaks structure (dangling inputs, values defined twice, escaping
    /// external data): those mostly fail to load, so the rest stay loadable.
    chaos: bool,
}

/// The ops of the newest bundled release's schemas (built once per process).
fn all_ops() -> &'static [Op] {
    static OPS: std::sync::OnceLock<Vec<Op>> = std::sync::OnceLock::new();
    OPS.get_or_init(|| {
        tables::newest()
            .table()
            .iter_schemas()
            .map(|s| Op {
                domain: s.domain.clone(),
                name: s.name.clone(),
                since: s.since,
                inputs: (s.min_inputs, s.max_inputs),
                outputs: (s.min_outputs, s.max_outputs),
            })
            .collect()
    })
}

const ELEMS: &[i32] = &[
    1, 1, 1, 7, 7, 7, 6, 9, 10, 16, 11, 2, 3, 5, 12, 13, 8, 0, 99, -3,
];

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            ops: all_ops().to_vec(),
            attrs: tables::newest().attributes(),
            opset: 17,
            functions: Vec::new(),
            fresh: 0,
            chaos: false,
        }
    }

    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    pub fn model(&mut self) -> ModelProto {
        let max = tables::newest().table().max_opset("ai.onnx").unwrap_or(24);
        self.chaos = self.rng.chance(1, 8);
        self.opset = match self.rng.below(10) {
            0 => self.rng.range(-2, 30),
            1 => max + 1,
            2..=4 => max,
            _ => self.rng.range(7, max),
        };
        let mut opset_import = vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(self.opset),
        }];
        for (domain, version) in [("com.microsoft", 1), ("ai.onnx.ml", 3), ("local", 1)] {
            if self.rng.chance(1, 3) {
                opset_import.push(OperatorSetIdProto {
                    domain: Some(domain.into()),
                    version: Some(if self.rng.chance(1, 8) {
                        self.rng.interesting_int()
                    } else {
                        version
                    }),
                });
            }
        }
        let n_functions = if self.rng.chance(1, 4) {
            self.rng.range(1, 3) as usize
        } else {
            0
        };
        self.functions = (0..n_functions).map(|i| format!("F{i}")).collect();
        let functions = (0..n_functions).map(|i| self.function(i)).collect();
        let graph = self.graph(0, &[]);
        ModelProto {
            ir_version: Some(match self.rng.below(8) {
                0 => self.rng.interesting_int(),
                _ => self.rng.range(3, 11),
            }),
            opset_import,
            producer_name: Some("fuzz".into()),
            graph: Some(graph),
            functions,
            ..Default::default()
        }
    }

    fn function(&mut self, i: usize) -> FunctionProto {
        let inputs: Vec<String> = (0..self.rng.range(1, 3))
            .map(|k| format!("fi{k}"))
            .collect();
        let mut names = inputs.clone();
        let nodes = self.nodes(2, &mut names, 6);
        let outputs: Vec<String> = (0..self.rng.range(1, 2))
            .filter_map(|_| self.rng.pick(&names).cloned())
            .collect();
        FunctionProto {
            name: Some(format!("F{i}")),
            domain: Some("local".into()),
            input: inputs,
            output: outputs,
            attribute: if self.rng.chance(1, 3) {
                vec!["alpha".into()]
            } else {
                Vec::new()
            },
            node: nodes,
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(self.opset),
            }],
            ..Default::default()
        }
    }

    fn graph(&mut self, depth: usize, outer: &[String]) -> GraphProto {
        let mut names: Vec<String> = outer.to_vec();
        let input: Vec<ValueInfoProto> = (0..self.rng.range(0, 3))
            .map(|_| {
                let n = self.name("in");
                names.push(n.clone());
                self.value_info(&n)
            })
            .collect();
        let initializer: Vec<TensorProto> = (0..self.rng.range(0, 4))
            .map(|_| {
                let n = self.name("w");
                names.push(n.clone());
                self.tensor(&n)
            })
            .collect();
        let count = if depth == 0 { 24 } else { 6 };
        let node = self.nodes(depth, &mut names, count);
        let chosen: Vec<String> = (0..self.rng.range(1, 3))
            .filter_map(|_| self.rng.pick(&names).cloned())
            .collect();
        let output: Vec<ValueInfoProto> = chosen
            .into_iter()
            .map(|n| {
                if self.rng.chance(1, 2) {
                    self.value_info(&n)
                } else {
                    ValueInfoProto {
                        name: Some(n),
                        ..Default::default()
                    }
                }
            })
            .collect();
        let described: Vec<String> = (0..self.rng.range(0, 2))
            .filter_map(|_| self.rng.pick(&names).cloned())
            .collect();
        let value_info = described.iter().map(|n| self.value_info(n)).collect();
        GraphProto {
            name: Some(format!("g{depth}")),
            node,
            input,
            output,
            initializer,
            value_info,
            ..Default::default()
        }
    }

    fn nodes(&mut self, depth: usize, names: &mut Vec<String>, max: usize) -> Vec<NodeProto> {
        let n = self.rng.below(max + 1);
        (0..n).map(|_| self.node(depth, names)).collect()
    }

    fn pick_op(&mut self) -> Op {
        let hot = |name: &str| Op {
            domain: String::new(),
            name: name.into(),
            since: 0,
            inputs: (1, 3),
            outputs: (1, 1),
        };
        match self.rng.below(20) {
            0..=8 => {
                let name = self.rng.pick(HOT).copied().unwrap_or("Add");
                // The schema's arity, when the table has the op.
                self.ops
                    .iter()
                    .rev()
                    .find(|o| o.name == name && o.domain == "ai.onnx")
                    .cloned()
                    .unwrap_or_else(|| hot(name))
            }
            9 if !self.functions.is_empty() => {
                let f = self.rng.pick(&self.functions).cloned().unwrap_or_default();
                Op {
                    domain: "local".into(),
                    name: f,
                    since: 1,
                    inputs: (1, 3),
                    outputs: (1, 2),
                }
            }
            10 => hot(["Bogus", "Memcpy", "MemcpyFromHost", "", "If"][self.rng.below(5)]),
            _ => {
                let i = self.rng.below(self.ops.len());
                self.ops.get(i).cloned().unwrap_or_else(|| hot("Relu"))
            }
        }
    }

    fn node(&mut self, depth: usize, names: &mut Vec<String>) -> NodeProto {
        let op = self.pick_op();
        let n_in = op.inputs.0
            + self
                .rng
                .below(op.inputs.1.saturating_sub(op.inputs.0).min(3) + 1);
        let input: Vec<String> = (0..n_in)
            .map(|_| match self.rng.below(30) {
                0 | 1 => String::new(),
                2 if self.chaos => self.name("undefined"),
                _ => self.rng.pick(names).cloned().unwrap_or_default(),
            })
            .collect();
        let n_out = op.outputs.0.max(1)
            + self
                .rng
                .below(op.outputs.1.saturating_sub(op.outputs.0).min(2) + 1);
        let output: Vec<String> = (0..n_out)
            .map(|_| {
                if self.chaos && self.rng.chance(1, 10) {
                    self.rng.pick(names).cloned().unwrap_or_default()
                } else {
                    self.name("v")
                }
            })
            .collect();
        let mut attribute = Vec::new();
        let domain = if op.domain == "ai.onnx" {
            String::new()
        } else {
            op.domain.clone()
        };
        let declared: Vec<(String, bool)> = self
            .attrs
            .get(&op.domain, &op.name, op.since)
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        for (name, required) in declared {
            if required || self.rng.chance(1, 2) {
                attribute.push(self.attribute(&name, depth, names));
            }
        }
        match op.name.as_str() {
            "If" => {
                for b in ["then_branch", "else_branch"] {
                    if !attribute.iter().any(|a| a.name() == b) {
                        attribute.push(self.attribute(b, depth, names));
                    }
                }
            }
            "Loop" | "Scan" if !attribute.iter().any(|a| a.name() == "body") => {
                attribute.push(self.attribute("body", depth, names));
            }
            "Constant" | "ConstantOfShape" if !attribute.iter().any(|a| a.name() == "value") => {
                attribute.push(self.attribute("value", depth, names));
            }
            _ => {}
        }
        if self.rng.chance(1, 10) {
            let name = ["axis", "to", "perm", "alpha", "junk", "value"][self.rng.below(6)];
            attribute.push(self.attribute(name, depth, names));
        }
        if self.rng.chance(1, 20) {
            attribute.push(AttributeProto {
                name: Some("alpha".into()),
                ref_attr_name: Some("alpha".into()),
                r#type: Some(AttributeType::Float as i32),
                ..Default::default()
            });
        }
        names.extend(output.iter().filter(|o| !o.is_empty()).cloned());
        NodeProto {
            op_type: Some(op.name),
            domain: Some(domain),
            name: Some(if self.rng.chance(1, 10) {
                String::new()
            } else {
                self.name("n")
            }),
            input,
            output,
            attribute,
            ..Default::default()
        }
    }

    fn attribute(&mut self, name: &str, depth: usize, names: &[String]) -> AttributeProto {
        let mut a = AttributeProto {
            name: Some(name.to_string()),
            ..Default::default()
        };
        let graph = matches!(name, "then_branch" | "else_branch" | "body");
        if graph && depth < 3 {
            a.r#type = Some(AttributeType::Graph as i32);
            a.g = Some(Box::new(self.graph(depth + 1, names)));
            return a;
        }
        let kind = match name {
            "value" | "value_float" if self.rng.chance(4, 5) => 4,
            "to" | "axis" | "keepdims" | "allowzero" | "noop_with_empty_axes" | "start" | "end"
                if self.rng.chance(4, 5) =>
            {
                2
            }
            "axes" | "perm" | "shape" | "starts" | "ends" | "pads" | "kernel_shape" | "strides"
                if self.rng.chance(4, 5) =>
            {
                7
            }
            _ => self.rng.below(9),
        };
        match kind {
            0 | 1 => {
                a.r#type = Some(AttributeType::Float as i32);
                a.f = Some(
                    *self
                        .rng
                        .pick(&[0.0, 1.0, -1.0, f32::NAN, f32::INFINITY, 1e30, 0.5])
                        .unwrap_or(&0.0),
                );
            }
            2 | 3 => {
                a.r#type = Some(AttributeType::Int as i32);
                a.i = Some(if name == "to" && self.rng.chance(3, 4) {
                    i64::from(*self.rng.pick(ELEMS).unwrap_or(&1))
                } else {
                    self.rng.interesting_int()
                });
            }
            4 => {
                a.r#type = Some(AttributeType::Tensor as i32);
                let n = format!("{name}_t");
                a.t = Some(Box::new(self.tensor(&n)));
            }
            5 => {
                a.r#type = Some(AttributeType::String as i32);
                a.s = Some(
                    [
                        "",
                        "NOTSET",
                        "constant",
                        "linear",
                        "\u{0}\u{ff}",
                        "SAME_UPPER",
                    ][self.rng.below(6)]
                    .as_bytes()
                    .to_vec()
                    .into(),
                );
            }
            6 => {
                a.r#type = Some(AttributeType::Floats as i32);
                a.floats = (0..self.rng.below(4))
                    .map(|_| self.rng.range(-3, 3) as f32)
                    .collect();
            }
            7 => {
                a.r#type = Some(AttributeType::Ints as i32);
                a.ints = (0..self.rng.below(5))
                    .map(|_| self.rng.interesting_int())
                    .collect();
            }
            _ => {
                // A wrong or missing type tag.
                a.r#type = Some(self.rng.range(0, 15) as i32);
                a.i = Some(self.rng.interesting_int());
            }
        }
        a
    }

    fn value_info(&mut self, name: &str) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(name.to_string()),
            r#type: Some(self.type_proto(0)),
            ..Default::default()
        }
    }

    fn type_proto(&mut self, depth: usize) -> TypeProto {
        let value = match self.rng.below(if depth > 1 { 1 } else { 12 }) {
            9 => type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
                elem_type: Some(Box::new(self.type_proto(depth + 1))),
            })),
            10 => type_proto::Value::OptionalType(Box::new(type_proto::Optional {
                elem_type: Some(Box::new(self.type_proto(depth + 1))),
            })),
            _ => type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(*self.rng.pick(ELEMS).unwrap_or(&1)),
                shape: (!self.rng.chance(1, 8)).then(|| TensorShapeProto {
                    dim: (0..self.rng.below(5))
                        .map(|_| tensor_shape_proto::Dimension {
                            value: Some(match self.rng.below(4) {
                                0 => tensor_shape_proto::dimension::Value::DimParam(
                                    ["N", "batch", ""][self.rng.below(3)].into(),
                                ),
                                _ => tensor_shape_proto::dimension::Value::DimValue(
                                    self.rng.interesting_int(),
                                ),
                            }),
                            denotation: None,
                        })
                        .collect(),
                }),
            }),
        };
        TypeProto {
            value: Some(value),
            denotation: None,
        }
    }

    fn tensor(&mut self, name: &str) -> TensorProto {
        let elem = *self.rng.pick(ELEMS).unwrap_or(&7);
        let rank = self.rng.below(4);
        let dims: Vec<i64> = (0..rank)
            .map(|_| {
                if self.rng.chance(1, 10) {
                    self.rng.interesting_int()
                } else {
                    self.rng.range(0, 4)
                }
            })
            .collect();
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?))
            .filter(|&n| n <= 4096)
            .unwrap_or(self.rng.below(4));
        let mut t = TensorProto {
            name: Some(name.to_string()),
            dims,
            data_type: Some(elem),
            ..Default::default()
        };
        // Shape-like values: what ConstantOfShape, Reshape, Gather and Range read.
        let ints: Vec<i64> = (0..n).map(|_| self.rng.interesting_int()).collect();
        match self.rng.below(10) {
            0 => {
                t.data_location = Some(1);
                let location = if self.chaos {
                    [
                        "../escape.bin",
                        "/etc/passwd",
                        "sub/../w.bin",
                        "",
                        "a\u{0}b",
                    ][self.rng.below(5)]
                } else {
                    ["w.bin", "sub/w.bin"][self.rng.below(2)]
                };
                t.external_data = vec![
                    entry("location", location),
                    entry("offset", &self.rng.interesting_int().to_string()),
                    entry("length", &self.rng.interesting_int().to_string()),
                ];
            }
            1 => {
                // A length that does not match the dims.
                let len = self.rng.below(64);
                t.raw_data = Some(vec![0xab; len].into());
            }
            2..=5 => {
                let width = match elem {
                    7 | 11 | 13 => 8,
                    1 | 6 | 12 => 4,
                    10 | 16 | 5 | 4 => 2,
                    _ => 1,
                };
                let mut raw = Vec::with_capacity(n * width);
                for v in &ints {
                    raw.extend_from_slice(&v.to_le_bytes()[..width]);
                }
                t.raw_data = Some(raw.into());
            }
            _ => match elem {
                7 => t.int64_data = ints,
                1 => t.float_data = ints.iter().map(|&v| v as f32).collect(),
                11 => t.double_data = ints.iter().map(|&v| v as f64).collect(),
                13 | 12 => t.uint64_data = ints.iter().map(|&v| v as u64).collect(),
                8 => {
                    t.string_data = ints
                        .iter()
                        .map(|v| v.to_string().into_bytes().into())
                        .collect()
                }
                _ => t.int32_data = ints.iter().map(|&v| v as i32).collect(),
            },
        }
        t
    }
}

fn entry(key: &str, value: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(key.into()),
        value: Some(value.into()),
    }
}
