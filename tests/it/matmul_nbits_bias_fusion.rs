//! `MatMulNBitsFusion`: the `Add` of a bias after a `com.microsoft.MatMulNBits` merged into the
//! node's input 5, on the CPU in every release (level `extended`), on CUDA from 1.28.

use onnx_lint::placer::{self, OptLevel};
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
