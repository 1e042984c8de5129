//! The shapes fusions need: each on a model built for a model of the third unseen corpus
//! (`tests/fixtures/realworld/unseen3/`) or the second, with the answer the oracle (stubbed-GPU
//! `onnxruntime-gpu` 1.23.2, 1.24.4 and 1.31.1) recorded for it: the RNN ops' output ranks for
//! `MatMulAddFusion`, `ReshapeFusion`'s gathered dims, `SimplifiedLayerNormalization`'s output
//! shape for `NoopElimination`, `QuickGelu`'s for `MatMulScaleFusion`.

use onnx_lint::placer::{self, OptLevel};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    crate::support::place_text(text, ort, level, eps)
}

/// Live node names and providers of graph `gi`, sorted.
fn nodes(p: &placer::Placement, gi: usize) -> Vec<(String, Option<Ep>)> {
    let mut v: Vec<(String, Option<Ep>)> = p.session.graphs[gi]
        .live_nodes()
        .map(|(_, n)| (n.name.to_string(), n.ep))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Live node names of the main graph, copies excluded.
fn names(p: &placer::Placement) -> Vec<String> {
    let mut v: Vec<String> = p.session.graphs[0]
        .live_nodes()
        .filter(|(_, n)| !n.op.starts_with("Memcpy"))
        .map(|(_, n)| n.name.to_string())
        .collect();
    v.sort();
    v
}

fn cuda() -> Vec<Ep> {
    vec![Ep::Cuda, Ep::Cpu]
}

/// LSTM and GRU outputs, each reduced to rank 2 (`Squeeze`, `Gather`), then `MatMul` + `Add`:
/// `MatMulAddFusion` needs the rank of its first input, which only the RNN ops' shape
/// inference gives (`Y` `[seq, dirs, batch, hidden]`, `Y_h` `[dirs, batch, hidden]`).
const RNN_SHAPES: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
rnn (float[5, n, 3] X) => (float[n, 2] out1, float[n, 2] out2, float[n, 2] out3)
<
  float[1, 8, 3] W = {0.42, 0.72, 0, 0.3, 0.15, 0.09, 0.19, 0.35, 0.4, 0.54, 0.42, 0.69, 0.2, 0.88, 0.03, 0.67, 0.42, 0.56, 0.14, 0.2, 0.8, 0.97, 0.31, 0.69},
  float[1, 8, 2] R = {0.88, 0.89, 0.09, 0.04, 0.17, 0.88, 0.1, 0.42, 0.96, 0.53, 0.69, 0.32, 0.69, 0.83, 0.02, 0.75},
  float[2, 3, 3] Wg = {0.99, 0.75, 0.28, 0.79, 0.1, 0.45, 0.91, 0.29, 0.29, 0.13, 0.02, 0.68, 0.21, 0.27, 0.49, 0.05, 0.57, 0.15},
  float[2, 3, 1] Rg = {0.59, 0.7, 0.1, 0.41, 0.69, 0.41},
  float[2, 2] W1 = {0.05, 0.54, 0.66, 0.51},
  float[2, 2] W2 = {0.94, 0.59, 0.9, 0.14},
  float[1, 2] W3 = {0.14, 0.81},
  float[2] b = {0.4, 0.17},
  int64[1] ax1 = {1},
  int64[1] ax0 = {0},
  int64 i0 = {0},
  int64 i1 = {1}
>
{
  [lstm] Y, Yh = LSTM <hidden_size: int = 2> (X, W, R)
  [sq_y] ys = Squeeze (Y, ax1)
  [ga_y] g = Gather (ys, i0)
  [mm1] m1 = MatMul (g, W1)
  [add1] out1 = Add (m1, b)
  [sq_h] hh = Squeeze (Yh, ax0)
  [mm2] m2 = MatMul (hh, W2)
  [add2] out2 = Add (m2, b)
  [gru] "", Gh = GRU <direction: string = "bidirectional", hidden_size: int = 1> (X, Wg, Rg)
  [ga_g] gg = Gather (Gh, i1)
  [mm3] m3 = MatMul (gg, W3)
  [add3] out3 = Add (m3, b)
}
"#;

/// The tf2onnx GRU's pattern (unseen3/tf.lstm-gru): a Loop body `Gather`s a step of an outer
/// LSTM's squeezed `Y`, then `MatMul` + `Add`.
const RNN_LOOP: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
rnnloop (float[5, n, 3] X, int64 trip, bool cond, float[n, 2] acc0) => (float[n, 2] acc_final)
<
  float[1, 8, 3] W = {0.42, 0.72, 0, 0.3, 0.15, 0.09, 0.19, 0.35, 0.4, 0.54, 0.42, 0.69, 0.2, 0.88, 0.03, 0.67, 0.42, 0.56, 0.14, 0.2, 0.8, 0.97, 0.31, 0.69},
  float[1, 8, 2] R = {0.88, 0.89, 0.09, 0.04, 0.17, 0.88, 0.1, 0.42, 0.96, 0.53, 0.69, 0.32, 0.69, 0.83, 0.02, 0.75},
  float[2, 2] W1 = {0.05, 0.54, 0.66, 0.51},
  float[2] b = {0.4, 0.17},
  int64[1] ax1 = {1}
>
{
  [lstm] Y = LSTM <hidden_size: int = 2> (X, W, R)
  [sq_y] ys = Squeeze (Y, ax1)
  [loop] acc_final = Loop (trip, cond, acc0) <body: graph = body (int64 it, bool c, float[unk, 2] acc) => (bool c_out, float[unk, 2] acc_out) {
    [body_gather] bg = Gather (ys, it)
    [body_mm] bm = MatMul (bg, W1)
    [body_add] ba = Add (bm, b)
    [body_acc] acc_out = Add (acc, ba)
    [body_cond] c_out = Identity (c)
  }>
}
"#;

#[test]
fn rnn_shapes_let_matmul_add_fusion_see_rank_two() {
    let (cu, cpu) = (Some(Ep::Cuda), Some(Ep::Cpu));
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        // The oracle at `all`: the three MatMuls fused, the GRU on the CPU, two copies.
        let p = place(RNN_SHAPES, ort, OptLevel::All, cuda());
        let want: Vec<(String, Option<Ep>)> = [
            ("Memcpy", cu),
            ("Memcpy_token_0", cu),
            ("ga_g", cu),
            ("ga_y", cu),
            ("gru", cpu),
            ("lstm", cu),
            ("mm1/MatMulAddFusion", cu),
            ("mm2/MatMulAddFusion", cu),
            ("mm3/MatMulAddFusion", cu),
            ("sq_h", cu),
            ("sq_y", cu),
        ]
        .into_iter()
        .map(|(n, e)| (n.to_string(), e))
        .collect();
        assert_eq!(nodes(&p, 0), want, "{ort}");
        assert_eq!(p.copies.len(), 2, "{ort}");
        // At `disable` nothing fuses.
        let p = place(RNN_SHAPES, ort, OptLevel::Disable, cuda());
        assert!(nodes(&p, 0).iter().any(|(n, _)| n == "add1"), "{ort}");
        // The Loop body: 8 nodes at `disable`, 7 at `all` (every one on CUDA, no copy).
        let p = place(RNN_LOOP, ort, OptLevel::All, cuda());
        let body = nodes(&p, 1);
        assert_eq!(
            body.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            [
                "body_acc",
                "body_cond",
                "body_gather",
                "body_mm/MatMulAddFusion"
            ],
            "{ort}"
        );
        assert!(
            body.iter().chain(&nodes(&p, 0)).all(|(_, e)| *e == cu),
            "{ort}"
        );
        assert!(p.copies.is_empty(), "{ort}");
    }
}

