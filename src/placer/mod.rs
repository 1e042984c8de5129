//! ORT's session creation, simulated for one release: which provider takes each node, which
//! copies ORT inserts, and whether the session is created at all.
//!
//! Pure: a function of the model, the release's table and the options. No I/O, no printing.
//! This file is the module's face; its rooms follow the flow of one model:
//!
//! - `script.rs`: the session script, ORT's `InferenceSession::Initialize` step by step, and
//!   the entry points ([`place`], [`place_file`], ...);
//! - `placement.rs`: what the script is asked ([`Options`], [`OptLevel`]) and what it answers
//!   ([`Placement`], [`Outcome`]); `decision.rs`: why each node landed where it did;
//! - `load.rs`: the load checks (opsets, types, attributes, shapes);
//! - `functions/`: function inlining (ahead of time, and of the nodes no provider took);
//! - `transformers/`: ORT's graph transformers, one file per ORT source file, in the order of
//!   their registry (`transformers/registry.rs`), whose entries run them;
//! - `partition/`: `GraphPartitioner` with the providers (`crate::providers`): kernel lookup,
//!   each provider's `GetCapability`, the CPU-preferred pass;
//! - `copy_plan_kernels.rs`: the kernel check that starts ORT's copy planning (the copies
//!   themselves are `crate::memcpy`'s).

mod copy_plan_kernels;
mod decision;
mod functions;
mod load;
mod partition;
mod placement;
mod script;
pub mod transformers;

pub use decision::{Decision, Decisions};
pub use partition::kernel::{Miss, lookup};
pub use placement::{OptLevel, Options, Outcome, Placement};
pub use script::{budget_exceeded, place, place_file, place_file_with, place_owned, place_read};
pub use transformers::nchwc_transformer::{
    RECORDED_BLOCK as RECORDED_NCHWC_BLOCK, machine_block as machine_nchwc_block,
};
pub use transformers::registry;

/// The session graph under its old name, for code not yet moved to [`crate::session`].
pub use crate::session as ir;
pub use crate::session::types::type_allowed;
