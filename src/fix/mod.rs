//! `--fix`: applies the machine-readable [`Fix`]es that findings carry to the user's model file.
//!
//! **Invariants.**
//! - Only the fields a fix changes are rewritten, at the protobuf wire level ([`wire`]):
//!   unknown fields, metadata, doc strings, node names, `value_info`, local functions and raw
//!   tensor data are copied byte for byte. External-data files are never opened or written;
//!   their `location`s are untouched and stay valid beside the fixed model.
//! - Writing is atomic ([`write`]): a temporary file beside the target, fsync, rename.
//!   A model that cannot be fixed, or a failed write, leaves the original byte-identical.
//! - The library never decides *which* fixes apply (the rules and `--unsafe-fixes` do) and
//!   never prints; the round loop (apply, reload, re-analyse) lives in `cli::fix`.

pub mod apply;
pub mod wire;
pub mod write;

pub use apply::{Applied, apply};
pub use write::{WriteError, write_atomic};

use crate::diagnostics::Fix;
use crate::model::proto::ModelProto;

/// One line for a fix: what it changes.
pub fn describe(fix: &Fix) -> String {
    match fix {
        Fix::SetOpsetImport {
            domain,
            from,
            to,
            functions,
            ..
        } => format!(
            "set the {domain} opset import {from} → {to}{}",
            if *functions {
                " (and in the local functions)"
            } else {
                ""
            }
        ),
        Fix::ReplaceInputWithConstant {
            node,
            input,
            values,
            ..
        } => format!("replace input {input} of `{node}` with the constant {values:?}"),
        Fix::CollapseReshape {
            node, data, values, ..
        } => format!(
            "make `{node}` read `{data}` (skipping the views between) with the constant shape {values:?}"
        ),
        Fix::UnflattenGemm {
            flatten,
            gemm,
            unflatten,
            ..
        } => format!(
            "replace `{flatten}` → `{gemm}` → `{unflatten}` (Reshape → Gemm → Reshape) by a MatMul and an Add on the unflattened input"
        ),
        Fix::SetFunctionOpsetImport {
            function,
            domain,
            from,
            to,
            ..
        } => format!("set the {domain} opset import of local function `{function}` {from} → {to}"),
    }
}

/// A unified diff of the two models' text views (`--diff`), with `a/` and `b/` headers naming
/// `path`; empty when the text views are equal.
pub fn text_diff(before: &ModelProto, after: &ModelProto, path: &str) -> String {
    let old = crate::model::text::print_model(before).text;
    let new = crate::model::text::print_model(after).text;
    if old == new {
        return String::new();
    }
    let path = path.trim_start_matches('/');
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}
