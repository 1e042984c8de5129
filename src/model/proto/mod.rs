#![allow(clippy::all, missing_docs)]
include!("onnx.rs");
