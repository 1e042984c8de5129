//! ORT's graph transformers, one file per ORT source file (`onnxruntime/core/optimizer/`), and
//! their registry (`registry.rs`): every transformer ORT registers at levels 1 to 3, in ORT's
//! order, with its compatible providers as ORT states them, and the function that runs it.
//! Level 1 runs before partitioning (`optimize/`, the QDQ transformers, the TransposeOptimizer),
//! level 2 after it (`fusions/`, the CPU's QDQ and layout transformers), then the casts and
//! ORT's Level4. Adding a transformer is its file plus its registry entry.

pub(super) mod casts;
pub(crate) mod dim_symbols;
pub(crate) mod ensure_unique_dq_for_node_unit;
pub(super) mod fuse_initializers_transformer;
pub(crate) mod fusions;
pub(super) mod matmul_integer_to_float;
pub(crate) mod nchwc_transformer;
pub(super) mod nhwc_transformer;
pub(super) mod optimize;
pub(crate) mod qdq_transformer;
pub mod registry;
pub(super) mod transpose;
