//! The execution providers the tool simulates, one folder each: what a provider claims.
//!
//! A provider is identified by its [`Ep`] (the key of its rows in a release's kernel table,
//! `crate::tables`) and described here by a [`Provider`]: its name in ORT's logs, what `--ep`
//! calls it, which memory its kernels work in (so the copy pass, `memcpy`, knows which values
//! cross), what its `GetCapability` declines beyond the kernel lookup, what its kernels
//! refuse when session state creates them, whether it runs ORT's CPU-preferred pass
//! (`GetCpuPreferredNodes`). The placer, the copy pass, the rules and every output ask these
//! questions of the provider; none of them names a provider other than the CPU (whose special
//! place is ORT's too: it is always last, takes what no one else does, and the level-2 and
//! level-3 transformers ORT registers for `kCpuExecutionProvider` work on its nodes).
//!
//! Adding a provider: a folder `providers/<name>/` with its `Provider`, its line in [`ALL`] and
//! its `Ep` variant (the table key), and its kernel table (`kernel-tables/`); the transformers
//! whose compatible sets name it (`placer/registry.rs`, as ORT states them) apply to it without
//! new code. `docs/providers.md` says more.

pub mod cpu;
pub mod cuda;

use crate::session::SNode;
use crate::tables::{Ep, KernelTable};

/// ORT's names of the execution providers (`core/graph/constants.h`, `k...ExecutionProvider`),
/// as ORT's transformer registrations state their compatible providers: also those of providers
/// the tool does not simulate, so that the sets read as ORT writes them.
pub mod ort {
    pub const CPU: &str = "CPUExecutionProvider";
    pub const CUDA: &str = "CUDAExecutionProvider";
    pub const ROCM: &str = "ROCMExecutionProvider";
    pub const DML: &str = "DmlExecutionProvider";
    pub const ACL: &str = "ACLExecutionProvider";
    pub const ARMNN: &str = "ArmNNExecutionProvider";
    pub const JS: &str = "JsExecutionProvider";
    pub const WEBGPU: &str = "WebGpuExecutionProvider";
}

/// Where a provider's kernels read and write their tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// The provider's own device memory: values crossing between it and the host are copied
    /// (ORT runs its `MemcpyTransformer` for every provider that is not CPU-based), except the
    /// kernel arguments its registrations declare in host memory (`OrtMemTypeCPUInput`/
    /// `OrtMemTypeCPUOutput`, the table's `cpu_inputs`/`cpu_outputs`).
    Device,
    /// Host memory: no copy between it and the CPU.
    Host,
}

/// What a provider claims.
#[derive(Debug)]
pub struct Provider {
    /// Its key in the kernel tables (its rows), and in the session (`SNode::ep`).
    pub ep: Ep,
    /// How the tool's messages call it (`CUDA`, `CPU`).
    pub label: &'static str,
    /// Its `--ep` value and `ep` key of the configuration (the list it names is the provider
    /// followed by the CPU, [`list`]).
    pub option: &'static str,
    /// Which memory its kernels work in.
    pub memory: Memory,
    /// Whether its `GetCapability` runs ORT's `GetCpuPreferredNodes` over the nodes it has
    /// kernels for (`placer/cpu_preferred.rs`).
    pub cpu_preferred: bool,
    /// What its `GetCapability` declines of a node it has a kernel for (the reason), as the
    /// provider's source states it.
    pub rejects: fn(&SNode) -> Option<String>,
    /// A kernel of its that refuses its node when session state creates it, after placement and
    /// copies: ORT's message (`init: ...`).
    pub refuses_at_init: fn(&SNode) -> Option<String>,
}

impl Provider {
    /// ORT's name for it (its logs, its kernel table's key).
    pub fn name(&self) -> &'static str {
        self.ep.name()
    }

    /// Whether its kernels work in device memory (copies are planned for it).
    pub fn on_device(&self) -> bool {
        self.memory == Memory::Device
    }

    /// Its kernel registrations of `op` in `table` (empty when none).
    pub fn kernels<'t>(
        &self,
        table: &'t KernelTable,
        domain: &str,
        op: &str,
    ) -> &'t [crate::tables::KernelDef] {
        table.kernels(self.ep, domain, op)
    }
}

