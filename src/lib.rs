//! `cargo-onnx-lint`: predicts what ONNX Runtime (ORT) does with an ONNX model on the CUDA
//! execution provider — which nodes fall back to the CPU, which Memcpy copies ORT inserts, why,
//! and how to fix it — before the model ever touches a GPU.
//!
//! ## Code map
//!
//! - [`model`]: bytes → [`model::Model`]. Knows protobuf and the ONNX IR, nothing about
//!   execution providers. Loading fails only for input that is not a usable ONNX model; milder
//!   structural problems come back as [`model::Problem`]s on a model that still loads.
//! - [`tables`]: the per-release ORT data (kernel registrations with host-memory arguments,
//!   op schemas, highest opsets), embedded and parsed on first use. Knows nothing about models.
//! - [`session`]: the session graph every later stage works on (built from a model), with
//!   both node orders ORT uses and its name generator. Depends on `model` and `tables` only.
//! - [`infer`]: schemas, types and shapes over the session graph, as `Graph::Resolve` does.
//! - [`placer`]: ORT's session creation: load checks, the graph transformers (one file per ORT
//!   source file, ordered by [`placer::registry`]), partitioning, casts.
//! - [`memcpy`]: ORT's `MemcpyTransformer`.
//! - [`rules`], [`diagnostics`]: the lint rules and their findings.
//! - [`lint`]: the composition root of a lint run (place the model, run the rules) from resolved
//!   [`lint::Settings`]; pure.
//! - [`cli`]: arguments, settings resolution (`cli/settings.rs`, shared by every command),
//!   output formats (`cli/output/`: the JSON, SARIF and GitHub shapes live only there), exit
//!   codes. The only module that prints.
//!
//! `ARCHITECTURE.md` at the top of the repository has the full code map and the invariants.
//!
//! ## Invariants
//!
//! - The library never panics on anything read from a user's file, never calls
//!   `process::exit`, and never prints outside `cli`.
//! - Loading never reads external data and never copies weights.

pub mod alloc;
pub mod analysis;
pub mod cache;
pub mod cargo;
pub mod cli;
pub mod config;
pub mod diagnostics;
pub mod fix;
pub mod infer;
pub mod lint;
pub mod memcpy;
pub mod model;
pub mod placer;
pub mod providers;
pub mod rules;
pub mod session;
pub mod sym;
pub mod tables;
pub(crate) mod threads;
pub mod verify;
