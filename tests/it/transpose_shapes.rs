//! The shapes the level-1 TransposeOptimizer needs (issue 16, `unseen3/ortopt.unet`): ORT's
//! broadcast handler pushes a Transpose through an `Add` only when the rank of every input is
//! known (`NormalizeInputRanks`, `onnx_transpose_optimization.cc`), so the outputs of ORT's
//! diffusion contrib ops (`diffusion_defs.cc`: GroupNorm, SkipGroupNorm, BiasAdd, BiasSplitGelu;
//! NhwcConv's `convPoolShapeInferenceNhwc`) and of `Resize` (ONNX's `resizeShapeInference`)
//! need their shape inference. Each chain is `op -> Transpose -> Add(., Transpose(input)) ->
//! Transpose`; with the ranks known, the Transposes cancel. The probes and their truth:
//! `tools/realworld/misc_probes.py` (the stubbed-GPU oracle and the CPU wheels).

use onnx_lint::placer::{self, OptLevel};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    crate::support::place_text(text, ort, level, eps)
}

/// Live (name, op) of the main graph, sorted.
fn nodes(p: &placer::Placement) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p.session.graphs[0]
        .live_nodes()
        .map(|(_, n)| (n.name.to_string(), n.op.to_string()))
        .collect();
    v.sort();
    v
}

fn named(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort();
    v
}

const NHWC_DIFFUSION: &str = r#"
<
  ir_version: 8,
  opset_import: ["" : 17, "com.microsoft" : 1]
>
nhwc (float[1, 8, 8, 4] x, float[1, 8, 8, 4] x1, float[1, 8, 8, 4] x2, float[1, 8, 8, 4] x3, float[1, 8, 8, 4] x4, float[1, 16, 4] e, float[1, 16, 4] e1, float[1, 16, 8] f, float[1, 16, 4] f1) => (float[1, 8, 8, 4] y1, float[1, 8, 8, 4] y2, float[1, 8, 8, 4] y3, float[1, 8, 8, 4] y4, float[1, 16, 4] y5, float[1, 16, 4] y6)
<
  float[4, 1, 1, 4] w = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6},
  float[4] b = {0.1, 0.2, 0.3, 0.4},
  float[4] gamma = {1, 1, 1, 1},
  float[4] beta = {0, 0, 0, 0},
  float[8] bias8 = {0, 0, 0, 0, 0, 0, 0, 0}
>
{
  [cv] c = com.microsoft.NhwcConv <kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1], dilations = [1, 1], group = 1> (x, w, b)
  [cv_t] ct = Transpose <perm = [0, 3, 1, 2]> (c)
  [x1_t] x1t = Transpose <perm = [0, 3, 1, 2]> (x1)
  [cv_add] ca = Add (ct, x1t)
  [cv_out] y1 = Transpose <perm = [0, 2, 3, 1]> (ca)
  [gn] g = com.microsoft.GroupNorm <groups = 2, activation = 0, epsilon = 0.00001> (x2, gamma, beta)
  [gn_t] gt = Transpose <perm = [0, 3, 1, 2]> (g)
  [x3_t] x3t = Transpose <perm = [0, 3, 1, 2]> (x3)
  [gn_add] ga = Add (gt, x3t)
  [gn_out] y2 = Transpose <perm = [0, 2, 3, 1]> (ga)
  [sgn] s0, s1 = com.microsoft.SkipGroupNorm <groups = 2, activation = 0, epsilon = 0.00001> (x2, gamma, beta, x4)
  [s0_t] s0t = Transpose <perm = [0, 3, 1, 2]> (s0)
  [s1_t] s1t = Transpose <perm = [0, 3, 1, 2]> (s1)
  [sgn_add] sa = Add (s0t, s1t)
  [sgn_out] y3 = Transpose <perm = [0, 2, 3, 1]> (sa)
  [sgn_relu] sr = Relu (sa)
  [sgn_out2] y4 = Transpose <perm = [0, 2, 3, 1]> (sr)
  [ba] bo = com.microsoft.BiasAdd (e, b, e1)
  [ba_t] bt = Transpose <perm = [0, 2, 1]> (bo)
  [f1_t] f1t = Transpose <perm = [0, 2, 1]> (f1)
  [ba_add] bsum = Add (bt, f1t)
  [ba_out] y5 = Transpose <perm = [0, 2, 1]> (bsum)
  [bsg] go = com.microsoft.BiasSplitGelu (f, bias8)
  [bsg_t] got = Transpose <perm = [0, 2, 1]> (go)
  [e_t] et = Transpose <perm = [0, 2, 1]> (e)
  [bsg_add] gsum = Add (got, et)
  [bsg_out] y6 = Transpose <perm = [0, 2, 1]> (gsum)
}
"#;

