//! The mechanisms the third unseen corpus (`tests/fixtures/realworld/unseen3/`, issue 16)
//! exposed, each on a model built for it: ORT's check of an input's type against its formal
//! parameter's permitted types at load (`Graph::InferAndVerifyTypeMatch`), which fails the
//! float16 conversion of the ORT-optimised diffusers UNet (a float16 `scales` of `Resize`), and
//! `QDQPropagationTransformer` on float8 Q/DQ pairs (the float8 QDQ ConvNeXt).

use std::path::Path;

use onnx_lint::placer::{self, OptLevel, Options, Outcome};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    let proto = onnx_lint::model::text::parse_model(text).unwrap();
    let model = onnx_lint::model::Model::from_proto(Path::new("m.onnx"), 0, proto).unwrap();
    let table = onnx_lint::tables::resolve(ort).unwrap().table();
    placer::place(
        &model,
        table,
        &Options {
            eps,
            level,
            ..Default::default()
        },
    )
}

/// `Resize(x, "", scales)` with `scales` a Constant of element type `scales`.
fn resize_model(scales: &str) -> String {
    format!(
        r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float16[1, 1, 2, 2] x) => (float16[1, 1, 4, 4] y)
{{
  [c] s = Constant <value = {scales}[4] {{1, 1, 2, 2}}> ()
  [r] y = Resize <mode = "nearest"> (x, , s)
}}
"#
    )
}

/// Measured with the stubbed-GPU oracle (1.23.2, 1.24.4, 1.31.1, `disable`) and the CPU wheels
/// (1.23.2, 1.31.1): a float16 `scales` (formal type `tensor(float)`) and an int64 input of
/// `Sqrt` (type parameter `T`: float types) fail the load with these messages; float `scales`
/// loads.
#[test]
fn an_input_type_outside_its_formal_parameter_fails_the_load() {
    let sqrt = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (int64[3] x) => (int64[3] y)
{
  [sq] y = Sqrt (x)
}
"#;
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for eps in [vec![Ep::Cuda, Ep::Cpu], vec![Ep::Cpu]] {
            for level in [OptLevel::Disable, OptLevel::All] {
                let p = place(&resize_model("float16"), ort, level, eps.clone());
                assert_eq!(
                    p.outcome,
                    Outcome::LoadFail(
                        "load: Type Error: Type 'tensor(float16)' of input parameter (s) of operator (Resize) in node (r) is invalid."
                            .into()
                    ),
                    "{ort} {level:?}"
                );
                let p = place(&resize_model("float"), ort, level, eps.clone());
                assert_eq!(p.outcome, Outcome::Ok, "{ort} {level:?}");
                let p = place(sqrt, ort, level, eps.clone());
                assert_eq!(
                    p.outcome,
                    Outcome::LoadFail(
                        "load: Type Error: Type 'tensor(int64)' of input parameter (x) of operator (Sqrt) in node (sq) is invalid."
                            .into()
                    ),
                    "{ort} {level:?}"
                );
            }
        }
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
