//! The CUDA execution provider (`onnxruntime/core/providers/cuda/`): kernels in device memory,
//! the kernel rows of a release's `onnxruntime-gpu` table (`kernel-tables/ort-<version>.toml`,
//! `[kernels.CUDAExecutionProvider.*]`, with the arguments its registrations declare in host
//! memory), the refusals of `CUDAExecutionProvider::GetCapability` beyond the kernel lookup,
//! ORT's CPU-preferred pass, and the kernel that refuses its node when it is created.
//!
//! When CUDA ships as a plugin library (onnxruntime PRs 27816, 29544) it still advertises
//! `CUDAExecutionProvider`: the same provider, with a table of its own release
//! (`docs/providers.md`).

use super::{Memory, Provider};
use crate::session::SNode;
use crate::sym::Sym;
use crate::tables::Ep;

/// The CUDA provider.
pub static CUDA: Provider = Provider {
    ep: Ep::Cuda,
    label: "CUDA",
    option: "cuda",
    memory: Memory::Device,
    cpu_preferred: true,
    rejects,
    refuses_at_init,
};

/// The CUDA EP's op-specific refusals (`CUDAExecutionProvider::GetCapability`, §4.2 step 3):
/// the reason, when CUDA has a kernel but will not take the node.
fn rejects(node: &SNode) -> Option<String> {
    if node.domain != Sym::AI_ONNX {
        return None;
    }
    match node.op.as_str() {
        "LSTM" | "RNN" | "GRU" => {
            let expected: &[&str] = match node.op.as_str() {
                "LSTM" => &["sigmoid", "tanh", "tanh", "sigmoid", "tanh", "tanh"],
                "RNN" => &["tanh", "tanh"],
                _ => &["sigmoid", "tanh", "sigmoid", "tanh"],
            };
            for a in ["activation_alpha", "activation_beta", "clip"] {
                if node.attr(a).is_some() {
                    return Some(format!(
                        "the CUDA {} kernel does not support attribute `{a}`",
                        node.op
                    ));
                }
            }
            if let Some(acts) = node.attr_strings("activations") {
                let same = acts
                    .iter()
                    .zip(expected.iter())
                    .all(|(a, e)| a.eq_ignore_ascii_case(e));
                if !same {
                    return Some(format!(
                        "the CUDA {} kernel supports only the default activations",
                        node.op
                    ));
                }
            }
            if node.op == "LSTM" && node.attr_i("input_forget").unwrap_or(0) != 0 {
                return Some("the CUDA LSTM kernel does not support input_forget".into());
            }
            if node.op == "GRU" && node.attr_i("linear_before_reset").unwrap_or(0) != 1 {
                return Some("the CUDA GRU kernel requires linear_before_reset = 1".into());
            }
            if node.op == "LSTM" && node.inputs.len() >= 8 && !node.inputs[7].is_empty() {
                return Some(
                    "the CUDA LSTM kernel does not support peephole weights (input P)".into(),
                );
            }
            None
        }
        "ConvTranspose" => {
            if let Some(pads) = node.attr_ints("pads") {
                let rank = pads.len() / 2;
                if (0..rank).any(|i| pads[i] != pads[i + rank]) {
                    return Some(
                        "the CUDA ConvTranspose kernel does not support asymmetric padding".into(),
                    );
                }
            }
            match node.attr_s("auto_pad").as_deref() {
                Some("SAME_UPPER") | Some("SAME_LOWER") => Some(
                    "the CUDA ConvTranspose kernel does not support auto_pad SAME_UPPER/SAME_LOWER"
                        .into(),
                ),
                _ => None,
            }
        }
        "Cast" if node.attr_i("to") == Some(crate::model::DataType::String as i64) => {
            Some("the CUDA Cast kernel cannot cast to string".into())
        }
        "ArgMax" | "ArgMin"
            if node.since.unwrap_or(0) >= 12
                && node.attr_i("select_last_index").unwrap_or(0) != 0 =>
        {
            Some(format!(
                "the CUDA {} kernel does not support select_last_index",
                node.op
            ))
        }
        _ => None,
    }
}

/// The CUDA `BatchNormalization` kernel refuses `training_mode = 1` from opset 14 on
/// (`core/providers/cuda/nn/batch_norm.h`): session creation fails after the copies are
/// inserted.
fn refuses_at_init(n: &SNode) -> Option<String> {
    let refused = n.op == "BatchNormalization"
        && n.domain == Sym::AI_ONNX
        && n.since.is_some_and(|v| v >= 14)
        && n.attrs
            .iter()
            .any(|a| a.name() == "training_mode" && a.i() == 1);
    refused.then(|| {
        format!(
            "init: Exception during initialization: CUDA BatchNormalization({}) node '{}': \
             !(is_training_mode_ && opset >= 14) was false. Training mode does not support \
             BN opset 14 (or higher) yet.",
            n.since.unwrap_or(0),
            n.name
        )
    })
}
