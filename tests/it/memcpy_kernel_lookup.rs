//! The copy planner's kernel look-up (`TransformerMemcpyImpl::ProcessInitializers`): a CUDA
//! node whose since-version no CUDA kernel of the release serves fails the session before any
//! copy is added (a fused `Squeeze` at opset 21 on 1.23.2, `unseen2/vc21.tsd.mistral.L2.onnx`).

use std::path::Path;

use onnx_lint::placer::{self, OptLevel, Options, Outcome};
use onnx_lint::tables::Ep;

fn cuda() -> Vec<Ep> {
    vec![Ep::Cuda, Ep::Cpu]
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
