//! OL003 function-opset-mismatch.

use crate::analysis::opset_lowering::{self, Verdict};
use crate::declare_rule;
use crate::diagnostics::{Finding, Fix, FixSafety};
use crate::model::normalize_domain;
use crate::rules::Context;
use crate::session::Session;

declare_rule! {
    /// ## What it does
    /// Flags a model-local function whose opset import of a domain differs from the model's
    /// import of the same domain: mobius' opset-23 exports ship their
    /// `SkipSimplifiedLayerNormalization` function still importing `ai.onnx` 24.
    ///
    /// ## Why is this bad?
    /// ONNX requires a function's imports to agree with the model's: `onnx.checker.check_model`
    /// rejects the model ("Opset import for domain in function op ... is not compatible with the
    /// version imported by model"), and so do tools that validate first. Where ORT inlines the
    /// function, its nodes resolve at the function's opset, so an opset-24 body inside an opset-23
    /// model brings back the registration gaps of OL101. ORT itself loads the model, and a function
    /// whose op has a kernel is never inlined: the mismatch usually costs nothing at run time, so
    /// the rule is off by default (`--warn OL003` turns it on).
    ///
    /// ## Example
    /// ```text
    /// <ir_version: 10, opset_import: ["" : 23, "com.microsoft" : 1]>
    /// ...
    /// <domain: "com.microsoft", opset_import: ["" : 24]>
    /// SkipSimplifiedLayerNormalization (input, skip, weight) => (norm_out) { ... }
    /// ```
    /// Use instead:
    /// ```text
    /// <domain: "com.microsoft", opset_import: ["" : 23]>
    /// SkipSimplifiedLayerNormalization (input, skip, weight) => (norm_out) { ... }
    /// ```
    ///
    /// ## How to fix
    /// Set the function's import to the model's (JSON `fix`: `set-function-opset-import`,
    /// applied by `--fix`), or re-export with an exporter that writes both from one setting.
    ///
    /// ## Fix safety
    /// The function's nodes are compared between the two versions the way OL101 compares the
    /// model's (inputs passed, attributes set, types bound, with the body typed from its first
    /// call site): the fix is safe when every node keeps what it uses, unsafe when a type could
    /// not be proved, and absent when a node uses something the model's version lacks.
    pub static RULE = ("OL003", "function-opset-mismatch", Allow, "a model-local function imports a different opset than the model", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let mut typed: Option<Session> = None;
    for (fi, f) in cx.model.proto.functions.iter().enumerate() {
        for import in &f.opset_import {
            let domain = normalize_domain(import.domain());
            let (from, Some(to)) = (import.version(), cx.model.opset(domain)) else {
                continue;
            };
            if from == to {
                continue;
            }
            let typed =
                typed.get_or_insert_with(|| opset_lowering::typed_session(cx.model, cx.table));
            let types = opset_lowering::Types {
                typed,
                placed: Some(cx.session()),
            };
            let verdict = opset_lowering::function(cx.model, types, cx.table, fi, domain, to);
            let name = format!("{}.{}", normalize_domain(f.domain()), f.name());
            let mut finding = Finding::new(
                RULE.code,
                RULE.name,
                RULE.default,
                format!(
                    "local function `{name}` imports {domain} {from}, the model imports {domain} {to}: the ONNX checker rejects the model"
                ),
            );
            finding.graph = cx.model.main_graph().name.clone();
            finding.cause = format!("{domain} {from} != {to}");
            finding.evidence.push(
                "ONNX requires a function's opset imports to match the model's for every domain both import"
                    .to_string(),
            );
            let safety = match &verdict {
                Verdict::Safe => Some(FixSafety::Safe),
                Verdict::Unproven(_) => Some(FixSafety::Unsafe),
                Verdict::Breaks(_) => None,
            };
            finding.help = Some(match &verdict {
                Verdict::Safe => format!(
                    "set the function's {domain} import to {to}: every node of its body keeps the inputs, attributes and types it uses"
                ),
                Verdict::Unproven(why) => format!(
                    "set the function's {domain} import to {to} (unsafe fix: not proved safe: {why})"
                ),
                Verdict::Breaks(why) => format!(
                    "re-export the function at {domain} {to}; setting its import would break its body: {why}"
                ),
            });
            finding.fix = safety.map(|safety| Fix::SetFunctionOpsetImport {
                function_domain: f.domain().to_string(),
                function: f.name().to_string(),
                domain: domain.to_string(),
                from,
                to,
                safety,
            });
            out.push(finding);
        }
    }
}
