//! `ExpandElimination` (level 1): ORT removes an `Expand` whose 1-D int64 target is no longer
//! than its input and each of whose trailing dims is 1 or equal to the input's known dim (the
//! dynamo whisper's `Expand(x, [1, 1])`, a model of the second unseen corpus).

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
