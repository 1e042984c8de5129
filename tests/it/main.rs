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
mod docs;
mod double_qdq;
mod dq_matmul_nbits;
mod expand_elimination;
mod fix;
mod formats;
mod fusion_shapes;
mod fuzz;
mod load;
mod load_type_checks;
mod matmul_nbits_bias_fusion;
mod memcpy_kernel_lookup;
mod nchwc_block;
mod nhwc_transformer;
mod packaging;
mod placement;
mod qdq_realworld;
mod qdq_transformers;
mod realworld;
mod reshape_dims;
mod robust;
mod rules;
mod saved_model;
mod session;
mod shape_probes;
mod skip_layer_norm_fusion;
mod support;
mod tables;
mod text;
mod transpose_cancel;
mod transpose_shapes;
mod verify;