/// LeViT's attention downsample (unseen3/timm.levit): `Reshape(x, Concat(Unsqueeze(Gather(
/// Shape(x), 0)), 4, 4, Unsqueeze(Gather(Shape(x), 2))))`. The last part gathers dim 2 at
/// position 3, so it is no 0 but a one-element part: `ReshapeFusion` makes the shape
/// `[0, 4, 4, -1]` and the whole chain goes (oracle at `basic`: `relu` and `reshape` left).
const LEVIT_CONCAT: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
lv (float[n, 16, 8] inp) => (float[n, 4, 4, 8] y)
<
  int64 i0 = {0},
  int64 i2 = {2},
  int64[1] ax = {0},
  int64[1] four = {4}
>
{
  [relu] x = Relu (inp)
  [shape] s = Shape (x)
  [g0] g0 = Gather (s, i0)
  [g2] g2 = Gather (s, i2)
  [u0] u0 = Unsqueeze (g0, ax)
  [u2] u2 = Unsqueeze (g2, ax)
  [concat] shp = Concat <axis: int = 0> (u0, four, four, u2)
  [reshape] y = Reshape (x, shp)
}
"#;

#[test]
fn reshape_fusion_gives_an_unmatched_gathered_dim_minus_one() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let p = place(LEVIT_CONCAT, ort, OptLevel::Basic, cuda());
        let got: Vec<String> = nodes(&p, 0).into_iter().map(|(n, _)| n).collect();
        assert_eq!(got, ["relu", "reshape"], "{ort}");
        let g = &p.session.graphs[0];
        let shape = g
            .initializers
            .get(&onnx_lint::sym::Sym::new("shp"))
            .and_then(|i| onnx_lint::infer::eval::Tensor::from_proto(&i.tensor))
            .map(|t| t.as_i64());
        assert_eq!(shape, Some(vec![0, 4, 4, -1]), "{ort}");
        let (_, r) = g.live_nodes().find(|(_, n)| n.name == "reshape").unwrap();
        assert_eq!(r.inputs[1], "shp", "{ort}");
    }
}

