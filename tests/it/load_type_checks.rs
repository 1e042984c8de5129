//! ORT's check of an input's type against its formal parameter's permitted types at load
//! (`Graph::InferAndVerifyTypeMatch`), on models built for models of the third unseen corpus:
//! the float16 conversion of the ORT-optimised diffusers UNet (a float16 `scales` of `Resize`)
//! fails the load, and so does the ONNX-domain `QLinearMatMul` the QDQ selectors make of a
//! float8 QDQ MatMul below opset 21 (the graph is resolved again after the transformer).

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
