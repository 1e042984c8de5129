//! `SkipLayerNormFusion`: which bias it absorbs, the double LayerNormalization it leaves, the
//! dims it sees (of `Sum`, of inlined function bodies, of a `DynamicQuantizeMatMul`), each on a
//! model built for a single-model difference of the real-world corpora (CPU-only sessions
//! against the CPU `onnxruntime` wheels, `tools/realworld/cpu_truth.py`), with the answer the
//! CPU wheels (and, where noted, the stubbed-GPU oracle) gave.

use onnx_lint::placer::{self, OptLevel};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    crate::support::place_text(text, ort, level, eps)
}

/// Live `name op` of every graph's nodes, copies excluded, sorted.
fn nodes(p: &placer::Placement) -> Vec<String> {
    let mut v: Vec<String> = p
        .session
        .graphs
        .iter()
        .flat_map(|g| g.live_nodes())
        .filter(|(_, n)| !n.op.starts_with("Memcpy"))
        .map(|(_, n)| format!("{} {}", n.name, n.op))
        .collect();
    v.sort();
    v
}

fn cpu() -> Vec<Ep> {
    vec![Ep::Cpu]
}

fn cuda() -> Vec<Ep> {
    vec![Ep::Cuda, Ep::Cpu]
}

/// `Add(Add(x, bias), skip)` into a LayerNormalization, `bias` a graph input or an initializer.
fn skip_ln_bias(bias_is_input: bool) -> String {
    let (input, init) = if bias_is_input {
        (", float[8] bias", "")
    } else {
        ("", ",\n  float[8] bias = {1, 2, 3, 4, 5, 6, 7, 8}")
    };
    format!(
        r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float[b, s, 8] x, float[b, s, 8] skip{input}) => (float[b, s, 8] y)
<
  float[8] gamma = {{1, 1, 1, 1, 1, 1, 1, 1}},
  float[8] beta = {{0, 0, 0, 0, 0, 0, 0, 0}}{init}
>
{{
  [a2] xb = Add (x, bias)
  [a1] t = Add (xb, skip)
  [ln] y = LayerNormalization <axis = -1> (t, gamma, beta)
}}
"#
    )
}

#[test]
fn skip_layer_norm_takes_only_a_constant_bias() {
    // CPU wheels and the oracle (CUDA), 1.23.2, 1.24.4, 1.31.1: a bias that is a graph
    // input stays in its Add (`CheckSecondAdd`'s `NodeArgIsConstant`); an initializer is fused.
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for eps in [cpu(), cuda()] {
            let p = place(&skip_ln_bias(true), ort, OptLevel::All, eps.clone());
            assert_eq!(
                nodes(&p),
                ["SkipLayerNormalization SkipLayerNormalization", "a2 Add"],
                "{ort} {eps:?}"
            );
            let p = place(&skip_ln_bias(false), ort, OptLevel::All, eps);
            assert_eq!(
                nodes(&p),
                ["SkipLayerNormalization SkipLayerNormalization"],
                "{ort}"
            );
        }
    }
}

/// `Add(x, skip)` into a LayerNormalization, all in `ty`.
fn skip_ln_typed(ty: &str) -> String {
    format!(
        r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g ({ty}[b, s, 8] x, {ty}[b, s, 8] skip) => ({ty}[b, s, 8] y)
<
  {ty}[8] gamma = {{1, 1, 1, 1, 1, 1, 1, 1}},
  {ty}[8] beta = {{0, 0, 0, 0, 0, 0, 0, 0}}
>
{{
  [a1] t = Add (x, skip)
  [ln] y = LayerNormalization <axis = -1> (t, gamma, beta)
}}
"#
    )
}

#[test]
fn skip_layer_norm_leaves_a_double_layer_norm() {
    // CPU wheels 1.23.2 and 1.31.1, oracle 1.23.2, 1.24.4, 1.31.1: float16, float or bfloat16
    // only.
    for ort in ["1.23.2", "1.31.1"] {
        for eps in [cpu(), cuda()] {
            let p = place(&skip_ln_typed("double"), ort, OptLevel::All, eps.clone());
            assert_eq!(nodes(&p), ["a1 Add", "ln LayerNormalization"], "{ort}");
            let p = place(&skip_ln_typed("float"), ort, OptLevel::All, eps);
            assert_eq!(
                nodes(&p),
                ["SkipLayerNormalization SkipLayerNormalization"],
                "{ort}"
            );
        }
    }
}

/// The skip Add's first input comes from a `Sum`: its dims keep the inputs' symbols.
const SUM_INTO_SKIP_LN: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float[b, s, 8] x, float[b, s, 8] z, float[b, s, 8] skip) => (float[b, s, 8] y)
<
  float[8] gamma = {1, 1, 1, 1, 1, 1, 1, 1},
  float[8] beta = {0, 0, 0, 0, 0, 0, 0, 0}
