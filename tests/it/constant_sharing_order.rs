//! Which of equal initializers `ConstantSharing` keeps (issue 16, `unseen2/ortopt-fp16.clip`):
//! the first in the order ORT walks `Graph::GetAllInitializedTensors()`, a
//! `std::unordered_map<std::string, const TensorProto*>` (libstdc++'s bucket order:
//! `session::initializer_map`), not simply the newest. Two probes, twelve and fourteen
//! initializers, `two_a` and `two_b` equal; recorded with the CPU wheels and the stubbed-GPU
//! oracle by `tools/realworld/misc_probes.py`.

use onnx_lint::placer::{self, OptLevel};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    crate::support::place_text(text, ort, level, eps)
}

/// The second input of nodes `mul` and `sub`.
fn shared(p: &placer::Placement) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p.session.graphs[0]
        .live_nodes()
        .filter(|(_, n)| n.name == "mul" || n.name == "sub")
        .map(|(_, n)| (n.name.clone(), n.inputs[1].clone()))
        .collect();
    v.sort();
    v
}

const SHARE_12: &str = r#"
<
  ir_version: 8,
  opset_import: ["" : 17]
>
cs (float[1] a0) => (float[1] y1, float[1] y2)
<
  float[1] c0 = {1.5},
  float[1] c1 = {2.5},
  float[1] c2 = {3.5},
  float[1] c3 = {4.5},
  float[1] c4 = {5.5},
  float[1] c5 = {6.5},
  float[1] c6 = {7.5},
  float[1] c7 = {8.5},
  float[1] c8 = {9.5},
  float[1] c9 = {10.5},
  float[1] two_a = {2.25},
  float[1] two_b = {2.25}
>
{
  [add0] a1 = Add (a0, c0)
  [add1] a2 = Add (a1, c1)
  [add2] a3 = Add (a2, c2)
  [add3] a4 = Add (a3, c3)
  [add4] a5 = Add (a4, c4)
  [add5] a6 = Add (a5, c5)
  [add6] a7 = Add (a6, c6)
  [add7] a8 = Add (a7, c7)
  [add8] a9 = Add (a8, c8)
  [add9] a10 = Add (a9, c9)
  [mul] y1 = Mul (a10, two_a)
  [sub] y2 = Sub (a10, two_b)
}
"#;

const SHARE_14: &str = r#"
<
  ir_version: 8,
  opset_import: ["" : 17]
>
cs (float[1] a0) => (float[1] y1, float[1] y2)
<
  float[1] c0 = {1.5},
  float[1] c1 = {2.5},
  float[1] c2 = {3.5},
  float[1] c3 = {4.5},
  float[1] c4 = {5.5},
  float[1] c5 = {6.5},
  float[1] c6 = {7.5},
  float[1] c7 = {8.5},
  float[1] c8 = {9.5},
  float[1] c9 = {10.5},
  float[1] c10 = {11.5},
  float[1] c11 = {12.5},
  float[1] two_a = {2.25},
  float[1] two_b = {2.25}
>
{
  [add0] a1 = Add (a0, c0)
  [add1] a2 = Add (a1, c1)
  [add2] a3 = Add (a2, c2)
  [add3] a4 = Add (a3, c3)
  [add4] a5 = Add (a4, c4)
  [add5] a6 = Add (a5, c5)
  [add6] a7 = Add (a6, c6)
  [add7] a8 = Add (a7, c7)
  [add8] a9 = Add (a8, c8)
  [add9] a10 = Add (a9, c9)
  [add10] a11 = Add (a10, c10)
  [add11] a12 = Add (a11, c11)
  [mul] y1 = Mul (a12, two_a)
  [sub] y2 = Sub (a12, two_b)
}
"#;

/// Measured with the CPU wheels (1.23.2, 1.24.4, 1.31.1; `basic` and `all`) and the stubbed-GPU
/// oracle (the same releases and levels), from the saved optimised graphs: with twelve
/// initializers both nodes read `two_a`, the older of the pair (ORT's map holds it first); with
/// fourteen, after the map's rehash to 29 buckets, `two_b`.
#[test]
fn constant_sharing_keeps_the_first_in_the_initializer_maps_order() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for level in [OptLevel::Basic, OptLevel::All] {
            for eps in [vec![Ep::Cpu], vec![Ep::Cuda, Ep::Cpu]] {
                for (text, kept) in [(SHARE_12, "two_a"), (SHARE_14, "two_b")] {
                    let p = place(text, ort, level, eps.clone());
                    assert_eq!(
                        shared(&p),
                        [
                            ("mul".to_string(), kept.to_string()),
                            ("sub".to_string(), kept.to_string())
                        ],
                        "{ort} {level:?} {eps:?}"
                    );
                }
            }
        }
    }
}
