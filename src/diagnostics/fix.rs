//! The machine-readable fix a finding carries (JSON `fix`), applied by `--fix`.
//!
//! A fix says *what* to change in the user's model, in terms of the model as written (graph and
//! node names, value names, opset domains), never in terms of the simulator's session graph. The
//! rules decide which fix applies and whether it is safe; `src/fix/` applies it to the protobuf.
//! This is the contract between the two: JSON field names are stable (`kind` tags the variant).

use serde::Serialize;

/// Whether `--fix` applies a fix by default (ruff's vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FixSafety {
    /// Keeps the model's outputs bit-identical: applied by `--fix`.
    Safe,
    /// May change numerics or needs the user's judgement: applied only with `--unsafe-fixes`.
    Unsafe,
}

/// One edit of the user's model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Fix {
    /// Set the model's opset import of `domain` (`""`/`ai.onnx` is the default domain) to
    /// `version`; with `functions`, every model-local function's import of that domain too.
    SetOpsetImport {
        domain: String,
        from: i64,
        to: i64,
        functions: bool,
        safety: FixSafety,
    },
    /// Replace input `input` (its position) of node `node` in graph `graph` with a new int64
    /// initializer holding `values` (the proven constant, `0`/`-1` forms where they hold).
    ReplaceInputWithConstant {
        graph: String,
        node: String,
        input: usize,
        values: Vec<i64>,
        safety: FixSafety,
    },
    /// Make `Reshape` node `node` of graph `graph` read `data` (the input of the pure views,
    /// `Reshape`/`Flatten`/`Squeeze`/`Unsqueeze`, that fed it: the same elements in the same
    /// order) instead of its input 0, and replace its shape input with a new int64 initializer
    /// holding `values`, proven against `data`'s shape.
    CollapseReshape {
        graph: String,
        node: String,
        data: String,
        values: Vec<i64>,
        safety: FixSafety,
    },
    /// Replace `Reshape(x, [-1, k]) → Gemm(·, B, C) → Reshape(·, shape)` (nodes `flatten`,
    /// `gemm`, `unflatten` of graph `graph`) by `MatMul(x, B)` and `Add(·, C)` on `x`'s own
    /// rank, which write the unflattening Reshape's output: the view that no constant can give
    /// goes with its shape chain. Always `unsafe`: ORT's CPU Gemm adds `C` into the product's
    /// first K-block, so for K above MLAS's block the sums round differently.
    UnflattenGemm {
        graph: String,
        flatten: String,
        gemm: String,
        unflatten: String,
        safety: FixSafety,
    },
    /// Set the opset import of `domain` in the model-local function `function` (its `domain`
    /// and `name`) to `version`, the model's.
    SetFunctionOpsetImport {
        function_domain: String,
        function: String,
        domain: String,
        from: i64,
        to: i64,
        safety: FixSafety,
    },
}

impl Fix {
    pub fn safety(&self) -> FixSafety {
        match self {
            Fix::SetOpsetImport { safety, .. }
            | Fix::ReplaceInputWithConstant { safety, .. }
            | Fix::CollapseReshape { safety, .. }
            | Fix::UnflattenGemm { safety, .. }
            | Fix::SetFunctionOpsetImport { safety, .. } => *safety,
        }
    }
}