/// Every provider the tool simulates; the provider lists `--ep` names are made from them.
pub static ALL: [&Provider; 2] = [&cuda::CUDA, &cpu::CPU];

/// The provider of `ep`.
pub fn of(ep: Ep) -> &'static Provider {
    ALL.iter()
        .copied()
        .find(|p| p.ep == ep)
        .unwrap_or(&cpu::CPU)
}

/// The provider named `option` (`--ep`, the configuration's `ep`).
pub fn by_option(option: &str) -> Option<&'static Provider> {
    ALL.iter().copied().find(|p| p.option == option)
}

/// The `--ep` values, in [`ALL`]'s order.
pub fn options() -> Vec<&'static str> {
    ALL.iter().map(|p| p.option).collect()
}

/// The provider list `--ep <option>` simulates, in registration order: the provider, then the
/// CPU (which ORT always adds last).
pub fn list(option: &str) -> Option<Vec<Ep>> {
    let p = by_option(option)?;
    Some(if p.ep == Ep::Cpu {
        vec![Ep::Cpu]
    } else {
        vec![p.ep, Ep::Cpu]
    })
}

/// The provider list simulated when none is asked for: CUDA's.
pub fn default_list() -> Vec<Ep> {
    vec![cuda::CUDA.ep, Ep::Cpu]
}

/// The `--ep` value of a provider list (its first provider's).
pub fn option_of(eps: &[Ep]) -> &'static str {
    eps.first().map_or(cpu::CPU.option, |&e| of(e).option)
}

/// The provider the rules' advice is about: the list's first provider other than the CPU; for
/// a CPU-only list, the default list's (what the model would meet on the provider the tool is
/// run for by default).
pub fn advised(eps: &[Ep]) -> &'static Provider {
    eps.iter()
        .copied()
        .find(|&e| e != Ep::Cpu)
        .map_or(&cuda::CUDA, of)
}

/// Whether `ep` is one of the providers ORT names in `names` (a transformer's or a selector's
/// compatible providers, as ORT states them).
pub fn named(ep: Option<Ep>, names: &[&str]) -> bool {
    ep.is_some_and(|e| names.contains(&e.name()))
}

/// A set of providers the tool simulates, of those ORT names in a compatible-provider set:
/// asked per node by the transformers, so a bit per provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EpSet(u32);

impl EpSet {
    /// Every provider (a transformer ORT does not filter by provider).
    pub const ANY: EpSet = EpSet(u32::MAX);

    /// The simulated providers among ORT's `names`.
    pub fn of_names(names: &[&str]) -> EpSet {
        let mut set = EpSet(0);
        for name in names {
            if let Some(ep) = Ep::from_name(name) {
                set.0 |= 1 << ep as u32;
            }
        }
        set
    }

    /// Whether a node on provider `ep` is in the set (an unassigned node is not, unless the set
    /// is [`EpSet::ANY`]).
    pub fn contains(self, ep: Option<Ep>) -> bool {
        match ep {
            Some(e) => self.0 & (1 << e as u32) != 0,
            None => self == EpSet::ANY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_is_found_by_its_key_and_its_option() {
        for p in ALL {
            assert!(std::ptr::eq(of(p.ep), p));
            assert!(by_option(p.option).is_some_and(|q| std::ptr::eq(q, p)));
            assert_eq!(Ep::from_name(p.name()), Some(p.ep));
            assert_eq!(
                list(p.option).and_then(|l| l.last().copied()),
                Some(Ep::Cpu)
            );
        }
        assert_eq!(option_of(&default_list()), "cuda");
    }

    #[test]
    fn sets_hold_the_simulated_providers_ort_names() {
        let set = EpSet::of_names(&[ort::CPU, ort::ROCM, ort::DML]);
        assert!(set.contains(Some(Ep::Cpu)));
        assert!(!set.contains(Some(cuda::CUDA.ep)));
        assert!(!set.contains(None));
        assert!(EpSet::ANY.contains(None));
    }
}
