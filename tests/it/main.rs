//! One integration-test binary (faster to link than one per file).
mod codegen;
mod text;
