//! OL001 unsupported-opset.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::rules::Context;

declare_rule! {
    /// ## What it does
    /// Flags an opset import (of the model or of one of its local functions) newer than the
    /// selected ONNX Runtime release accepts.
    ///
    /// ## Why is this bad?
    /// ORT refuses to load the model: session creation fails with "Opset N is under development
    /// and support for this is limited". Nothing runs, on any device.
    ///
    /// ## Example
    /// ```text
    /// <ir_version: 11, opset_import: ["" : 25]>   # with --ort 1.23.2, which accepts opset 23
    /// ```
    /// Use instead:
    /// ```text
    /// <ir_version: 11, opset_import: ["" : 23]>
    /// ```
    ///
    /// ## How to fix
    /// Export at an opset the release accepts (the finding names it), or move to the first bundled
    /// ORT release that accepts the model's opset (the finding names it too).
    ///
    /// ## Fix safety
    /// Lowering an opset import is safe only when every node keeps its semantics at the lower
    /// opset; re-export rather than edit the import by hand. See OL101 for the per-node check.
    pub static RULE = ("OL001", "unsupported-opset", Deny, "an opset import is newer than the ORT release accepts", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let functions = cx
        .model
        .proto
        .functions
        .iter()
        .flat_map(|f| f.opset_import.iter().map(move |o| (o, Some(f.name()))));
    let imports = cx
        .model
        .proto
        .opset_import
        .iter()
        .map(|o| (o, None))
        .chain(functions);
    for (import, function) in imports {
        let domain = crate::model::normalize_domain(import.domain());
        let v = import.version();
        let Some(max) = cx.table.max_opset(domain) else {
            continue;
        };
        if v <= max {
            continue;
        }
        let ort = &cx.table.release().ort;
        let whose = function
            .map(|f| format!(" of local function `{f}`"))
            .unwrap_or_default();
        let mut f = Finding::new(
            RULE.code,
            RULE.name,
            RULE.default,
            format!(
                "the {domain} opset import{whose} is {v}; ORT {ort} accepts at most {max}: the model will not load"
            ),
        );
        f.graph = cx.model.main_graph().name.clone();
        f.cause = format!("{domain} {v}");
        f.evidence
            .push(format!("ORT {ort} bundles {domain} up to opset {max}"));
        let first = cx
            .releases
            .iter()
            .find(|(_, t)| t.max_opset(domain).is_some_and(|m| m >= v))
            .map(|(r, _)| *r);
        f.help = Some(match first {
            Some(r) => format!(
                "export at {domain} opset {max} or lower, or use ORT {r} or newer (the first bundled release that accepts opset {v})"
            ),
            None => format!(
                "export at {domain} opset {max} or lower; no bundled ORT release accepts opset {v}"
            ),
        });
        out.push(f);
    }
}