const RESIZE: &str = r#"
<
  ir_version: 8,
  opset_import: ["" : 17]
>
rs (float[n, 4, 4, 4] x, float[n, 4, 8, 8] x1, float[1, 4, 4, 4] x2, float[1, 4, 8, 8] x3) => (float[n, 4, 8, 8] y1, float[1, 4, 8, 8] y2)
<
  float[4] scales = {1, 1, 2, 2},
  int64[4] sizes = {1, 4, 8, 8}
>
{
  [rs] r = Resize <mode = "nearest"> (x, , scales)
  [rs_t] rt = Transpose <perm = [0, 2, 3, 1]> (r)
  [x1_t] x1t = Transpose <perm = [0, 2, 3, 1]> (x1)
  [add] a = Add (rt, x1t)
  [out] y1 = Transpose <perm = [0, 3, 1, 2]> (a)
  [rs2] r2 = Resize <mode = "nearest"> (x2, , , sizes)
  [rs2_t] r2t = Transpose <perm = [0, 2, 3, 1]> (r2)
  [x3_t] x3t = Transpose <perm = [0, 2, 3, 1]> (x3)
  [add2] a2 = Add (r2t, x3t)
  [out2] y2 = Transpose <perm = [0, 3, 1, 2]> (a2)
}
"#;

/// Measured with the stubbed-GPU oracle (1.23.2, 1.24.4, 1.31.1; `basic` and `all`): every
/// Transpose is gone and the 11 nodes left are all on CUDA (27 in the model). The CPU wheels
/// fail the session (no CPU NhwcConv), as the placer does.
#[test]
fn diffusion_contrib_outputs_have_ranks_for_the_transpose_optimizer() {
    let want = named(&[
        ("ba", "BiasAdd"),
        ("ba_add", "Add"),
        ("bsg", "BiasSplitGelu"),
        ("bsg_add", "Add"),
        ("cv", "NhwcConv"),
        ("cv_add", "Add"),
        ("gn", "GroupNorm"),
        ("gn_add", "Add"),
        ("sgn", "SkipGroupNorm"),
        ("sgn_add", "Add"),
        ("sgn_relu", "Relu"),
    ]);
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for level in [OptLevel::Basic, OptLevel::All] {
            let p = place(NHWC_DIFFUSION, ort, level, vec![Ep::Cuda, Ep::Cpu]);
            assert_eq!(nodes(&p), want, "{ort} {level:?}");
            assert!(
                p.session.graphs[0]
                    .live_nodes()
                    .all(|(_, n)| n.ep == Some(Ep::Cuda)),
                "{ort} {level:?}"
            );
            assert!(p.copies.is_empty(), "{ort} {level:?}");
        }
    }
}

/// Measured with the stubbed-GPU oracle and the CPU wheels (1.23.2, 1.24.4, 1.31.1; `basic`
/// and `all`): `rs, add, rs2, add2` are left, the Transposes cancel through both Adds (a
/// constant `scales`, and a constant `sizes`); all on CUDA in the CUDA session.
#[test]
fn resize_output_has_a_rank_for_the_transpose_optimizer() {
    let want = named(&[
        ("add", "Add"),
        ("add2", "Add"),
        ("rs", "Resize"),
        ("rs2", "Resize"),
    ]);
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for level in [OptLevel::Basic, OptLevel::All] {
            for eps in [vec![Ep::Cuda, Ep::Cpu], vec![Ep::Cpu]] {
                let p = place(RESIZE, ort, level, eps.clone());
                assert_eq!(nodes(&p), want, "{ort} {level:?} {eps:?}");
                let ep = eps[0];
                assert!(
                    p.session.graphs[0]
                        .live_nodes()
                        .all(|(_, n)| n.ep == Some(ep)),
                    "{ort} {level:?}"
                );
            }
        }
    }
}
