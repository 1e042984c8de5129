//! `cargo-onnx-lint`: runs as `cargo onnx-lint ARGS` (cargo adds `onnx-lint` as the first
//! argument) or directly as `cargo-onnx-lint ARGS`.

fn main() -> std::process::ExitCode {
    onnx_lint::cli::main(std::env::args_os().collect())
}
