//! Context-dependent function bodies (`OpSchema::SetContextDependentFunctionBodyBuilder`):
//! ONNX builds these bodies from the node's attributes and input types. Each builder here
//! follows the ONNX builder of that op and schema version (`onnx/defs/*/defs.cc`, `old.cc`),
//! written as lines of ONNX's textual syntax as ONNX's `FunctionBuilder` does; the function is
//! then read with the text view's parser. `tools/functions/check_builders.py` compares them with
//! ONNX's own builders.
//!
//! A builder returns `None` where ONNX's returns false (it cannot build a body: an input type
//! is unknown, a required attribute is missing); ORT then keeps the node as it is.

use super::{Context, parse_function};
use crate::infer::Type;
use crate::model::proto::FunctionProto;
use crate::model::type_name;
use crate::sym::Sym;

const FLOAT: i64 = 1;
const BOOL: i64 = 9;
const INT64: i64 = 7;
const FLOAT16: i64 = 10;
const DOUBLE: i64 = 11;
const BFLOAT16: i64 = 16;

/// The body of a context-dependent function op: `None` when the op has no such builder (its
/// body, if any, is static); `Some(None)` when the builder declines.
pub(super) fn build(ctx: &Context, requested: i64) -> Option<Option<FunctionProto>> {
    let node = ctx.node;
    // com.microsoft's context-dependent bodies (`QuickGelu`: `contrib_defs.cc`; `FastGelu`:
    // `bert_defs.cc`), built with `AddOpset("", 13)`.
    if node.domain == Sym::COM_MICROSOFT {
        return match (node.op.as_str(), node.since?) {
            ("QuickGelu", 1) => Some(quick_gelu(ctx).and_then(|b| b.finish(13))),
            ("FastGelu", 1) => Some(fast_gelu(ctx).and_then(|b| b.finish(13))),
            _ => None,
        };
    }
    if node.domain != Sym::AI_ONNX {
        return None;
    }
    let since = node.since?;
    let body = match (node.op.as_str(), since) {
        ("CastLike", 15 | 19 | 21 | 23 | 24 | 25) => cast_like(ctx, since),
        ("Clip", 13) => clip(ctx, since),
        ("Celu", 12) => celu(ctx, since),
        ("Softmax" | "LogSoftmax", 13) => softmax(ctx, since, requested),
        ("Gelu", 20) => gelu(ctx, since),
        ("NegativeLogLikelihoodLoss", 13 | 22) => nll_loss(ctx, since),
        ("SoftmaxCrossEntropyLoss", 13) => sce_loss(ctx, since),
        ("Bernoulli", 15 | 22) => bernoulli(ctx, since),
        ("CenterCropPad", 18) => center_crop_pad(ctx, since),
        ("GroupNormalization", 18 | 21) => group_norm(ctx, since),
        ("SequenceMap", 17) => sequence_map(ctx, since),
        ("LayerNormalization", 17) => layer_norm(ctx, since, requested),
        ("Attention", 23 | 24) if ctx.release_opset <= 23 => attention_onnx118(ctx, since),
        ("Attention", 23 | 24) => attention_onnx120(ctx, since),
        _ => return None,
    };
    Some(body.and_then(|b| b.finish(requested)))
}

/// A function under construction: ONNX's `FunctionBuilder` plus `schema.BuildFunction`.
pub(super) struct Fb {
    op: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attrs: Vec<String>,
    lines: Vec<String>,
}

impl Fb {
    fn new(op: &str, inputs: &[&str], outputs: &[&str], attrs: &[&str]) -> Fb {
        Fb {
            op: op.to_string(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attrs: attrs.iter().map(|s| s.to_string()).collect(),
            lines: Vec::new(),
        }
    }

    /// Adds one or more node lines.
    fn add(&mut self, text: &str) -> &mut Fb {
        for l in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            self.lines.push(l.to_string());
        }
        self
    }

    /// `Const1D(name, v)`: a one-element 1-D int64 tensor.
    fn const1d_i(&mut self, name: &str, v: i64) -> &mut Fb {
        self.lines
            .push(format!("{name} = Constant <value = int64[1] {{{v}}}> ()"));
        self
    }

    /// `Const1D(name, v)`: a one-element 1-D float tensor.
    fn const1d_f(&mut self, name: &str, v: f32) -> &mut Fb {
        self.lines.push(format!(
            "{name} = Constant <value = float[1] {{{}}}> ()",
            float_text(v)
        ));
        self
    }

    /// `Const(name, std::vector<int64_t>)`: a 1-D int64 tensor.
    fn const_ints(&mut self, name: &str, v: &[i64]) -> &mut Fb {
        let vals: Vec<String> = v.iter().map(i64::to_string).collect();
        self.lines.push(format!(
            "{name} = Constant <value = int64[{}] {{{}}}> ()",
            v.len(),
            vals.join(", ")
        ));
        self
    }

    /// The finished function at `opset` (`UpdateFunctionProtoOpsetImportVersion`).
    fn finish(&self, opset: i64) -> Option<FunctionProto> {
        let attrs = if self.attrs.is_empty() {
            String::new()
        } else {
            format!("<{}>", self.attrs.join(", "))
        };
        let text = format!(
            "<domain: \"\", opset_import: [\"\" : {opset}]>\n{} {attrs}({}) => ({})\n{{\n{}\n}}\n",
            self.op,
            self.inputs.join(", "),
            self.outputs.join(", "),
            self.lines.join("\n")
        );
        parse_function(&text)
    }
}

fn float_text(v: f32) -> String {
    let t = format!("{v:?}");
    if t.contains('.') || t.contains('e') || t.contains("inf") || t.contains("NaN") {
        t
    } else {
        format!("{t}.0")
    }
}

fn attr_f(ctx: &Context, name: &str) -> Option<f32> {
    ctx.attr(name).and_then(|a| a.f)
}

fn attr_i(ctx: &Context, name: &str) -> Option<i64> {
    ctx.attr(name).and_then(|a| a.i)
}

