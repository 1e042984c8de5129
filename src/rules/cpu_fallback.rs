//! OL102 cpu-fallback.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::placer::{Decision, Miss};
use crate::rules::registration_gap::older_provider_match;
use crate::rules::{Context, nodes};

declare_rule! {
    /// ## What it does
    /// Flags a node that runs on the CPU because the release's CUDA table has no kernel for it at
    /// all: no registration for the op, none for its types, or the CUDA EP refuses its attributes
    /// (asymmetric `ConvTranspose` padding, RNN activations, `Cast` to string, ...).
    ///
    /// ## Why is this bad?
    /// Every value crossing between the node and its CUDA neighbours is copied, and the CPU kernel
    /// is usually much slower than the GPU would be.
    ///
    /// ## Example
    /// ```text
    /// y = Where (cond, a, b)       # a, b: tensor(bool); CUDA Where has no bool kernel
    /// ```
    /// Use instead: a type the CUDA table lists for the op (the finding names the rows).
    ///
    /// ## How to fix
    /// Use a type or attribute the CUDA kernel supports (the finding lists the accepted types), or
    /// restructure the graph so the op is not needed on the GPU path, or move to the first bundled
    /// ORT release whose CUDA table has a kernel for the node's op, since-version and types (the
    /// finding names it when there is one).
    ///
    /// ## Fix safety
    /// Display only: changing a type or attribute changes what the model computes.
    pub static RULE = ("OL102", "cpu-fallback", Warn, "a node has no CUDA kernel for its types or attributes and runs on CPU", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let ort = &cx.table.release().ort;
    let provider = cx.provider();
    let label = provider.label;
    for (gi, ni, node) in nodes(cx.session()) {
        let since = node.since.unwrap_or(0);
        let (message, evidence, help) = match cx
            .placement
            .decisions
            .get(crate::session::NodeRef::new(gi, ni))
        {
            Some(Decision::CpuFallback { miss, .. }) => match &**miss {
                Miss::Version { since } if older_provider_match(cx, gi, node, *since).is_some() => {
                    continue;
                }
                Miss::NoRegistration => (
                    format!(
                        "ORT {ort} has no {label} kernel for {}: `{}` runs on the CPU",
                        node.op, node.name
                    ),
                    format!("the {label} table of ORT {ort} has no {} row", node.op),
                    format!(
                        "replace the op with ones the {label} EP implements, or accept the CPU hop"
                    ),
                ),
                Miss::Version { since } => (
                    format!(
                        "no {label} kernel for {}-{since} in ORT {ort}: `{}` runs on the CPU",
                        node.op, node.name
                    ),
                    format!("{label} rows for {}: {}", node.op, rows(cx, node)),
                    format!(
                        "no older version of the op has a {label} kernel for the node's types either"
                    ),
                ),
                Miss::Type { constraint, actual } => (
                    format!(
                        "the {label} {}-{since} kernel does not take {constraint} = {actual}: `{}` runs on the CPU",
                        node.op, node.name
                    ),
                    format!("{label} rows for {}: {}", node.op, rows(cx, node)),
                    format!(
                        "use one of the types the {label} kernel accepts for {constraint}: {}",
                        accepted(cx, node, constraint, since)
                    ),
                ),
                Miss::NoSchema => continue,
            },
            Some(Decision::CpuUnsupported { reason, .. }) => (
                format!("{reason}: `{}` ({}) runs on the CPU", node.name, node.op),
                format!(
                    "{}::GetCapability rejects the node: {reason}",
                    provider.name()
                ),
                format!("change the attribute to one the {label} kernel supports"),
            ),
            _ => continue,
        };
        let mut f = cx.node_finding(&RULE, gi, ni, message);
        f.cause = format!("{}-{since}", node.op);
        f.evidence.push(evidence);
        let fixed_in = match cx
            .placement
            .decisions
            .get(crate::session::NodeRef::new(gi, ni))
        {
            Some(Decision::CpuFallback { .. }) => first_release_with_kernel(cx, gi, node),
            _ => None,
        };
        f.help = Some(match fixed_in {
            Some(r) => format!(
                "{help}; or use ORT {r}, the first bundled release whose {label} table has a kernel for {}-{since} with the node's types",
                node.op
            ),
            None if matches!(
                cx.placement
                    .decisions
                    .get(crate::session::NodeRef::new(gi, ni)),
                Some(Decision::CpuFallback { .. })
            ) =>
            {
                format!(
                    "{help} (no bundled ORT release newer than {ort} has a {label} kernel for {}-{since} with the node's types)",
                    node.op
                )
            }
            None => help,
        });
        let copied = crate::rules::cost::copies_at(cx, gi, ni);
        crate::rules::cost::set_cost(cx, gi, &mut f, &copied);
        out.push(f);
    }
}

fn rows(cx: &Context, node: &crate::placer::ir::SNode) -> String {
    let mut labels: Vec<String> = Vec::new();
    for k in cx.provider().kernels(cx.table, &node.domain, &node.op) {
        let l = k.range_label();
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    labels.join(", ")
}

fn accepted(cx: &Context, node: &crate::placer::ir::SNode, constraint: &str, since: i64) -> String {
    let mut types: std::collections::BTreeSet<String> = Default::default();
    for k in cx.provider().kernels(cx.table, &node.domain, &node.op) {
        if k.matches_since(since)
            && let Some(list) = k.allowed(constraint)
        {
            types.extend(list.iter().cloned());
        }
    }
    types.into_iter().collect::<Vec<_>>().join(", ")
}

/// The first bundled release newer than the simulated one whose provider's table has a kernel for the
/// node's op, since-version (at the model's opset) and types.
fn first_release_with_kernel(
    cx: &Context,
    gi: usize,
    node: &crate::placer::ir::SNode,
) -> Option<&'static str> {
    let ort = &cx.table.release().ort;
    let opset = cx.session().opsets.get(&node.domain).copied()?;
    cx.releases
        .iter()
        .filter(|(r, _)| crate::rules::registration_gap::newer(r, ort))
        .find(|(_, t)| {
            let Some(schema) = t.schema(&node.domain, &node.op, opset) else {
                return false;
            };
            let mut probe = node.clone();
            probe.since = Some(schema.since);
            crate::placer::lookup(t, cx.provider().ep, cx.session(), gi, &probe, Some(schema))
                .is_ok()
        })
        .map(|(r, _)| *r)
}
