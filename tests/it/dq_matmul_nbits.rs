//! `DQMatMulToMatMulNBits` (QDQSelectorActionTransformer): `tests/fixtures/dq_matmul_nbits/`
//! holds `DequantizeLinear(weight) -> MatMul`/`Gemm` groups (`tools/realworld/dq_matmul_nbits.py`)
//! of 4-bit and 8-bit weights, blockwise, per-tensor and per-channel scales, valid and invalid
//! block sizes and axes, a Q after the target, weights and scales shared by two DQs, a float16
//! model; `truth.json` holds, for the CPU wheels 1.22.0-1.31.1, the `op:name` of the session
//! graph each saved at level `extended`, and for the stubbed-GPU oracle 1.23.2, 1.24.4 and
//! 1.31.1 its record of the CUDA session at `extended`. The predictions must match both.

use onnx_lint::placer::{self, OptLevel, Options};
use onnx_lint::tables::{self, Ep};
use serde_json::Value;

use crate::support;

#[test]
fn dq_matmul_to_matmul_nbits_agrees_with_ort() {
    let dir = support::repo().join("tests/fixtures/dq_matmul_nbits");
    let truth: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    assert!(truth.len() >= 250, "dq_matmul_nbits truth missing");
    let (mut fused_cpu, mut fused_cuda) = (0, 0);
    for r in &truth {
        let ort = r["ort"].as_str().unwrap();
        let file = r["model"].as_str().unwrap();
        let cpu = r["ep"] == "cpu";
        let m = onnx_lint::model::load(&dir.join(file)).unwrap();
        let p = placer::place(
            &m,
            tables::resolve(ort).unwrap().table(),
            &Options {
                eps: if cpu {
                    vec![Ep::Cpu]
                } else {
                    vec![Ep::Cuda, Ep::Cpu]
                },
                level: OptLevel::Extended,
                ..Default::default()
            },
        );
        if cpu {
            let mut mine: Vec<String> = p
                .session
                .graphs
                .iter()
                .flat_map(|g| g.live_nodes())
                .map(|(_, n)| format!("{}:{}", n.op, n.name))
                .collect();
            mine.sort();
            let theirs: Vec<String> = r["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            assert_eq!(mine, theirs, "CPU, ORT {ort}, {file}");
            fused_cpu += usize::from(theirs.iter().any(|n| n.starts_with("MatMulNBits:")));
        } else {
            let mine = onnx_lint::cli::placement_json(file, &p);
            for key in ["session", "placement", "all_nodes_on", "memcpy"] {
                assert_eq!(mine[key], r[key], "CUDA {key}, ORT {ort}, {file}");
            }
            fused_cuda += usize::from(
                p.session.graphs[0]
                    .live_nodes()
                    .any(|(_, n)| n.op == "MatMulNBits" && n.ep == Some(Ep::Cuda)),
            );
        }
    }
    // Both kinds of session fuse in the truth, and both keep groups unfused.
    assert!(
        fused_cpu >= 50 && fused_cuda >= 15,
        "{fused_cpu} {fused_cuda}"
    );
}
