//! The mechanisms the second unseen corpus (`tests/fixtures/realworld/unseen2/`, issue 16)
//! exposed, each on a model built for it: `ExpandElimination`'s rule, `MatMulNBitsFusion`
//! (CPU in every release, CUDA from 1.28), `WhereDummyDq` (1.24 and later) and the contrib
//! schemas' shape inference that `MatMulScaleFusion` depends on, and the copy planner's kernel
//! look-up that fails a fused `Squeeze` at opset 21 on 1.23.2.

use std::path::Path;

use onnx_lint::placer::{self, OptLevel, Options, Outcome};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    crate::support::place_text(text, ort, level, eps)
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

/// `Expand(x, target)` then `Relu`: ORT removes the Expand when the 1-D int64 target is no
/// longer than x and each of its trailing dims is 1 or equal to x's known dim.
fn expand_model(target_dims: usize, target: &str) -> String {
    format!(
        r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float[n, 5] x) => (float[n, 5] y)
<
  int64[{target_dims}] t = {{{target}}}
>
{{
  [e] ex = Expand (x, t)
  [r] y = Relu (ex)
}}
"#
    )
}

#[test]
fn expand_elimination_follows_orts_rule() {
    for (dims, target, removed) in [
        // Ones over an unknown dim: the dynamo whisper's `Expand(x, [1, 1])`.
        (2, "1, 1", true),
        (2, "1, 5", true),
        (1, "5", true),
        // A dim over 1 where x's is unknown, a different known dim, a longer target: kept.
        (2, "3, 5", false),
        (2, "1, 4", false),
        (3, "1, 1, 1", false),
    ] {
        let p = place(
            &expand_model(dims, target),
            "1.31.1",
            OptLevel::Basic,
            cuda(),
        );
        assert_eq!(
            !names(&p).contains(&"e".to_string()),
            removed,
            "target [{target}]: {:?}",
            names(&p)
        );
    }
}

/// A 4-bit `MatMulNBits` (K 64, N 32) whose only reader is an `Add` of a bias of N elements.
const NBITS_BIAS: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17, "com.microsoft" : 1]
>
g (float[1, 7, 64] a, uint8[32, 2, 16] b, float[64] s) => (float[1, 7, 32] y)
<
  float[32] bias = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
>
{
  [mm] m = com.microsoft.MatMulNBits <K = 64, N = 32, bits = 4, block_size = 32> (a, b, s)
  [add] y = Add (m, bias)
}
"#;

#[test]
fn matmul_nbits_bias_fusion_by_release_and_provider() {
    // CUDA: ORT 1.24 keeps the Add; 1.28 and later merge it into input 5 of `mm`.
    for (ort, fused) in [("1.24.4", false), ("1.28.0", true), ("1.31.1", true)] {
        let p = place(NBITS_BIAS, ort, OptLevel::All, cuda());
        assert_eq!(!names(&p).contains(&"add".to_string()), fused, "{ort}");
        if fused {
            let g = &p.session.graphs[0];
            let (_, mm) = g.live_nodes().find(|(_, n)| n.name == "mm").unwrap();
            assert_eq!(mm.inputs.get(5).map(|i| i.as_str()), Some("bias"));
            assert_eq!(mm.outputs, vec!["y".to_string()]);
        }
    }
    // CPU only: fused in every release, at `extended` and above, not at `basic`.
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        let p = place(NBITS_BIAS, ort, OptLevel::Extended, vec![Ep::Cpu]);
        assert_eq!(names(&p), vec!["mm".to_string()], "{ort}");
        let p = place(NBITS_BIAS, ort, OptLevel::Basic, vec![Ep::Cpu]);
        assert!(names(&p).contains(&"add".to_string()), "{ort}");
    }
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

/// `Relu` read by two `Gather`s (scalar indices 0 and 1 along axis 0 of a dim of 2): at `all`,
/// `GatherSliceToSplitFusion` makes a `Split` and one `Squeeze` per Gather on the CUDA provider.
fn split_squeeze_model(opset: i64) -> String {
    format!(
        r#"<
  ir_version: 10,
  opset_import: ["" : {opset}]
>
g (float[2, 4] x) => (float[4] y0, float[4] y1)
<
  int64 i0 = {{0}},
  int64 i1 = {{1}}
>
{{
  [r] rx = Relu (x)
  [g0] a = Gather <axis = 0> (rx, i0)
  [g1] b = Gather <axis = 0> (rx, i1)
  [n0] y0 = Neg (a)
  [n1] y1 = Neg (b)
}}
"#
    )
}

/// ORT's copy planner (`TransformerMemcpyImpl::ProcessInitializers`) looks up the kernel of
/// every CUDA node before adding copies: the fusion's `Squeeze` takes since-version 21 in an
/// opset-21 model, which ORT 1.23.2's CUDA `Squeeze` (registered for 13+, so matching 13 alone)
/// does not serve, so the session fails with no copy (the oracle on
/// `unseen2/vc21.tsd.mistral.L2.onnx`); 1.24.4 registers `Squeeze` 21-22, and at opset 17 the
/// Squeeze is version 13.
#[test]
fn fused_squeeze_without_a_cuda_kernel_fails_copy_planning() {
    let run = |opset: i64, ort: &str| {
        let proto = onnx_lint::model::text::parse_model(&split_squeeze_model(opset)).unwrap();
        let model = onnx_lint::model::Model::from_proto(Path::new("m.onnx"), 0, proto).unwrap();
        let table = onnx_lint::tables::resolve(ort).unwrap().table();
        placer::place(
            &model,
            table,
            &Options {
                eps: cuda(),
                level: OptLevel::All,
                ..Default::default()
            },
        )
    };
    let p = run(21, "1.23.2");
    match &p.outcome {
        Outcome::InitFail(e) => assert!(e.contains("Failed to find kernel for Squeeze(21)"), "{e}"),
        o => panic!("1.23.2 opset 21: expected the copy planner to fail, got {o:?}"),
    }
    assert!(p.copies.is_empty(), "no copy is added before the failure");
    let at = p.failed_node.expect("the failing node");
    assert_eq!(p.session.graphs[at.graph()].nodes[at.node()].op, "Squeeze");
    // The fusion did run, on CUDA.
    assert!(
        p.session.graphs[0]
            .live_nodes()
            .any(|(_, n)| n.op == "Split" && n.ep == Some(Ep::Cuda))
    );
    for (opset, ort) in [(21, "1.24.4"), (21, "1.31.1"), (17, "1.23.2")] {
        let p = run(opset, ort);
        assert_eq!(p.outcome, Outcome::Ok, "{ort} opset {opset}");
        assert!(
            p.session.graphs[0]
                .live_nodes()
                .any(|(_, n)| n.op == "Squeeze" && n.ep == Some(Ep::Cuda) && n.kernel.is_some()),
            "{ort} opset {opset}: the fused Squeeze runs on CUDA"
        );
    }
}
