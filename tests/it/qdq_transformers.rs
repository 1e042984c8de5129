//! The QDQ transformers on models built for models of the unseen corpora, with the answers of
//! the CPU wheels and the stubbed-GPU oracle: `WhereDummyDq` (1.24 and later),
//! `QDQPropagationTransformer` on float8 Q/DQ pairs (the float8 QDQ ConvNeXt) and
//! `ReluQuantFusion` at level 2.

use onnx_lint::placer::{self, OptLevel, Outcome};
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

/// The 16-bit QDQ ViT's pattern: `Where(cond, DQ(xq), 0.0)` read by one `QuantizeLinear`.
const WHERE_SCALAR: &str = r#"<
  ir_version: 9,
  opset_import: ["" : 21]
>
g (bool[4] c, uint16[4] xq) => (uint16[4] y)
<
  float s = {0.5},
  uint16 z = {32767},
  float zero = {0.0}
>
{
  [dq] x = DequantizeLinear (xq, s, z)
  [w] wv = Where (c, x, zero)
  [q] y = QuantizeLinear (wv, s, z)
}
"#;

#[test]
fn where_dummy_dq_from_1_24() {
    let p = place(WHERE_SCALAR, "1.23.2", OptLevel::Basic, cuda());
    assert_eq!(names(&p), vec!["dq", "q", "w"]);
    for ort in ["1.24.4", "1.31.1"] {
        // CPU only: no copy between the new DQ and the Where.
        let p = place(WHERE_SCALAR, ort, OptLevel::Basic, vec![Ep::Cpu]);
        let g = &p.session.graphs[0];
        let dummy: Vec<_> = g
            .live_nodes()
            .filter(|(_, n)| n.name.starts_with("w_dummy_dq_token_"))
            .map(|(_, n)| n)
            .collect();
        assert_eq!(dummy.len(), 1, "{ort}: {:?}", names(&p));
        assert_eq!(dummy[0].op, "DequantizeLinear");
        let (_, w) = g.live_nodes().find(|(_, n)| n.name == "w").unwrap();
        assert_eq!(w.inputs[2], "w_dummy_dq", "{ort}");
        assert!(
            !g.initializers
                .contains_key(&onnx_lint::sym::Sym::new("zero")),
            "{ort}: the scalar nothing reads any more is dropped"
        );
    }
}

/// `Relu -> Transpose -> Q -> DQ` with a float8 (E4M3FN) zero point: `QDQPropagationTransformer`
/// copies the Q/DQ pair backwards across the Transpose (`a_q`, `a_dq`), since ORT asks only
/// that scale and zero point be constant scalars, whatever their element type. Measured at
/// `basic`: the CPU wheels of 1.23.2 and 1.31.1 save `r, a_q, a_dq, tr, q, dq`; the stubbed-GPU
/// oracle (1.23.2, 1.24.4, 1.31.1) places 6 nodes, all on CUDA. Before, the float8 zero point,
/// which this crate does not decode, stopped the propagation (`qdqf8.timm.convnext` of unseen3).
#[test]
fn float8_qdq_pairs_propagate_across_transpose() {
    let text = r#"<
  ir_version: 9,
  opset_import: ["" : 19]
>
g (float[2, 3] x) => (float[3, 2] y)
<
  float s = {0.5},
  float8e4m3fn z = {0}
>
{
  [r] a = Relu (x)
  [tr] t = Transpose <perm = [1, 0]> (a)
  [q] qt = QuantizeLinear (t, s, z)
  [dq] y = DequantizeLinear (qt, s, z)
}
"#;
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let p = place(text, ort, OptLevel::Basic, vec![Ep::Cpu]);
        assert_eq!(p.outcome, Outcome::Ok, "{ort}");
        let mut names: Vec<String> = p.session.graphs[0]
            .live_nodes()
            .map(|(_, n)| n.name.to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["a_dq", "a_q", "dq", "q", "r", "tr"], "{ort}");
        let p = place(text, ort, OptLevel::Basic, vec![Ep::Cuda, Ep::Cpu]);
        assert_eq!(p.outcome, Outcome::Ok, "{ort}");
        assert_eq!(p.session.graphs[0].live_nodes().count(), 6, "{ort}");
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
