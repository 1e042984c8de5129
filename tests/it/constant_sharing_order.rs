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
        .map(|(_, n)| (n.name.to_string(), n.inputs[1].to_string()))
        .collect();
    v.sort();
    v
}

/// `n - 2` distinct constants added in a chain, then two equal ones, `two_a` and `two_b`, read by
/// `mul` and `sub`: `n` initializers in all (the probes of `tools/realworld/misc_probes.py`).
fn share_model(n: usize) -> String {
    let k = n - 2;
    let mut inits: Vec<String> = (0..k)
        .map(|i| format!("  float[1] c{i} = {{{}.5}}", i + 1))
        .collect();
    inits.push("  float[1] two_a = {2.25}".into());
    inits.push("  float[1] two_b = {2.25}".into());
    let adds: String = (0..k)
        .map(|i| format!("  [add{i}] a{} = Add (a{i}, c{i})\n", i + 1))
        .collect();
    format!(
        r#"
<
  ir_version: 8,
  opset_import: ["" : 17]
>
cs (float[1] a0) => (float[1] y1, float[1] y2)
<
{}
>
{{
{adds}  [mul] y1 = Mul (a{k}, two_a)
  [sub] y2 = Sub (a{k}, two_b)
}}
"#,
        inits.join(",\n")
    )
}

/// Measured with the CPU wheels (1.23.2, 1.24.4, 1.31.1; `basic` and `all`) and the stubbed-GPU
/// oracle (the same releases and levels), from the saved optimised graphs: with twelve
/// initializers both nodes read `two_a`, the older of the pair (ORT's map holds it first); with
/// fourteen, after the map's rehash to 29 buckets, `two_b`.
#[test]
fn constant_sharing_keeps_the_first_in_the_initializer_maps_order() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for level in [OptLevel::Basic, OptLevel::All] {
            for eps in [vec![Ep::Cpu], vec![Ep::Cuda, Ep::Cpu]] {
                for (n, kept) in [(12, "two_a"), (14, "two_b")] {
                    let p = place(&share_model(n), ort, level, eps.clone());
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