fn attr_s(ctx: &Context, name: &str) -> Option<String> {
    ctx.attr(name)
        .and_then(|a| a.s.as_ref())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

/// CastLike: `output = Cast <to = elem(target_type), saturate = @saturate> (input)` (15 has no
/// `saturate`).
fn cast_like(ctx: &Context, since: i64) -> Option<Fb> {
    let to = ctx.elem(1)?;
    let (attrs, extra): (&[&str], &str) = if since >= 19 {
        (&["saturate"], ", saturate: int = @saturate")
    } else {
        (&[], "")
    };
    let mut fb = Fb::new("CastLike", &["input", "target_type"], &["output"], attrs);
    fb.add(&format!("output = Cast <to = {to}{extra}> (input)"));
    Some(fb)
}

fn clip(ctx: &Context, _since: i64) -> Option<Fb> {
    let mut fb = Fb::new("Clip", &["input", "min", "max"], &["output"], &[]);
    match (ctx.has_input(1), ctx.has_input(2)) {
        (false, false) => fb.add("output = Identity (input)"),
        (true, false) => fb.add(
            "input_less_than_min = Less (input, min)
             output = Where (input_less_than_min, min, input)",
        ),
        (false, true) => fb.add(
            "input_large_than_max = Less (max, input)
             output = Where (input_large_than_max, max, input)",
        ),
        (true, true) => fb.add(
            "input_less_than_min = Less (input, min)
             tmp = Where (input_less_than_min, min, input)
             output_large_than_max = Less (max, tmp)
             output = Where (output_large_than_max, max, tmp)",
        ),
    };
    Some(fb)
}

fn celu(ctx: &Context, _since: i64) -> Option<Fb> {
    let alpha = attr_f(ctx, "alpha").unwrap_or(1.0);
    let mut fb = Fb::new("Celu", &["X"], &["Y"], &["alpha"]);
    fb.lines.push(format!(
        "alpha = Constant <value = float[1] {{{}}}> ()",
        float_text(alpha)
    ));
    fb.add(
        "X_alpha = Div (X, alpha)
         Elu_Result = Elu <alpha = 1.0> (X_alpha)
         Y = Mul (alpha, Elu_Result)",
    );
    Some(fb)
}

/// Softmax-13 and LogSoftmax-13: one builder for opset 13 (ReduceMax with `axes` attribute),
/// one for 18 (axes input).
fn softmax(ctx: &Context, _since: i64, requested: i64) -> Option<Fb> {
    let axis = attr_i(ctx, "axis").unwrap_or(-1);
    let op = ctx.node.op.as_str();
    let mut fb = Fb::new(op, &["input"], &["output"], &["axis"]);
    fb.const1d_i("axes", axis);
    if requested >= 18 {
        fb.add("X_ReduceMax = ReduceMax <keepdims = 1> (input, axes)");
    } else {
        fb.add(&format!(
            "X_ReduceMax = ReduceMax <keepdims = 1, axes = [{axis}]> (input)"
        ));
    }
    fb.add(
        "X_Sub = Sub (input, X_ReduceMax)
         X_Exp = Exp (X_Sub)
         X_ReduceSum = ReduceSum <keepdims = 1> (X_Exp, axes)",
    );
    if op == "Softmax" {
        fb.add("output = Div (X_Exp, X_ReduceSum)");
    } else {
        fb.add(
            "X_Log = Log (X_ReduceSum)
             output = Sub (X_Sub, X_Log)",
        );
    }
    Some(fb)
}

fn gelu(ctx: &Context, _since: i64) -> Option<Fb> {
    let mut fb = Fb::new("Gelu", &["X"], &["Y"], &["approximate"]);
    if attr_s(ctx, "approximate").as_deref() == Some("tanh") {
        fb.add(
            "Half = Constant <value = float {0.5}> ()
             HalfCast = CastLike (Half, X)
             One = Constant <value = float {1.0}> ()
             OneCast = CastLike (One, X)
             TwoOverPi = Constant <value = float {0.63661977236}> ()
             TwoOverPiCast = CastLike (TwoOverPi, X)
             C0 = Constant <value = float {0.044715}> ()
             C0Cast = CastLike (C0, X)
             SqrtTwoOverPi = Sqrt (TwoOverPiCast)
             Three = Constant <value = float {3.0}> ()
             ThreeCast = CastLike (Three, X)
             XCubed = Pow (X, ThreeCast)
             XCubedC0 = Mul (C0Cast, XCubed)
             XC0XCubed = Sum (X, XCubedC0)
             TanhInput = Mul (SqrtTwoOverPi, XC0XCubed)
             ErfApprox = Tanh (TanhInput)
             PhiApprox = Sum (OneCast, ErfApprox)
             MultX = Mul (HalfCast, X)
             Y = Mul (MultX, PhiApprox)",
        );
    } else {
        fb.add(
            "Half = Constant <value = float {0.5}> ()
             HalfCast = CastLike (Half, X)
             One = Constant <value = float {1.0}> ()
             OneCast = CastLike (One, X)
             Two = Constant <value = float {2.0}> ()
             TwoCast = CastLike (Two, X)
             SqrtTwo = Sqrt (TwoCast)
             XSqrt = Div (X, SqrtTwo)
             ErfXSqrt = Erf (XSqrt)
             Phi = Sum (OneCast, ErfXSqrt)
             MultX = Mul (HalfCast, X)
             Y = Mul (MultX, Phi)",
        );
    }
    Some(fb)
}

/// A scalar of a float type as the text syntax writes it (`ToTensor(value, elem_type)`): 16-bit
/// floats as their bit patterns.
fn scalar_text(elem: i32, v: f32) -> String {
    match i64::from(elem) {
        FLOAT16 => crate::placer::transformers::fusions::f32_to_half(v).to_string(),
        BFLOAT16 => {
            let b = u64::from(v.to_bits());
            // Round to nearest even, as `BFloat16(float)` does (NaN keeps a NaN pattern).
            if v.is_nan() {
                "32704".to_string()
            } else {
                (((b + 0x7fff + ((b >> 16) & 1)) >> 16) & 0xffff).to_string()
            }
        }
        _ => float_text(v),
    }
}

/// com.microsoft QuickGelu-1: `x * Sigmoid(alpha * x)`, `Alpha` a constant of the input's type
/// (`ToTensor(alpha, elem_type)`); no body when the input type is unknown or not a float type.
fn quick_gelu(ctx: &Context) -> Option<Fb> {
    let elem = ctx.elem(0)?;
    if ![FLOAT, FLOAT16, DOUBLE, BFLOAT16].contains(&i64::from(elem)) {
        return None;
    }
    let alpha = attr_f(ctx, "alpha").unwrap_or(1.702);
    let mut fb = Fb::new("QuickGelu", &["X"], &["Y"], &["alpha"]);
    fb.add(&format!(
        "Alpha = Constant <value = {} {{{}}}> ()
         CX = Mul (Alpha, X)
         SIGMOIDCX = Sigmoid (CX)
         Y = Mul (X, SIGMOIDCX)",
        type_name(elem),
        scalar_text(elem, alpha),
    ));
    Some(fb)
}

/// com.microsoft FastGelu-1 (`bert_defs.cc`): the tanh approximation
/// `a * X_bias * (one + Tanh(X_bias * (b + c * X_bias * X_bias)))` with `X_bias = X + bias`
/// (`Identity(X)` without the optional bias); `a`, `b`, `c`, `one` constants of the input's type
/// (0.5, 0.797885, 0.035677, 1). No body when the input type is unknown. The schema's `T` is
/// float, float16 and bfloat16, so type inference has already refused any other type.
fn fast_gelu(ctx: &Context) -> Option<Fb> {
    let elem = ctx.elem(0)?;
    let mut fb = Fb::new("FastGelu", &["X", "bias"], &["Y"], &[]);
    for (name, v) in [("a", 0.5), ("b", 0.797885), ("c", 0.035677), ("one", 1.0)] {
        fb.lines.push(format!(
            "{name} = Constant <value = {} {{{}}}> ()",
            type_name(elem),
            scalar_text(elem, v)
        ));
    }
    fb.add(if ctx.has_input(1) {
        "X_bias = Add (X, bias)"
    } else {
        "X_bias = Identity (X)"
    });
    fb.add(
        "T1 = Mul (X_bias, X_bias)
         T2 = Mul (c, T1)
         T3 = Add (b, T2)
         T4 = Mul (X_bias, T3)
         T5 = Tanh (T4)
         T6 = Add (one, T5)
         T7 = Mul (X_bias, T6)
         Y = Mul (a, T7)",
    );
    Some(fb)
}

/// NegativeLogLikelihoodLoss-13 and -22 (the same builder).
fn nll_loss(ctx: &Context, _since: i64) -> Option<Fb> {
    let input_type = ctx.elem(0)?;
    let float_input = i64::from(input_type) == FLOAT;
    let reduction = attr_s(ctx, "reduction").unwrap_or_else(|| "mean".into());
    let mut fb = Fb::new(
        "NegativeLogLikelihoodLoss",
        &["input", "target", "weight"],
        &["loss"],
        &["ignore_index", "reduction"],
    );
    fb.const1d_i("const_zero", 0)
        .const1d_i("const_one", 1)
        .const1d_i("axes", 1)
        .add("expanded_target = Unsqueeze (target, axes)");
    let reduce_weighted = |fb: &mut Fb| {
        if reduction == "none" {
            fb.add("loss = Mul (loss_unweighted, weight_gather)");
        } else {
            fb.add("loss_Ndd = Mul (loss_unweighted, weight_gather)");
            if reduction == "mean" {
                fb.add(
                    "loss_sum = ReduceSum <keepdims = 0> (loss_Ndd)
                     weight_gather_sum = ReduceSum <keepdims = 0> (weight_gather)
                     loss = Div (loss_sum, weight_gather_sum)",
                );
            } else {
                fb.add("loss = ReduceSum <keepdims = 0> (loss_Ndd)");
            }
        }
    };
    match attr_i(ctx, "ignore_index") {
        None => {
            fb.add(
                "input_gather_element = GatherElements <axis = 1> (input, expanded_target)
                 loss_NCdd = Neg (input_gather_element)
                 loss_N1dd = Slice (loss_NCdd, const_zero, const_one, const_one)",
            );
            if !ctx.has_input(2) {
                if reduction == "none" {
                    fb.add("loss = Squeeze (loss_N1dd, axes)");
                } else {
                    fb.add("loss_Ndd = Squeeze (loss_N1dd, axes)");
                    if reduction == "mean" {
                        fb.add("loss = ReduceMean <keepdims = 0> (loss_Ndd)");
                    } else {
                        fb.add("loss = ReduceSum <keepdims = 0> (loss_Ndd)");
                    }
                }
            } else {
                fb.add(
                    "weight_gather = Gather (weight, target)
                     loss_unweighted = Squeeze (loss_N1dd, axes)",
                );
                reduce_weighted(&mut fb);
            }
        }
        Some(ignore_index) => {
            fb.const1d_i("const_ignore_index", ignore_index);
            fb.add(
                "const_zero_target_typed = Sub (expanded_target, expanded_target)
                 expanded_target_int64 = Cast <to = 7> (expanded_target)
                 mask = Equal (expanded_target_int64, const_ignore_index)
                 transform_targets = Where (mask, const_zero_target_typed, expanded_target)
                 input_gather_element = GatherElements <axis = 1> (input, transform_targets)",
            );
            fb.const1d_f("const_zero_float", 0.0);
            if float_input {
                fb.add(
                    "input_gather_element_transform = Where (mask, const_zero_float, input_gather_element)",
                );
            } else {
                fb.add(&format!(
                    "const_zero_casted = Cast <to = {input_type}> (const_zero_float)"
                ))
                .add(
                    "input_gather_element_transform = Where (mask, const_zero_casted, input_gather_element)",
                );
            }
            fb.add(
                "loss_NCdd = Neg (input_gather_element_transform)
                 loss_N1dd = Slice (loss_NCdd, const_zero, const_one, const_one)",
            );
            if !ctx.has_input(2) {
                fb.add("squeeze_mask = Squeeze (mask, axes)");
                fb.const1d_f("const_one_float", 1.0);
                if float_input {
                    fb.add(
                        "weight_gather = Where (squeeze_mask, const_zero_float, const_one_float)",
                    );
                } else {
                    fb.add(&format!(
                        "const_one_casted = Cast <to = {input_type}> (const_one_float)"
                    ))
                    .add(
                        "weight_gather = Where (squeeze_mask, const_zero_casted, const_one_casted)",
                    );
                }
            } else {
                fb.add("weight_gather_temp = Gather (weight, transform_targets)");
                fb.add(if float_input {
                    "weight_gather_temp_1 = Where (mask, const_zero_float, weight_gather_temp)"
                } else {
                    "weight_gather_temp_1 = Where (mask, const_zero_casted, weight_gather_temp)"
                });
                fb.add("weight_gather = Squeeze (weight_gather_temp_1, axes)");
            }
            fb.add("loss_unweighted = Squeeze (loss_N1dd, axes)");
            reduce_weighted(&mut fb);
        }
    }
    Some(fb)
}

/// SoftmaxCrossEntropyLoss-13: a stable LogSoftmax, then a NegativeLogLikelihoodLoss node
/// (itself a function).
fn sce_loss(ctx: &Context, _since: i64) -> Option<Fb> {
    let mut fb = Fb::new(
        "SoftmaxCrossEntropyLoss",
        &["scores", "labels", "weights"],
        &["output", "log_prob"],
        &["ignore_index", "reduction"],
    );
    fb.const_ints("Shape3D", &[0, 0, -1]).add(
        "X_NCD = Reshape (scores, Shape3D)
         X_NDC = Transpose <perm = [0, 2, 1]> (X_NCD)
         X_LogSM = LogSoftmax <axis = 2> (X_NDC)
         X_LogSM_NCD = Transpose <perm = [0, 2, 1]> (X_LogSM)
         X_shape = Shape (scores)
         X_Log = Reshape (X_LogSM_NCD, X_shape)",
    );
    if ctx.has_output(1) {
        fb.add("log_prob = Identity (X_Log)");
    }
    let refs = "reduction: string = @reduction, ignore_index: int = @ignore_index";
    if ctx.has_input(2) {
        fb.add(&format!(
            "output = NegativeLogLikelihoodLoss <{refs}> (X_Log, labels, weights)"
        ));
    } else {
        fb.add(&format!(
            "output = NegativeLogLikelihoodLoss <{refs}> (X_Log, labels)"
        ));
    }
    Some(fb)
}

fn bernoulli(ctx: &Context, _since: i64) -> Option<Fb> {
    let input_type = ctx.elem(0)?;
    let dtype = attr_i(ctx, "dtype").unwrap_or(i64::from(input_type));
    let mut fb = Fb::new("Bernoulli", &["input"], &["output"], &["dtype", "seed"]);
    fb.add(&format!(
        "X_random = RandomUniformLike <low = 0.0, high = 1.0, seed: float = @seed, dtype = {input_type}> (input)"
    ))
    .add("X_greater = Greater (X_random, input)")
    .add(&format!("output = Cast <to = {dtype}> (X_greater)"));
    Some(fb)
}

fn center_crop_pad(ctx: &Context, _since: i64) -> Option<Fb> {
    let mut fb = Fb::new(
        "CenterCropPad",
        &["input_data", "shape"],
        &["output_data"],
        &["axes"],
    );
    fb.const_ints("k2", &[2]);
    let axes = ctx.attr("axes").is_some();
    if axes {
        fb.add(
            "axes_input = Constant <value_ints: ints = @axes> ()
             x_shape_alldims = Shape (input_data)
             x_shape = Gather (x_shape_alldims, axes_input)",
        );
    } else {
        fb.add("x_shape = Shape (input_data)");
    }
    fb.add(
        "padded_sh = Max (x_shape, shape)
         pad_amount = Sub (padded_sh, x_shape)
         pad_amount_left = Div (pad_amount, k2)
         pad_amount_right = Sub (pad_amount, pad_amount_left)
         pads = Concat <axis = 0> (pad_amount_left, pad_amount_right)",
    );
    if axes {
        fb.add(
            "padded_input = Pad (input_data, pads, , axes_input)
             x_shape_alldims2 = Shape (padded_input)
             x_shape2 = Gather (x_shape_alldims2, axes_input)",
        );
    } else {
        fb.add(
            "padded_input = Pad (input_data, pads)
             x_shape2 = Shape (padded_input)",
        );
    }
    fb.add(
        "sh_diff = Sub (x_shape2, shape)
         start_dims = Div (sh_diff, k2)
         end_dims = Add (start_dims, shape)",
    );
    if axes {
        fb.add("output_data = Slice (padded_input, start_dims, end_dims, axes_input)");
    } else {
        fb.add("output_data = Slice (padded_input, start_dims, end_dims)");
    }
    Some(fb)
}

/// GroupNormalization-18 (statistics in the input type) and -21 (in `stash_type`).
fn group_norm(ctx: &Context, since: i64) -> Option<Fb> {
    let in_type = i64::from(ctx.elem(0)?);
    let epsilon = attr_f(ctx, "epsilon").unwrap_or(1e-5);
    let num_groups = attr_i(ctx, "num_groups")?;
    let attrs: &[&str] = if since >= 21 {
        &["epsilon", "num_groups", "stash_type"]
    } else {
        &["epsilon", "num_groups"]
    };
    let mut fb = Fb::new("GroupNormalization", &["X", "scale", "bias"], &["Y"], attrs);
    fb.const1d_f("FloatEpsilon", epsilon);
    if since >= 21 {
        let stash = attr_i(ctx, "stash_type").unwrap_or(FLOAT);
        if ![FLOAT, BFLOAT16, FLOAT16, DOUBLE].contains(&stash) {
            return None;
        }
        fb.add(&format!("Epsilon = Cast <to = {stash}> (FloatEpsilon)"))
            .add(&format!("XU = Cast <to = {stash}> (X)"))
            .add("XShape = Shape (XU)");
    } else {
        fb.add(&format!("Epsilon = Cast <to = {in_type}> (FloatEpsilon)"))
            .add("XShape = Shape (X)");
    }
    fb.add("C = Shape <start = 1, end = 2> (X)")
        .const1d_i("NumGroups", num_groups)
        .add(
            "GroupSize = Div (C, NumGroups)
             N = Shape <start = 0, end = 1> (X)
             InstanceShape = Shape <start = 2> (X)
             NewShape = Concat <axis = 0> (N, NumGroups, GroupSize, InstanceShape)",
        );
    fb.add(if since >= 21 {
        "XReshaped = Reshape (XU, NewShape)"
    } else {
        "XReshaped = Reshape (X, NewShape)"
    });
    fb.add(
        "Shape3D = Constant <value_ints = [0, 0, -1]> ()
            X3D = Reshape (XReshaped, Shape3D)",
    )
    .const1d_i("Axes2", 2)
    .add(
        "Mean = ReduceMean (X3D, Axes2)
             Square = Mul (X3D, X3D)
             MeanOfSquare = ReduceMean (Square, Axes2)
             SquareOfMean = Mul (Mean, Mean)
             Var = Sub (MeanOfSquare, SquareOfMean)
             VarPlusEpsilon = Add (Var, Epsilon)
             StdDev = Sqrt (VarPlusEpsilon)
             Deviation = Sub (X3D, Mean)",
    );
    let normalized = if since >= 21 {
        fb.add(&format!(
            "NormalizedU = Div (Deviation, StdDev)
             NormalizedOriginalShape = Reshape (NormalizedU, XShape)
             NormalizedNC = Reshape (NormalizedOriginalShape, Shape3D)
             NormalizedT = Cast <to = {in_type}> (NormalizedNC)"
        ));
        "NormalizedT"
    } else {
        fb.add("Normalized = Div (Deviation, StdDev)");
        "Normalized"
    };
    fb.add(&format!(
        "ScaleShape = Constant <value_ints = [1, -1, 1]> ()
         ScaleT = Cast <to = {in_type}> (scale)
         BiasT = Cast <to = {in_type}> (bias)
         ScaleReshaped = Reshape (ScaleT, ScaleShape)
         BiasReshaped = Reshape (BiasT, ScaleShape)
         Scaled = Mul (ScaleReshaped, {normalized})
         Biased = Add (Scaled, BiasReshaped)
         Y = Reshape (Biased, XShape)"
    ));
    Some(fb)
}

/// LayerNormalization-17: one builder for opset 17 (ReduceMean with `axes` attribute), one for
/// 18 and later (axes input).
fn layer_norm(ctx: &Context, _since: i64, requested: i64) -> Option<Fb> {
    let t = ctx.elem(0)?;
    let u = attr_i(ctx, "stash_type").unwrap_or(FLOAT);
    if u != FLOAT && u != BFLOAT16 {
        return None;
    }
    let axis = attr_i(ctx, "axis").unwrap_or(-1);
    let epsilon = attr_f(ctx, "epsilon").unwrap_or(1e-5);
    let mut fb = Fb::new(
        "LayerNormalization",
        &["X", "Scale", "B"],
        &["Y", "Mean", "InvStdDev"],
        &["axis", "epsilon", "stash_type"],
    );
    fb.lines.push(format!(
        "FloatEpsilon = Constant <value = float {{{}}}> ()",
        float_text(epsilon)
    ));
    fb.add(&format!(
        "Epsilon = Cast <to = {u}> (FloatEpsilon)
         XShape = Shape (X)
         Rank = Size (XShape)
         Zero1D = Constant <value = int64[1] {{0}}> ()
         Axis1D = Constant <value = int64[1] {{{axis}}}> ()
         PrefixShape = Slice (XShape, Zero1D, Axis1D)"
    ));
    fb.add(if axis >= 0 {
        "NumReducedAxes = Sub (Rank, Axis1D)"
    } else {
        "NumReducedAxes = Neg (Axis1D)"
    });
    fb.add(&format!(
        "SuffixShape = ConstantOfShape <value = int64[1] {{1}}> (NumReducedAxes)
         ReducedShape = Concat <axis = 0> (PrefixShape, SuffixShape)
         X2D = Flatten <axis = {axis}> (X)
         XU = Cast <to = {u}> (X2D)"
    ));
    if requested >= 18 {
        fb.add(
            "Axes_1 = Constant <value = int64[1] {1}> ()
             Mean2D = ReduceMean (XU, Axes_1)
             Square = Mul (XU, XU)
             MeanOfSquare = ReduceMean (Square, Axes_1)",
        );
    } else {
        fb.add(
            "Mean2D = ReduceMean <axes = [1]> (XU)
             Square = Mul (XU, XU)
             MeanOfSquare = ReduceMean <axes = [1]> (Square)",
        );
    }
    fb.add(&format!(
        "SquareOfMean = Mul (Mean2D, Mean2D)
         Var = Sub (MeanOfSquare, SquareOfMean)
         VarPlusEpsilon = Add (Var, Epsilon)
         StdDev = Sqrt (VarPlusEpsilon)
         Deviation = Sub (XU, Mean2D)
         Normalized = Div (Deviation, StdDev)
         NormalizedT = Cast <to = {t}> (Normalized)
         Scale2D = Flatten <axis = 0> (Scale)
         Scaled = Mul (NormalizedT, Scale2D)"
    ));
    if ctx.has_input(2) {
        fb.add(
            "B2D = Flatten <axis = 0> (B)
             Biased = Add (Scaled, B2D)",
        );
    } else {
        fb.add("Biased = Identity (Scaled)");
    }
    fb.add(
        "Y = Reshape (Biased, XShape)
         InvStdDev2D = Reciprocal (StdDev)",
    );
    if ctx.has_output(1) {
        fb.add("Mean = Reshape (Mean2D, ReducedShape)");
    }
    if ctx.has_output(2) {
        fb.add("InvStdDev = Reshape (InvStdDev2D, ReducedShape)");
    }
    Some(fb)
}

/// SequenceMap-17: a Loop over the first (sequence) input whose body is the node's `body`
/// graph, wrapped with SequenceAt/Identity for the inputs and SequenceInsert for the outputs.
fn sequence_map(ctx: &Context, _since: i64) -> Option<Fb> {
    let body_gi = ctx.subgraph("body")?;
    let body = super::graph_proto(ctx.session, body_gi);
    let ninputs = body.input.len();
    let noutputs = body.output.len();
    if ninputs < 1 || noutputs < 1 || !ctx.has_input(0) {
        return None;
    }
    if !matches!(ctx.input_types.first()?.as_ref()?, Type::Seq(_)) {
        return None;
    }
    let mut inputs = vec!["input_sequence".to_string()];
    for i in 1..ninputs {
        if !ctx.has_input(i) {
            return None;
        }
        inputs.push(format!("additional_inputs_{i}"));
    }
    let mut outputs = Vec::new();
    for i in 0..noutputs {
        if !ctx.has_output(i) {
            return None;
        }
        outputs.push(format!("out_sequence_{i}"));
    }
    // The loop body, in text: its formal inputs and outputs need types.
    let lb = "SequenceMap_loop_body";
    let mut lb_inputs = vec![
        format!("int64 {lb}_itercount"),
        format!("bool {lb}_cond_in"),
    ];
    let mut lb_outputs = vec![format!("bool {lb}_cond_out")];
    let mut lb_nodes = vec![format!("{lb}_cond_out = Identity ({lb}_cond_in)")];
    for (i, formal) in inputs.iter().enumerate() {
        let g_in = body.input.get(i)?.name();
        if matches!(ctx.input_types.get(i)?, Some(Type::Seq(_))) {
            lb_nodes.push(format!("{g_in} = SequenceAt ({formal}, {lb}_itercount)"));
        } else {
            lb_nodes.push(format!("{g_in} = Identity ({formal})"));
        }
    }
    let mut body_text = String::new();
    for n in &body.node {
        body_text.push_str(&node_text(n)?);
        body_text.push('\n');
    }
    let mut out_types = Vec::new();
    for out in &body.output {
        let ty = out
            .r#type
            .as_ref()
            .and_then(Type::from_proto)
            .and_then(|t| t.elem())?;
        out_types.push(ty);
        let prefix = format!("{lb}_{}", out.name());
        let tname = type_name(ty);
        lb_inputs.push(format!("seq({tname}) {prefix}_in"));
        lb_outputs.push(format!("seq({tname}) {prefix}_out"));
    }
    let mut tail = Vec::new();
    for out in &body.output {
        let prefix = format!("{lb}_{}", out.name());
        tail.push(format!(
            "{prefix}_out = SequenceInsert ({prefix}_in, {})",
            out.name()
        ));
    }
    let first = &inputs[0];
    let mut fb = Fb::new(
        "SequenceMap",
        &inputs.iter().map(String::as_str).collect::<Vec<_>>(),
        &outputs.iter().map(String::as_str).collect::<Vec<_>>(),
        &["body"],
    );
    fb.add(&format!(
        "SequenceMap_{first}_seqlen = SequenceLength ({first})
         SequenceMap_{first}_cond = Constant <value = bool {{1}}> ()"
    ));
    let mut loop_inputs = vec![
        format!("SequenceMap_{first}_seqlen"),
        format!("SequenceMap_{first}_cond"),
    ];
    for (out, ty) in outputs.iter().zip(&out_types) {
        fb.add(&format!(
            "SequenceMap_{out}_seqempty = SequenceEmpty <dtype = {ty}> ()"
        ));
        loop_inputs.push(format!("SequenceMap_{out}_seqempty"));
    }
    fb.lines.push(format!(
        "{} = Loop ({}) <body: graph = {lb} ({}) => ({}) {{\n{}\n{}{}\n}}>",
        outputs.join(", "),
        loop_inputs.join(", "),
        lb_inputs.join(", "),
        lb_outputs.join(", "),
        lb_nodes.join("\n"),
        body_text,
        tail.join("\n")
    ));
    Some(fb)
}

const ATTENTION_INPUTS: [&str; 7] = [
    "Q",
    "K",
    "V",
    "attn_mask",
    "past_key",
    "past_value",
    "nonpad_kv_seqlen",
];
const ATTENTION_OUTPUTS: [&str; 4] = ["Y", "present_key", "present_value", "qk_matmul_output"];
const ATTENTION_ATTRS: [&str; 7] = [
    "is_causal",
    "kv_num_heads",
    "q_num_heads",
    "qk_matmul_output_mode",
    "scale",
    "softcap",
    "softmax_precision",
];

/// What both Attention builders read first: T1, the softmax precision, the head counts.
fn attention_common(ctx: &Context, since: i64) -> Option<(Fb, i64, i64, i64, i64)> {
    let t1 = i64::from(ctx.elem(0)?);
    let softmax_precision = attr_i(ctx, "softmax_precision").unwrap_or(t1);
    if ![FLOAT, BFLOAT16, FLOAT16, DOUBLE].contains(&softmax_precision) {
        return None;
    }
    let q_heads = attr_i(ctx, "q_num_heads").unwrap_or(0);
    let kv_heads = attr_i(ctx, "kv_num_heads").unwrap_or(0);
    let ninputs = if since >= 24 { 7 } else { 6 };
    let fb = Fb::new(
        "Attention",
        &ATTENTION_INPUTS[..ninputs],
        &ATTENTION_OUTPUTS,
        &ATTENTION_ATTRS,
    );
    Some((fb, t1, softmax_precision, q_heads, kv_heads))
}

/// The scale lines (shared by both releases' builders up to `One1D`/`Zero1D` placement).
fn attention_scale(ctx: &Context, fb: &mut Fb, t1: i64, v_head: bool, neg_one_1d: bool) {
    fb.add("QKHeadSize = Shape <start = 3, end = 4> (QReshaped)")
        .add(&format!("QKHeadSizeF = Cast <to = {FLOAT}> (QKHeadSize)"));
    if v_head {
        fb.add("VHeadSize = Shape <start = 3, end = 4> (VReshaped)");
    }
    fb.add("SqrtHeadSize = Sqrt (QKHeadSizeF)")
        .const1d_i("One1D", 1);
    if neg_one_1d {
        fb.const1d_i("NegOne1D", -1);
    }
    fb.const1d_f("One1DF", 1.0)
        .const1d_i("Zero1D", 0)
        .add("CalculatedScale = Div (One1DF, SqrtHeadSize)");
    let scale = attr_f(ctx, "scale");
    fb.lines.push(format!(
        "ScaleF = Constant <value = float {{{}}}> ()",
        float_text(scale.unwrap_or(1.0))
    ));
    fb.add(if scale.is_some() {
        "ScaleFactor = Identity (ScaleF)"
    } else {
        "ScaleFactor = Identity (CalculatedScale)"
    })
    .add("ScaleFactorSqrt = Sqrt (ScaleFactor)")
    .add(&format!(
        "ScaleFactorF = Cast <to = {t1}> (ScaleFactorSqrt)"
    ));
}

/// The softcap, softmax and qk_matmul_output lines (the same in ONNX 1.18 and 1.20).
fn attention_softmax(ctx: &Context, fb: &mut Fb, t1: i64, softmax_precision: i64) {
    let softcap = attr_f(ctx, "softcap").unwrap_or(0.0);
    if softcap != 0.0 {
        fb.const1d_f("Softcap", softcap).add(&format!(
            "SoftcapF = Cast <to = {t1}> (Softcap)
             SoftcapDiv = Div (QKAttnWeightWithBias, SoftcapF)
             SoftcapTanh = Tanh (SoftcapDiv)
             QKAttnWeightSoftcap = Mul (SoftcapTanh, SoftcapF)"
        ));
    } else {
        fb.add("QKAttnWeightSoftcap = Identity (QKAttnWeightWithBias)");
    }
    fb.add(&format!(
        "SoftmaxCast = Cast <to = {softmax_precision}> (QKAttnWeightSoftcap)
         AttnWeightSoftmax = Softmax (SoftmaxCast)
         SoftmaxOut = Cast <to = {t1}> (AttnWeightSoftmax)"
    ));
    if ctx.has_output(3) {
        fb.add(match attr_i(ctx, "qk_matmul_output_mode").unwrap_or(0) {
            1 => "qk_matmul_output = Identity (QKAttnWeightWithBias)",
            2 => "qk_matmul_output = Identity (QKAttnWeightSoftcap)",
            3 => "qk_matmul_output = Identity (AttnWeightSoftmax)",
            _ => "qk_matmul_output = Identity (QKAttnWeight)",
        });
    }
}

fn attention_present(ctx: &Context, fb: &mut Fb, past_len: bool) {
    if ctx.has_input(4) {
        fb.add("PresentKey = Concat <axis = 2> (past_key, KReshaped)");
        if past_len {
            fb.add("PastKVSeqLen = Shape <start = -2, end = -1> (past_key)");
        }
    } else {
        fb.add("PresentKey = Identity (KReshaped)");
        if past_len {
            fb.const1d_i("PastKVSeqLen", 0);
        }
    }
    if ctx.has_output(1) {
        fb.add("present_key = Identity (PresentKey)");
    }
    if ctx.has_input(5) {
        fb.add("PresentValue = Concat <axis = 2> (past_value, VReshaped)");
    } else {
        fb.add("PresentValue = Identity (VReshaped)");
    }
    if ctx.has_output(2) {
        fb.add("present_value = Identity (PresentValue)");
    }
}

/// Attention-23 as ONNX 1.18 builds it (ORT 1.23).
fn attention_onnx118(ctx: &Context, since: i64) -> Option<Fb> {
    let (mut fb, t1, softmax_precision, q_heads, kv_heads) = attention_common(ctx, since)?;
    fb.add("BatchSize = Shape <start = 0, end = 1> (Q)")
        .const1d_i("QNumHeadsAttr", q_heads)
        .const1d_i("KVNumHeadsAttr", kv_heads)
        .add(
            "QSeqLen = Shape <start = -2, end = -1> (Q)
             KVSeqLen = Shape <start = -2, end = -1> (K)",
        )
        .const1d_i("NegOne", -1)
        .add(
            "QNewShape = Concat <axis = 0> (BatchSize, QNumHeadsAttr, QSeqLen, NegOne)
             KVNewShape = Concat <axis = 0> (BatchSize, KVNumHeadsAttr, KVSeqLen, NegOne)
             QReshaped = Reshape (Q, QNewShape)
             KReshaped = Reshape (K, KVNewShape)
             VReshaped = Reshape (V, KVNewShape)
             QNumHeads = Shape <start = 1, end = 2> (QReshaped)
             KVNumHeads = Shape <start = 1, end = 2> (KReshaped)",
        );
    attention_scale(ctx, &mut fb, t1, false, false);
    attention_present(ctx, &mut fb, false);
    fb.add(
        "NewKVSeqLen = Shape <start = -2, end = -1> (PresentKey)
         AttnBiasShape = Concat <axis = -1> (QSeqLen, NewKVSeqLen)
         AttnBiasZeros = ConstantOfShape (AttnBiasShape)",
    )
    .const1d_f("FloatInf", f32::NEG_INFINITY);
    if ctx.has_input(3) {
        let u = ctx.elem(3)?;
        fb.add(if i64::from(u) == BOOL {
            "AttnBias = Where (attn_mask, AttnBiasZeros, FloatInf)"
        } else {
            "AttnBias = Add (attn_mask, AttnBiasZeros)"
        });
    } else if attr_i(ctx, "is_causal").unwrap_or(0) == 1 {
        fb.add(
            "TempMask = ConstantOfShape <value = bool[1] {1}> (AttnBiasShape)
             TempMaskTri = Trilu <upper = 0> (TempMask, Zero1D)
             AttnBias = Where (TempMaskTri, AttnBiasZeros, FloatInf)",
        );
    } else {
        fb.add("AttnBias = Identity (AttnBiasZeros)");
    }
    fb.add(&format!(
        "AttnBiasT = Cast <to = {t1}> (AttnBias)
         NGQACond1 = Equal (QNumHeads, KVNumHeads)
         GQACond1 = Not (NGQACond1)
         DivNumHeads = Div (QNumHeads, KVNumHeads)
         IDivNumHeads = Cast <to = {INT64}> (DivNumHeads)
         RemainderNumHeads = Mod (QNumHeads, KVNumHeads)
         GQACond2 = Equal (RemainderNumHeads, Zero1D)
         GQACond = And (GQACond1, GQACond2)
         InterleaveDim = Where (GQACond, IDivNumHeads, One1D)
         InterleaveShape = Concat <axis = 0> (One1D, InterleaveDim, One1D, One1D)
         KAttentionInput = Tile (PresentKey, InterleaveShape)
         VAttentionInput = Tile (PresentValue, InterleaveShape)
         KTranspose = Transpose <perm = [0, 1, 3, 2]> (KAttentionInput)
         QScaled = Mul (QReshaped, ScaleFactorF)
         KScaled = Mul (KTranspose, ScaleFactorF)
         QKAttnWeight = MatMul (QScaled, KScaled)
         QKAttnCast = Cast <to = {t1}> (QKAttnWeight)
         QKAttnWeightWithBias = Add (QKAttnCast, AttnBiasT)"
    ));
    attention_softmax(ctx, &mut fb, t1, softmax_precision);
    fb.add(&format!(
        "YExtraDim = MatMul (SoftmaxOut, VAttentionInput)
         YCast = Cast <to = {t1}> (YExtraDim)
         YPreReshape = Squeeze (YCast)"
    ));
    if q_heads != 0 && kv_heads != 0 {
        fb.add(
            "YTranspose = Transpose <perm = [0, 2, 1, 3]> (YPreReshape)
             YNewShape = Concat <axis = 0> (Zero1D, Zero1D, NegOne)
             Y = Reshape (YTranspose, YNewShape)",
        );
    } else {
        fb.add("Y = Identity (YPreReshape)");
    }
    Some(fb)
}

/// Attention-23 and -24 as ONNX 1.20 builds them (ORT 1.24 and later).
fn attention_onnx120(ctx: &Context, since: i64) -> Option<Fb> {
    let (mut fb, t1, softmax_precision, q_heads, kv_heads) = attention_common(ctx, since)?;
    let is_3d = q_heads > 0 && kv_heads > 0;
    fb.add(
        "BatchSize = Shape <start = 0, end = 1> (Q)
         QSeqLen = Shape <start = -2, end = -1> (Q)
         KVSeqLen = Shape <start = -2, end = -1> (K)",
    );
    if is_3d {
        fb.const1d_i("QNumHeadsAttr", q_heads)
            .const1d_i("KVNumHeadsAttr", kv_heads)
            .const1d_i("NegOne", -1)
            .add(
                "QIntermediateShape = Concat <axis = 0> (BatchSize, QSeqLen, QNumHeadsAttr, NegOne)
                 KVIntermediateShape = Concat <axis = 0> (BatchSize, KVSeqLen, KVNumHeadsAttr, NegOne)
                 QIntermediate = Reshape (Q, QIntermediateShape)
                 KIntermediate = Reshape (K, KVIntermediateShape)
                 VIntermediate = Reshape (V, KVIntermediateShape)
                 QReshaped = Transpose <perm = [0, 2, 1, 3]> (QIntermediate)
                 KReshaped = Transpose <perm = [0, 2, 1, 3]> (KIntermediate)
                 VReshaped = Transpose <perm = [0, 2, 1, 3]> (VIntermediate)",
            );
    } else {
        fb.add(
            "QReshaped = Identity (Q)
             KReshaped = Identity (K)
             VReshaped = Identity (V)",
        );
    }
    fb.add(
        "QNumHeads = Shape <start = 1, end = 2> (QReshaped)
         KVNumHeads = Shape <start = 1, end = 2> (KReshaped)",
    );
    attention_scale(ctx, &mut fb, t1, true, since >= 24);
    attention_present(ctx, &mut fb, true);
    // AttentionAppendFunctionCausalMask (padding for Attention-24).
    fb.add(
        "NewKVSeqLen = Shape <start = -2, end = -1> (PresentKey)
         AttnBiasShape = Concat <axis = 0> (QSeqLen, NewKVSeqLen)",
    )
    .const1d_f("FloatNegInf", f32::NEG_INFINITY)
    .const1d_f("ScalarZero", 0.0);
    if ctx.has_input(3) {
        let u = ctx.elem(3)?;
        fb.add(if i64::from(u) == BOOL {
            "AttnBiasShort = Where (attn_mask, ScalarZero, FloatNegInf)"
        } else {
            "AttnBiasShort = Identity (attn_mask)"
        });
        if since >= 24 {
            fb.add(
                "MaskKVSeqLen = Shape <start = -1> (attn_mask)
                 PaddingKVSeqLen = Sub (NewKVSeqLen, MaskKVSeqLen)
                 Pads = Concat <axis = 0> (Zero1D, PaddingKVSeqLen)
                 FloatNegInfCast = CastLike (FloatNegInf, AttnBiasShort)
                 AttnBias = Pad (AttnBiasShort, Pads, FloatNegInfCast, NegOne1D)",
            );
        } else {
            fb.add("AttnBias = Identity (AttnBiasShort)");
        }
    } else {
        fb.add("AttnBias = ConstantOfShape (AttnBiasShape)");
    }
    if attr_i(ctx, "is_causal").unwrap_or(0) == 1 {
        fb.const1d_i("Zero", 0).const1d_i("One", 1).add(
            "ZeroNoDim = Squeeze (Zero, Zero)
             OneNoDim = Squeeze (One, Zero)
             SequenceLength = Gather (AttnBiasShape, ZeroNoDim)
             TotalSequenceLength = Gather (AttnBiasShape, OneNoDim)
             RangeRow = Range (ZeroNoDim, SequenceLength, OneNoDim)
             RangeRow2D = Unsqueeze (RangeRow, One)
             RangeCol = Range (ZeroNoDim, TotalSequenceLength, OneNoDim)
             RangeCol2D = Unsqueeze (RangeCol, Zero)
             RangeRow2DPast = Add (RangeRow2D, PastKVSeqLen)
             BoolMaskTri = Less (RangeRow2DPast, RangeCol2D)
             MaskTri = Where (BoolMaskTri, FloatNegInf, ScalarZero)
             AttnBiasCausalOrNot = Add (AttnBias, MaskTri)",
        );
    } else {
        fb.add("AttnBiasCausalOrNot = Identity (AttnBias)");
    }
    let bias = if since >= 24 {
        if ctx.has_input(6) {
            fb.add(
                "KVSeqLenExpanded = Unsqueeze (nonpad_kv_seqlen, One1D)
                 KVSeqLen0D = Squeeze (KVSeqLen)
                 Zero0D = Constant <value = int64 {0}> ()
                 One0D = Constant <value = int64 {1}> ()
                 Range = Range (Zero0D, KVSeqLen0D, One0D)
                 PaddingMaskBool = Less (Range, KVSeqLenExpanded)
                 PaddingMaskFloat = Where (PaddingMaskBool, ScalarZero, FloatNegInf)
                 PaddingMask3D = Unsqueeze (PaddingMaskFloat, One1D)
                 PaddingMask4D = Unsqueeze (PaddingMask3D, One1D)
                 AttnBiasCausalPad = Add (AttnBiasCausalOrNot, PaddingMask4D)",
            );
        } else {
            fb.add("AttnBiasCausalPad = Identity (AttnBiasCausalOrNot)");
        }
        "AttnBiasCausalPad"
    } else {
        "AttnBiasCausalOrNot"
    };
    fb.add(&format!(
        "AttnBiasT = Cast <to = {t1}> ({bias})
         NGQACond1 = Equal (QNumHeads, KVNumHeads)
         GQACond1 = Not (NGQACond1)
         DivNumHeads = Div (QNumHeads, KVNumHeads)
         IDivNumHeads = Cast <to = {INT64}> (DivNumHeads)
         RemainderNumHeads = Mod (QNumHeads, KVNumHeads)
         GQACond2 = Equal (RemainderNumHeads, Zero1D)
         GQACond = And (GQACond1, GQACond2)
         InterleaveDim = Where (GQACond, IDivNumHeads, One1D)"
    ))
    .const1d_i("Two1D", 2)
    .add(&format!(
        "KUnsqueezed = Unsqueeze (PresentKey, Two1D)
         VUnsqueezed = Unsqueeze (PresentValue, Two1D)
         KExpandShape = Concat <axis = 0> (BatchSize, KVNumHeads, InterleaveDim, NewKVSeqLen, QKHeadSize)
         KExpanded = Expand (KUnsqueezed, KExpandShape)
         VExpandShape = Concat <axis = 0> (BatchSize, KVNumHeads, InterleaveDim, NewKVSeqLen, VHeadSize)
         VExpanded = Expand (VUnsqueezed, VExpandShape)
         KAttentionShape = Concat <axis = 0> (BatchSize, QNumHeads, NewKVSeqLen, QKHeadSize)
         VAttentionShape = Concat <axis = 0> (BatchSize, QNumHeads, NewKVSeqLen, VHeadSize)
         KAttentionInput = Reshape (KExpanded, KAttentionShape)
         VAttentionInput = Reshape (VExpanded, VAttentionShape)
         KTranspose = Transpose <perm = [0, 1, 3, 2]> (KAttentionInput)
         QScaled = Mul (QReshaped, ScaleFactorF)
         KScaled = Mul (KTranspose, ScaleFactorF)
         QKAttnWeight = MatMul (QScaled, KScaled)
         QKAttnCast = Cast <to = {t1}> (QKAttnWeight)
         QKAttnWeightWithBias = Add (QKAttnCast, AttnBiasT)"
    ));
    attention_softmax(ctx, &mut fb, t1, softmax_precision);
    fb.add("YPreReshape = MatMul (SoftmaxOut, VAttentionInput)");
    if is_3d {
        fb.add(
            "YTranspose = Transpose <perm = [0, 2, 1, 3]> (YPreReshape)
             YNewShape = Concat <axis = 0> (Zero1D, Zero1D, NegOne)
             Y = Reshape (YTranspose, YNewShape)",
        );
    } else {
        fb.add("Y = Identity (YPreReshape)");
    }
    Some(fb)
}

/// One node in the textual syntax (for copying a graph attribute into a body).
fn node_text(n: &crate::model::proto::NodeProto) -> Option<String> {
    use crate::model::proto::{GraphProto, ModelProto, OperatorSetIdProto};
    // Print through the text view: a one-node model, then take its node line(s).
    let model = ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(1),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: vec![n.clone()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let text = crate::model::text::print_model(&model).text;
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    Some(text.get(start + 1..end)?.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};
    use crate::session::{SGraph, SNode, Session};

    #[test]
    fn float_text_always_reads_as_float() {
        assert_eq!(float_text(1.0), "1.0");
        assert_eq!(float_text(1e-5), "1e-5");
        assert_eq!(float_text(0.5), "0.5");
    }

    /// The canonical one-line form of `tools/functions/check_builders.py`.
    fn canon(n: &NodeProto) -> String {
        let mut attrs: Vec<String> = n
            .attribute
            .iter()
            .map(|a| {
                let v = if let Some(r) = a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) {
                    format!("@{r}")
                } else {
                    match a.r#type() {
                        AttributeType::Int => a.i().to_string(),
                        AttributeType::Float => {
                            format!("f{}", (f64::from(a.f()) * 1e6).round() as i64)
                        }
                        AttributeType::String => format!("s{}", String::from_utf8_lossy(a.s())),
                        AttributeType::Ints => format!(
                            "[{}]",
                            a.ints
                                .iter()
                                .map(i64::to_string)
                                .collect::<Vec<_>>()
                                .join(",")
                        ),
                        AttributeType::Tensor => {
                            let t = a.t.clone().unwrap_or_default();
                            format!(
                                "T{}[{}]",
                                t.data_type(),
                                t.dims
                                    .iter()
                                    .map(i64::to_string)
                                    .collect::<Vec<_>>()
                                    .join(",")
                            )
                        }
                        AttributeType::Graph => "G".into(),
                        _ => "?".into(),
                    }
                };
                format!("{}={v}", a.name())
            })
            .collect();
        attrs.sort();
        format!(
            "{}={}<{}>({})",
            n.output.join(","),
            n.op_type(),
            attrs.join(";"),
            n.input.join(",")
        )
    }

    /// The probe node of a `#case` line, in a one-graph session.
    fn case_session(spec: &str) -> (Session, i64, i64) {
        let mut op = "";
        let (mut since, mut opset, mut nout, mut release) = (0, 0, 1, 25);
        let (mut inputs, mut attrs) = (Vec::new(), Vec::new());
        for (k, field) in spec.split_whitespace().enumerate() {
            match field.split_once('=') {
                None if k == 0 => op = field,
                Some(("since", v)) => since = v.parse().expect("since"),
                Some(("opset", v)) => opset = v.parse().expect("opset"),
                Some(("release", v)) => release = v.parse().expect("release"),
                Some(("outputs", v)) => nout = v.parse().expect("outputs"),
                Some(("inputs", v)) => inputs = v.split(',').map(str::to_string).collect(),
                Some(("attrs", v)) => {
                    for a in v.split(',').filter(|a| !a.is_empty()) {
                        let mut p = a.splitn(3, ':');
                        let (name, kind, val) = (
                            p.next().expect("name"),
                            p.next().expect("kind"),
                            p.next().expect("value"),
                        );
                        let mut ap = AttributeProto {
                            name: Some(name.into()),
                            ..Default::default()
                        };
                        match kind {
                            "i" => {
                                ap.i = Some(val.parse().expect("int"));
                                ap.r#type = Some(AttributeType::Int as i32);
                            }
                            "f" => {
                                ap.f = Some(val.parse().expect("float"));
                                ap.r#type = Some(AttributeType::Float as i32);
                            }
                            "s" => {
                                ap.s = Some(val.as_bytes().to_vec().into());
                                ap.r#type = Some(AttributeType::String as i32);
                            }
                            _ => {
                                ap.ints =
                                    val.split('|').map(|x| x.parse().expect("ints")).collect();
                                ap.r#type = Some(AttributeType::Ints as i32);
                            }
                        }
                        attrs.push(ap);
                    }
                }
                _ => {}
            }
        }
        let mut g = SGraph::default();
        let mut names = Vec::new();
        for (k, t) in inputs.iter().enumerate() {
            if t == "-" {
                names.push(Sym::EMPTY);
                continue;
            }
            let name = Sym::new(&format!("i{k}"));
            g.types.insert(name, Type::parse(t).expect("input type"));
            names.push(name);
        }
        g.nodes.push(SNode {
            attrs: attrs.into(),
            ..SNode::plain(
                Sym::EMPTY,
                Sym::new(op),
                Sym::AI_ONNX,
                Some(since),
                names,
                (0..nout).map(|k| Sym::new(&format!("o{k}"))).collect(),
            )
        });
        let session = Session {
            graphs: vec![g],
            ..Default::default()
        };
        (session, opset, release)
    }

    /// com.microsoft QuickGelu: ORT's `contrib_defs.cc` body, the constant of the input's type.
    #[test]
    fn quick_gelu_body() {
        for (ty, code) in [("float16", 10), ("float", 1)] {
            let (mut session, _, _) = case_session(&format!(
                "QuickGelu since=1 opset=13 inputs={ty} attrs=alpha:f:1.5"
            ));
            session.graphs[0].nodes[0].domain = "com.microsoft".into();
            let node = &session.graphs[0].nodes[0];
            let ctx = super::super::Context::new(&session, 0, node, 25);
            let f = build(&ctx, 1)
                .expect("QuickGelu has a builder")
                .expect("a body");
            let ops: Vec<&str> = f.node.iter().map(|n| n.op_type()).collect();
            assert_eq!(ops, ["Constant", "Mul", "Sigmoid", "Mul"], "{ty}");
            let alpha = f.node[0].attribute[0].t.clone().unwrap_or_default();
            assert_eq!(alpha.data_type(), code, "{ty}");
        }
        let (mut session, _, _) = case_session("QuickGelu since=1 opset=13 inputs=int32");
        session.graphs[0].nodes[0].domain = "com.microsoft".into();
        let node = &session.graphs[0].nodes[0];
        let ctx = super::super::Context::new(&session, 0, node, 25);
        assert!(
            build(&ctx, 1).expect("a builder").is_none(),
            "no body for int32"
        );
    }

    /// com.microsoft FastGelu: ORT's `bert_defs.cc` body, `Add` with the bias, `Identity`
    /// without, the four constants of the input's type.
    #[test]
    fn fast_gelu_body() {
        for (ty, code, bias) in [("float16", 10, true), ("float", 1, false)] {
            let inputs = if bias {
                format!("{ty},{ty}")
            } else {
                ty.to_string()
            };
            let (mut session, _, _) =
                case_session(&format!("FastGelu since=1 opset=13 inputs={inputs}"));
            session.graphs[0].nodes[0].domain = "com.microsoft".into();
            let node = &session.graphs[0].nodes[0];
            let ctx = super::super::Context::new(&session, 0, node, 25);
            let f = build(&ctx, 1)
                .expect("FastGelu has a builder")
                .expect("a body");
            let ops: Vec<&str> = f.node.iter().map(|n| n.op_type()).collect();
            let first = if bias { "Add" } else { "Identity" };
            assert_eq!(
                ops,
                [
                    "Constant", "Constant", "Constant", "Constant", first, "Mul", "Mul", "Add",
                    "Mul", "Tanh", "Add", "Mul", "Mul"
                ],
                "{ty}"
            );
            for c in &f.node[..4] {
                let t = c.attribute[0].t.clone().unwrap_or_default();
                assert_eq!(t.data_type(), code, "{ty}");
            }
        }
    }

    /// Every probe node of the fixture gets the body ONNX's own builder gives it
    /// (`tools/functions/check_builders.py` wrote them).
    #[test]
    fn builders_agree_with_onnx() {
        check_fixture(include_str!(
            "../../../tests/fixtures/functions/builders.txt"
        ));
    }

    /// Attention as the ONNX releases that ORT bundles build it.
    #[test]
    fn attention_agrees_with_the_bundled_onnx() {
        check_fixture(include_str!(
            "../../../tests/fixtures/functions/attention-onnx1.18.txt"
        ));
        check_fixture(include_str!(
            "../../../tests/fixtures/functions/attention-onnx1.20.txt"
        ));
    }

    fn check_fixture(text: &str) {
        let mut checked = 0;
        for block in text.split("#case ").skip(1) {
            let mut lines = block.lines();
            let spec = lines.next().expect("spec");
            let expected: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
            let (session, opset, release) = case_session(spec);
            let node = &session.graphs[0].nodes[0];
            let ctx = super::super::Context::new(&session, 0, node, release);
            let got = build(&ctx, opset).expect("a context-dependent op");
            if expected == ["declined"] {
                assert!(got.is_none(), "{spec}: ONNX declines, we built a body");
            } else {
                assert!(got.is_some(), "{spec}: ONNX builds a body, we declined");
                let f = got.expect("checked above");
                let mut mine = vec![format!(
                    "inputs {} outputs {}",
                    f.input.join(","),
                    f.output.join(",")
                )];
                mine.extend(f.node.iter().map(canon));
                assert_eq!(mine, expected, "{spec}");
            }
            checked += 1;
        }
        assert!(checked >= 4, "only {checked} cases");
    }
}
