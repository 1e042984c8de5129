//! The CPU execution provider (`onnxruntime/core/providers/cpu/`): host memory, the kernel rows
//! of a release's table (`[kernels.CPUExecutionProvider.*]`). ORT always registers it, last: it
//! takes every node no provider before it claimed, and it declines nothing it has a kernel for.
//! The level-2 and level-3 transformers ORT registers for `kCpuExecutionProvider` work on its
//! nodes (`placer/registry.rs`).

use super::{Memory, Provider};
use crate::session::SNode;
use crate::tables::Ep;

/// The CPU provider.
pub static CPU: Provider = Provider {
    ep: Ep::Cpu,
    label: "CPU",
    option: "cpu",
    memory: Memory::Host,
    cpu_preferred: false,
    rejects: |_: &SNode| None,
    refuses_at_init: |_: &SNode| None,
};
