//! `cargo-onnx-lint`: runs as `cargo onnx-lint ARGS` (cargo adds `onnx-lint` as the first
//! argument) or directly as `cargo-onnx-lint ARGS`.

/// mimalloc instead of the system allocator: placing a large model makes millions of small,
/// short-lived allocations (names, maps, vectors), and glibc's malloc spent about a fifth of
/// `place` on them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    onnx_lint::alloc::tune();
    onnx_lint::cli::main(std::env::args_os().collect())
}
