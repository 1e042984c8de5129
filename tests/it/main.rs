//! One integration-test binary (faster to build and link than one per file).
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]
mod cargo;
mod cli;
mod codegen;
mod docs;
mod formats;
mod load;
mod placement;
mod realworld;
mod rules;
mod support;
mod tables;
mod text;
mod verify;
