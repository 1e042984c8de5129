//! The node names of the model ORT saves (`SessionOptions.optimized_model_filepath`), which is
//! what the CPU-only truth lists (issue 16, `unseen2/whl.silero-vad` at `disable`): ORT writes
//! a subgraph from memory only when it needs a `GraphProto` sync, which every graph gets as soon
//! as any transformation changed anything (the whole tree is resolved); otherwise each
//! subgraph is saved as loaded, its `Constant` nodes included (`Session::saved_node_names`).
//! Two probes: an If whose branches hold a `Constant`, with a float16 `Identity` beside it
//! (nothing changes) or a float16 `Softmax` (no CPU float16 kernel: its function body is
//! inlined between inserted Casts). Recorded with the CPU wheels by
//! `tools/realworld/misc_probes.py`.

use onnx_lint::placer::{self, OptLevel};
use onnx_lint::tables::Ep;

fn place(text: &str, ort: &str, level: OptLevel, eps: Vec<Ep>) -> placer::Placement {
    crate::support::place_text(text, ort, level, eps)
}

/// An If whose branches hold a `Constant`, beside a float16 node `op` on `h`.
fn branch_constants(op: &str) -> String {
    format!(
        r#"
<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (bool c, float[2] x, float16[2] h) => (float[2] y, float16[2] z)
{{
  [if] y = If (c) <
    then_branch = t () => (float[2] ty) {{
      [tc] k = Constant <value = float[2] {{1, 2}}> ()
      [ta] ty = Add (x, k)
    }},
    else_branch = e () => (float[2] ey) {{
      [ec] k2 = Constant <value = float[2] {{3, 4}}> ()
      [ea] ey = Mul (x, k2)
    }}
  >
  [op] z = {op} (h)
}}
"#
    )
}

/// Measured with the CPU wheels (1.23.2, 1.24.4, 1.31.1; `disable`, `basic`, `all`): the saved
/// model of the first probe holds `if, op` and both branches as written (`tc, ta`, `ec, ea`);
/// in the second the branches lost their Constants (`ta`, `ea`), the main graph holds `if`,
/// the two `InsertedPrecisionFreeCast_*` and the five unnamed nodes of Softmax's body.
#[test]
fn subgraphs_are_saved_as_loaded_when_nothing_changed() {
    for ort in ["1.23.2", "1.24.4", "1.31.1"] {
        for level in [OptLevel::Disable, OptLevel::Basic, OptLevel::All] {
            let p = place(&branch_constants("Identity"), ort, level, vec![Ep::Cpu]);
            assert!(!p.session.changed_since_load(), "{ort} {level:?}");
            let mut names = p.session.saved_node_names();
            names.sort_unstable();
            assert_eq!(
                names,
                ["ea", "ec", "if", "op", "ta", "tc"],
                "{ort} {level:?}"
            );
            let p = place(&branch_constants("Softmax"), ort, level, vec![Ep::Cpu]);
            assert!(p.session.changed_since_load(), "{ort} {level:?}");
            let mut names = p.session.saved_node_names();
            names.sort_unstable();
            assert_eq!(
                names,
                [
                    "",
                    "",
                    "",
                    "",
                    "",
                    "InsertedPrecisionFreeCast_h",
                    "InsertedPrecisionFreeCast_z",
                    "ea",
                    "if",
                    "ta"
                ],
                "{ort} {level:?}"
            );
        }
    }
}