/// ORT's transformer optimizer writes T5's RMS norms as ONNX-domain
/// `SimplifiedLayerNormalization` (unseen3/ortopt.t5): its Y has X's shape, so the `Mul` by 1
/// after it has a rank and `NoopElimination` removes it (oracle at `basic`: 2 nodes).
const SLN_MUL_ONE: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
sln (float[n, 3, 8] x) => (float[n, 3, 8] y)
<
  float[8] w = {1, 1, 1, 1, 1, 1, 1, 1},
  float one = {1}
>
{
  [sln] n = SimplifiedLayerNormalization <axis: int = -1, epsilon: float = 1e-06> (x, w)
  [mul] m = Mul (n, one)
  [relu] y = Relu (m)
}
"#;

#[test]
fn onnx_domain_simplified_layer_norm_keeps_its_input_shape() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let p = place(SLN_MUL_ONE, ort, OptLevel::Basic, cuda());
        let got: Vec<String> = nodes(&p, 0).into_iter().map(|(n, _)| n).collect();
        assert_eq!(got, ["relu", "sln"], "{ort}");
    }
}

/// `Add(x, bias)` → `com.microsoft.QuickGelu` → `MatMul(Mul(., 0.5), w)`: the scale fuses
/// into the MatMul only when QuickGelu's output has a shape (input 0's, as its schema says).
const QUICKGELU_SCALE: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17, "com.microsoft" : 1]
>
g (float[n, 7, 8] x) => (float[n, 7, 4] y)
<
  float half = {0.5},
  float[8, 4] w = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8}
>
{
  [qg] a = com.microsoft.QuickGelu <alpha = 1.702> (x)
  [scale] b = Mul (a, half)
  [mm] y = MatMul (b, w)
}
"#;

#[test]
fn quick_gelu_keeps_the_shape_matmul_scale_fusion_needs() {
    let p = place(QUICKGELU_SCALE, "1.31.1", OptLevel::All, cuda());
    let n = names(&p);
    assert!(n.contains(&"mm/MatMulScaleFusion/".to_string()), "{n:?}");
    assert!(!n.contains(&"scale".to_string()), "{n:?}");
}
