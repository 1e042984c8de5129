//! What the session script is asked (the level, the provider list) and what it answers: the
//! placement, the copies and the outcome of session creation.

use crate::memcpy::Copy;
use crate::session::{NodeRef, Session};
use crate::sym::Sym;
use crate::tables::Ep;

use super::Decisions;

/// ORT's graph optimisation levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OptLevel {
    Disable,
    Basic,
    Extended,
    All,
}

impl OptLevel {
    pub fn name(self) -> &'static str {
        match self {
            OptLevel::Disable => "disable",
            OptLevel::Basic => "basic",
            OptLevel::Extended => "extended",
            OptLevel::All => "all",
        }
    }
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Providers in registration order; CPU is always last (ORT adds it implicitly).
    pub eps: Vec<Ep>,
    pub level: OptLevel,
    /// MLAS's NCHWc block size on the machine the session runs on (`MlasNchwcGetBlockSize`):
    /// 16 with AVX-512F, 8 on other x86-64 CPUs, 0 (or 1) where MLAS has no NCHWc kernels and
    /// ORT registers no `NchwcTransformer`. Only the CPU's level-`all` graph depends on it.
    /// Default [`super::RECORDED_NCHWC_BLOCK`], that of the machine the CPU-only truth
    /// was recorded on.
    pub nchwc_block: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            eps: crate::providers::default_list(),
            level: OptLevel::All,
            nchwc_block: super::transformers::nchwc_transformer::RECORDED_BLOCK,
        }
    }
}

/// The predicted outcome of session creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The model fails to load (unsupported opset, unknown op or domain, a type error; also one
    /// that a transformer makes, which ORT reports as `INVALID_GRAPH` too).
    LoadFail(String),
    /// Some node has no kernel on any provider.
    NoKernel(String),
    /// Placement and copies are decided, then a kernel refuses its node when session state
    /// creates it (the CUDA `BatchNormalization` in training mode at opset 14+), or the copy
    /// planner finds no kernel for a node a transformer put on CUDA before it adds any copy
    /// (`copy_plan_kernels.rs`: then there are no copies). `init: ...`
    InitFail(String),
    /// Partitioning stops: the body of a function ORT inlined fails its type check (`init: Type
    /// Error ...`). Nothing is placed.
    PartitionFail(String),
}

impl Outcome {
    /// The error text of a failed session (`load: ...`, `no-kernel: ...`, `init: ...`).
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Ok => None,
            Outcome::LoadFail(e)
            | Outcome::NoKernel(e)
            | Outcome::InitFail(e)
            | Outcome::PartitionFail(e) => Some(e),
        }
    }

    /// Whether ORT got as far as placing nodes and inserting copies (the session may still fail
    /// afterwards, when kernels are created).
    pub fn placed(&self) -> bool {
        matches!(self, Outcome::Ok | Outcome::InitFail(_))
    }
}

/// Everything the simulation found, with evidence.
#[derive(Debug)]
pub struct Placement {
    pub ort: String,
    pub level: OptLevel,
    /// The provider list simulated, in registration order (the CPU last).
    pub eps: Vec<Ep>,
    pub outcome: Outcome,
    /// The session graph after optimisations and copy insertion.
    pub session: Session,
    /// Decision per (graph, node) for every live node.
    pub decisions: Decisions,
    /// Copies in ORT's insertion (and log) order.
    pub copies: Vec<Copy>,
    /// The node a load or kernel-initialisation failure names, when it names one.
    pub failed_node: Option<NodeRef>,
}

impl Placement {
    /// Copies per graph name, as ORT's warning counts them (graphs with none are absent).
    pub fn memcpy_counts(&self) -> Vec<(Sym, usize)> {
        let mut out: Vec<(Sym, usize)> = Vec::new();
        for c in &self.copies {
            let name = self.session.graphs[c.graph].name;
            match out.iter_mut().find(|(n, _)| *n == name) {
                Some((_, k)) => *k += 1,
                None => out.push((name, 1)),
            }
        }
        out
    }
}
