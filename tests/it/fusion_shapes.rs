//! More mechanisms the third unseen corpus (`tests/fixtures/realworld/unseen3/`, issue 16)
//! exposed, each on a model built for it, with the answer the oracle (stubbed-GPU
//! `onnxruntime-gpu` 1.23.2, 1.24.4 and 1.31.1) recorded for it.

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

/// ConvNeXt's float8 QDQ (unseen3/qdqf8.timm.convnext): `LayerNormalization -> Transpose ->
/// Reshape -> Q -> DQ` with a `float8e4m3fn` zero point. `QDQPropagationTransformer` copies the
/// Q back over the Reshape and the Transpose as for int8 (oracle at `basic`: 9 nodes, the
/// int8 model the same); its scalar check reads shapes, not values.
fn f8_model(zp_type: &str) -> String {
    format!(
        r#"<
  ir_version: 9,
  opset_import: ["" : 20]
>
f8 (float[2, 3, 4] x) => (float[2, 12] y)
<
  float s = {{0.5}},
  {zp_type} z = {{0}},
  int64[2] shp = {{2, 12}},
  float[4] g = {{1, 1, 1, 1}},
  float[4] b = {{0, 0, 0, 0}}
>
{{
  [ln] ln = LayerNormalization <axis: int = -1> (x, g, b)
  [tr] t = Transpose <perm: ints = [0, 2, 1]> (ln)
  [rs] r = Reshape (t, shp)
  [q] q = QuantizeLinear (r, s, z)
  [dq] y = DequantizeLinear (q, s, z)
}}
"#
    )
}

#[test]
fn qdq_propagation_copies_a_float8_q() {
    for zp in ["float8e4m3fn", "int8"] {
        for ort in ["1.23.2", "1.24.4", "1.31.1"] {
            let p = place(&f8_model(zp), ort, OptLevel::Basic, cuda());
            let got: Vec<String> = nodes(&p, 0).into_iter().map(|(n, _)| n).collect();
            assert_eq!(
                got,
                ["dq", "ln", "ln_dq", "ln_q", "q", "rs", "t_dq", "t_q", "tr"],
                "{zp} {ort}"
            );
        }
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

/// A float8 QDQ MatMul at opset 20 (unseen3/qdqf8.timm.convnext): the QDQ selectors fuse it into
/// an ONNX-domain `QLinearMatMul`, whose opset-10 schema takes int8/uint8 only, and ORT's graph
/// resolve after the transformer fails the session (CPU wheels 1.23.2, 1.24.4, 1.31.1 at
/// `extended` and `all`: "Type Error: Type 'tensor(float8e4m3fn)' of input parameter (xq) of
/// operator (QLinearMatMul) in node (mm) is invalid."; `basic` keeps the MatMul and is fine).
/// At opset 21 the fused node passes the type check and finds no CPU kernel instead
/// (`QLinearMatMul(21)`), which is not simulated.
const F8_MATMUL: &str = r#"<
  ir_version: 9,
  opset_import: ["" : 20]
>
f8mm (float[2, 4] x) => (float[2, 3] y)
<
  float s = {0.5},
  float8e4m3fn z = {0},
  float8e4m3fn[4, 3] w = {56, 64, 56, 48, 56, 64, 56, 48, 56, 64, 56, 48},
  float ws = {0.25}
>
{
  [qx] xq = QuantizeLinear (x, s, z)
  [dqx] xd = DequantizeLinear (xq, s, z)
  [dqw] wd = DequantizeLinear (w, ws, z)
  [mm] m = MatMul (xd, wd)
  [qm] mq = QuantizeLinear (m, s, z)
  [dqm] y = DequantizeLinear (mq, s, z)
}
"#;

#[test]
fn float8_qlinear_matmul_below_opset_21_fails_the_type_check() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let p = place(F8_MATMUL, ort, OptLevel::Basic, vec![Ep::Cpu]);
        assert!(p.outcome.placed(), "{ort} basic: {:?}", p.outcome.error());
        for level in [OptLevel::Extended, OptLevel::All] {
            let p = crate::support::place_text_any(F8_MATMUL, ort, level, vec![Ep::Cpu]);
            assert_eq!(
                p.outcome.error(),
                Some(
                    "load: Type Error: Type 'tensor(float8e4m3fn)' of input parameter (xq) of \
                     operator (QLinearMatMul) in node (mm) is invalid."
                ),
                "{ort} {level:?}"
            );
        }
    }
}

/// `ReluQuantFusion` at level 2 (unseen3/qdqkeep.tv.deeplabv3, quantized with
/// `QDQKeepRemovableActivations`): a CPU `Relu` before a Q whose zero point is its type's minimum
/// (int8 -128) goes; one before a Q of another zero point stays; at `basic` (nodes not yet on the
/// CPU) both stay. CPU wheels 1.23.2, 1.24.4 and 1.31.1, the session graphs' node names.
const RELU_QUANT: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
rq (float[1, 4, 4, 4] x) => (float[1, 4, 4, 4] y1, float[1, 4, 4, 4] y2)
<
  float s = {0.05},
  int8 zmin = {-128},
  int8 z = {-100},
  int8[4, 4, 1, 1] w = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -16},
  float ws = {0.01},
  int8 wz = {0}
>
{
  [qx] xq = QuantizeLinear (x, s, z)
  [dqx] xd = DequantizeLinear (xq, s, z)
  [dqw] wd = DequantizeLinear (w, ws, wz)
  [conv] c = Conv (xd, wd)
  [qc] cq = QuantizeLinear (c, s, z)
  [dqc] cd = DequantizeLinear (cq, s, z)
  [relu_min] r1 = Relu (cd)
  [q1] r1q = QuantizeLinear (r1, s, zmin)
  [dq1] y1 = DequantizeLinear (r1q, s, zmin)
  [relu_other] r2 = Relu (cd)
  [q2] r2q = QuantizeLinear (r2, s, z)
  [dq2] y2 = DequantizeLinear (r2q, s, z)
}
"#;

#[test]
fn relu_before_a_q_at_its_minimum_goes_at_level_two() {
    let base = [
        "conv",
        "dq1",
        "dq2",
        "dqc",
        "dqc/duplicated",
        "dqw",
        "dqx",
        "q1",
        "q2",
        "qc",
        "qx",
    ];
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for (level, relus) in [
            (OptLevel::Basic, &["relu_min", "relu_other"][..]),
            (OptLevel::Extended, &["relu_other"][..]),
        ] {
            let p = place(RELU_QUANT, ort, level, vec![Ep::Cpu]);
            let got: Vec<String> = nodes(&p, 0).into_iter().map(|(n, _)| n).collect();
            let mut want: Vec<String> = base.iter().chain(relus).map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(got, want, "{ort} {level:?}");
        }
    }
}