>
{
  [sum] t = Sum (x, z)
  [a1] u = Add (t, skip)
  [ln] y = LayerNormalization <axis = -1> (u, gamma, beta)
}
"#;

/// An fp16 `Gelu` (opset 20) the CPU has no kernel for, inlined at partitioning; its output,
/// cast to float, is the skip Add's first input.
const INLINED_GELU_INTO_SKIP_LN: &str = r#"<
  ir_version: 9,
  opset_import: ["" : 20]
>
g (float16[b, s, 8] x, float[b, s, 8] skip) => (float[b, s, 8] y)
<
  float[8] gamma = {1, 1, 1, 1, 1, 1, 1, 1},
  float[8] beta = {0, 0, 0, 0, 0, 0, 0, 0}
>
{
  [gelu] g16 = Gelu (x)
  [cast] g32 = Cast <to = 1> (g16)
  [a1] u = Add (g32, skip)
  [ln] y = LayerNormalization <axis = -1> (u, gamma, beta)
}
"#;

#[test]
fn skip_layer_norm_sees_the_dims_of_sum_and_of_inlined_bodies() {
    // CPU wheels 1.23.2, 1.24.4, 1.31.1: both fused. The Add's inputs must have equal dims,
    // `b` and `s` by symbol: a Sum broadcasts them as Add does, and the Gelu body inlined at
    // partitioning gets its shapes from `Graph::Resolve` (the fp16 BERT of
    // `tests/fixtures/realworld/unseen2/fp16blk.dyn.bert.onnx`).
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let p = place(SUM_INTO_SKIP_LN, ort, OptLevel::All, cpu());
        assert_eq!(
            nodes(&p),
            ["SkipLayerNormalization SkipLayerNormalization", "sum Sum"],
            "{ort}"
        );
        let p = place(INLINED_GELU_INTO_SKIP_LN, ort, OptLevel::All, cpu());
        let got = nodes(&p);
        assert!(
            got.contains(&"SkipLayerNormalization SkipLayerNormalization".to_string())
                && got.iter().any(|n| n == " Erf")
                && !got.iter().any(|n| n.ends_with(" LayerNormalization")),
            "{ort}: {got:?}"
        );
    }
    // The oracle (CUDA, 1.31.1): CUDA has the fp16 Gelu; the three nodes are Gelu, Cast and
    // the fused node.
    let p = place(INLINED_GELU_INTO_SKIP_LN, "1.31.1", OptLevel::All, cuda());
    assert_eq!(
        nodes(&p),
        [
            "SkipLayerNormalization SkipLayerNormalization",
            "cast Cast",
            "gelu Gelu"
        ]
    );
}

/// A dynamically quantized MatMul (DynamicQuantizeLinear, MatMulInteger, Cast, the scale Mul
/// and a bias Add, as onnxruntime's `quantize_dynamic` writes it) feeding the skip Add.
const DYNAMIC_MATMUL_INTO_SKIP_LN: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float[b, 3, 4] x, float[b, 3, 4] skip) => (float[b, 3, 4] y)
<
  int8[4, 4] w = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
  int8 wz = {0},
  float ws = {0.5},
  float[4] bias = {0, 1, 2, 3},
  float[4] gamma = {1, 1, 1, 1},
  float[4] beta = {0, 0, 0, 0}
>
{
  [dql] xq, xs, xz = DynamicQuantizeLinear (x)
  [mmi] mi = MatMulInteger (xq, w, xz, wz)
  [cast] mf = Cast <to = 1> (mi)
  [scale] sc = Mul (xs, ws)
  [mul] mm = Mul (mf, sc)
  [badd] d = Add (bias, mm)
  [a1] t = Add (d, skip)
  [ln] y = LayerNormalization <axis = -1> (t, gamma, beta)
}
"#;

#[test]
fn skip_layer_norm_sees_the_dims_of_a_dynamic_quantize_matmul() {
    // CPU wheels 1.23.2, 1.24.4, 1.31.1, at `extended` and `all`: the MatMul becomes one
    // DynamicQuantizeMatMul (before the level-2 fusions), whose output keeps the `b` of its
    // input, so the skip Add and the LayerNorm fuse (`realworld/qdyn.vit.op13.onnx`; its
    // 1.23.2 session fails in both, on a ConvInteger without a CPU kernel).
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for level in [OptLevel::Extended, OptLevel::All] {
            let p = place(DYNAMIC_MATMUL_INTO_SKIP_LN, ort, level, cpu());
            assert_eq!(
                nodes(&p),
                [
                    "SkipLayerNormalization SkipLayerNormalization",
                    "mmi DynamicQuantizeMatMul"
                ],
                "{ort} {level:?}"
            );
        }
    }
}
