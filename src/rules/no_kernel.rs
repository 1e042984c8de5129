//! OL002 no-kernel.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::placer::{Decision, Miss, Outcome};
use crate::rules::{Context, nodes};

declare_rule! {
    /// ## What it does
    /// Flags a node that no execution provider in the list can run: neither the CUDA nor the CPU
    /// kernel table of the release has a registration for its op, since-version and types, it is
    /// not a function ORT can inline, and it is not a float16 node that ORT can run in float32.
    /// Also flags models ORT refuses at load for a node (an op it does not know, an attribute the
    /// op's schema does not declare or a required one missing, a shape-inference error) and
    /// nodes whose kernel refuses them when the session creates it (the CUDA
    /// `BatchNormalization` in training mode at opset 14+).
    ///
    /// ## Why is this bad?
    /// Session creation fails ("Could not find an implementation for ..." or "Provider type for
    /// ... is not set"): the model cannot run on this release.
    ///
    /// ## Example
    /// ```text
    /// y = Cast <to = 23> (x)      # float4e2m1 has no CPU Cast kernel in this release
    /// ```
    /// Use instead: a type the release implements, or a release that implements it.
    ///
    /// ## How to fix
    /// Change the node's types to ones the release implements (the finding lists the CPU and CUDA
    /// rows for the op), or pick a release whose tables have the kernel.
    ///
    /// ## Fix safety
    /// No automatic fix: changing types changes numerics.
    pub static RULE = ("OL002", "no-kernel", Deny, "a node has no kernel on any provider: session creation fails", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    if let Outcome::LoadFail(e) | Outcome::InitFail(e) | Outcome::PartitionFail(e) =
        &cx.placement.outcome
        && !e.contains("Opset")
    {
        let message = e
            .trim_start_matches("load: ")
            .trim_start_matches("init: ")
            .to_string();
        let mut f = match cx.placement.failed_node {
            Some(at) => cx.node_finding(&RULE, at.graph(), at.node(), message),
            None => {
                let mut f = Finding::new(RULE.code, RULE.name, RULE.default, message);
                f.graph = cx.model.main_graph().name.clone();
                f
            }
        };
        let (cause, help) = if e.contains("Unrecognized attribute") {
            (
                "unrecognized attribute",
                "this release's schema for the op does not declare the attribute: remove it, or import the opset (or use the release) whose schema has it",
            )
        } else if e.contains("Required attribute") {
            (
                "missing attribute",
                "set the attribute the op's schema requires",
            )
        } else if e.contains("ShapeInferenceError") {
            (
                "shape inference",
                "ORT's shape inference rejects the node at load: fix the attribute combination it names",
            )
        } else if e.contains("Type Error") && e.contains("of input parameter") {
            (
                "type error",
                "ORT checks each input's type against the types its op's schema permits, at load: give the input a type the schema lists (`cargo onnx-lint tables show` names the op's kernels and their types)",
            )
        } else if e.contains("Type Error") {
            (
                "type error",
                "the types bound to one type parameter differ; after ORT inlines a function (the op has no kernel for these types) its body must still type-check: use types the op's kernels accept",
            )
        } else if e.starts_with("init: ") {
            (
                "kernel initialisation",
                "the kernel the node is placed on refuses it: export the node in inference form (for BatchNormalization, training_mode = 0)",
            )
        } else {
            (
                "unknown op",
                "register the op's domain with a custom-op library, or replace the node with standard ops",
            )
        };
        f.cause = cause.into();
        f.help = Some(help.into());
        out.push(f);
    }
    for (gi, ni, node) in nodes(cx.session()) {
        let Some(Decision::Unassigned {
            provider_miss,
            cpu_miss,
        }) = cx
            .placement
            .decisions
            .get(crate::session::NodeRef::new(gi, ni))
        else {
            continue;
        };
        if node.ep.is_some() {
            continue;
        }
        let since = node
            .since
            .map(|s| s.to_string())
            .unwrap_or_else(|| "?".into());
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "no provider has a kernel for {}({since}) node `{}`: session creation fails",
                node.op, node.name
            ),
        );
        f.cause = format!("{} {since}", node.op);
        let provider = cx.provider().label;
        for (ep, miss) in [(provider, provider_miss.as_ref()), ("CPU", Some(cpu_miss))] {
            if let Some(m) = miss {
                f.evidence.push(format!("{ep}: {}", describe_miss(m)));
            }
        }
        f.help = Some(format!(
            "use types the release implements for {} (`cargo onnx-lint tables show {}` lists its rows) or a release that has the kernel",
            node.op,
            cx.table.release().ort
        ));
        out.push(f);
    }
}

/// A sentence for a failed kernel lookup.
pub fn describe_miss(m: &Miss) -> String {
    match m {
        Miss::NoRegistration => "no registration for the op".into(),
        Miss::Version { since } => format!("no registration matches since-version {since}"),
        Miss::Type { constraint, actual } => {
            format!("registrations exist, but none accepts {constraint} = {actual}")
        }
        Miss::NoSchema => "the node has no schema".into(),
    }
}
