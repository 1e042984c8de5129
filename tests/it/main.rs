//! One integration-test binary (faster to build and link than one per file).
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]
mod architecture;
mod cargo;
mod cli;
mod codegen;
mod constant_sharing_order;
mod conv_bias_scale;
mod dead_shape_inputs;
mod detector_probes;
mod docs;
mod double_qdq;
mod dq_matmul_nbits;
mod fix;
mod formats;
mod fuzz;
mod load;
mod nchwc_block;
mod nhwc_probes;
mod packaging;
mod placement;
mod qdq_misses;
mod realworld;
mod reshape_dims;
mod robust;
mod rules;
mod saved_model;
mod session;
mod support;
mod tables;
mod text;
mod transpose_cancel;
mod transpose_shapes;
mod unseen2;
mod unseen2_cpu;
mod unseen3;
mod unseen3_probes;
mod verify;
