//! OL201 memcpy.

use crate::declare_rule;
use crate::diagnostics::{Finding, ValueLabel};
use crate::memcpy::{Cause, Direction};
use crate::model::tensor_byte_size;
use crate::placer::{Decision, Miss};
use crate::rules::Context;
use crate::sym::Sym;

declare_rule! {
    /// ## What it does
    /// Reports each `MemcpyFromHost`/`MemcpyToHost` node ORT will insert: the value copied, the
    /// node that produces it and the nodes on the other side that read it, and the finding that
    /// causes it (the OL101/OL102 node behind the boundary). Its size is a symbolic expression
    /// over the model's dim names (`bytes_expr`, `2·batch·seq·64 B`) and a number (`bytes`)
    /// evaluated at the dims you set (`--dim batch=1 --dim seq=2048`, or `dims` in the
    /// configuration; a dim not set counts 1). Findings are ordered by cost, largest first, and
    /// copies with the same cause are grouped.
    ///
    /// ## Why is this bad?
    /// Each copy is a synchronising transfer over PCIe on every run, and any copy in the main graph
    /// makes CUDA-graph capture impossible. ORT itself only says "N Memcpy nodes are added to the
    /// graph" at run time.
    ///
    /// ## Example
    /// ```text
    /// ids_i64 = Cast <to = 7> (ids)         # on CUDA
    /// pos = CumSum (ids_i64, axis)          # CumSum int64: CPU only -> MemcpyToHost before ids_i64
    /// emb = Gather (table, pos)             # on CUDA -> MemcpyFromHost after pos
    /// ```
    ///
    /// ## How to fix
    /// Fix the cause the finding names: the CPU fallback (OL101, OL102), the shape computation
    /// (OL301) or the chain (OL302, OL303). Copies disappear with their cause.
    ///
    /// ## Fix safety
    /// No automatic fix: the copy is a consequence, not the problem.
    pub static RULE = ("OL201", "memcpy", Warn, "each predicted Memcpy copy, with its value, producer, consumers and cause", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    let mut found = Vec::new();
    for copy in &cx.placement.copies {
        let gi = copy.graph;
        let g = &s.graphs[gi];
        let edges = cx.edges(gi);
        // The copy pass records the node it inserted, the graph's last edit.
        let copy_node = g
            .nodes
            .get(copy.node)
            .filter(|n| !n.removed && n.name == copy.node_name && n.op.starts_with("Memcpy"))
            .map(|n| (copy.node, n));
        let (host_side, device_side): (Vec<usize>, Vec<usize>) = match (copy.direction, copy_node) {
            (Direction::FromHost, Some((_, n))) => (
                edges
                    .producer
                    .get(&copy.value)
                    .copied()
                    .into_iter()
                    .collect(),
                edges
                    .consumers
                    .get(&n.outputs[0])
                    .cloned()
                    .unwrap_or_default(),
            ),
            (Direction::ToHost, Some((_, n))) => (
                edges
                    .consumers
                    .get(&copy.value)
                    .cloned()
                    .unwrap_or_default(),
                edges
                    .producer
                    .get(&n.inputs[0])
                    .copied()
                    .into_iter()
                    .collect(),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        let name_of = |ni: usize| format!("`{}` ({})", g.nodes[ni].name, g.nodes[ni].op);
        let list = |v: &[usize]| v.iter().map(|&n| name_of(n)).collect::<Vec<_>>().join(", ");
        let on = crate::providers::of(copy.ep).label;
        let (what, cause, anchor) = match copy.direction {
            Direction::FromHost => {
                let producer = host_side.first().copied();
                let from = match (copy.cause, producer) {
                    (Cause::GraphInput, _) => "graph input".to_string(),
                    (Cause::OuterScope, _) => "outer-scope value".to_string(),
                    (_, Some(p)) => name_of(p),
                    (_, None) => "host value".to_string(),
                };
                (
                    format!(
                        "MemcpyFromHost after `{}`: {from} is on the host, read on {on} by {}",
                        copy.value,
                        list(&device_side)
                    ),
                    producer
                        .map(|p| reason(cx, gi, p))
                        .unwrap_or_else(|| format!("{} read on both devices", from)),
                    producer.or(device_side.first().copied()),
                )
            }
            Direction::ToHost => {
                let host_reader = host_side.first().copied();
                let producer = device_side.first().copied();
                (
                    format!(
                        "MemcpyToHost before `{}`: produced on {on} by {}, read on the host by {}",
                        copy.value,
                        producer
                            .map(name_of)
                            .unwrap_or_else(|| format!("a {on} node")),
                        list(&host_side)
                    ),
                    host_reader
                        .map(|c| reason(cx, gi, c))
                        .unwrap_or_else(|| "host reader".to_string()),
                    host_reader.or(producer),
                )
            }
        };
        let mut f = match anchor {
            Some(ni) if !g.nodes[ni].op.starts_with("Memcpy") => {
                cx.node_finding(&RULE, gi, ni, what)
            }
            _ => {
                let mut f = Finding::new(RULE.code, RULE.name, RULE.default, what);
                f.graph = g.name.to_string();
                f
            }
        };
        f.values = vec![ValueLabel {
            name: copy.value.to_string(),
            text: format!("copied: {}", cx.describe_value(gi, copy.value)),
        }];
        (f.bytes, f.bytes_expr) = crate::rules::cost::value_bytes(cx, gi, copy.value);
        if f.bytes.is_none() {
            f.bytes = bytes(cx, gi, copy.value);
        }
        let host_node = match copy.direction {
            Direction::FromHost => host_side.first().copied(),
            Direction::ToHost => host_side.first().copied(),
        };
        match host_node.and_then(|h| linked_finding(cx, gi, h)) {
            Some(link) => f.evidence.push(format!("caused by {link}: {cause}")),
            None => f.evidence.push(copy.log_line()),
        }
        f.cause = cause;
        found.push(f);
    }
    // Largest transfers first within each cause, causes in order of their total size.
    found.sort_by_key(|f| std::cmp::Reverse(f.bytes.unwrap_or(0)));
    let mut totals: Vec<(String, u64)> = Vec::new();
    for f in &found {
        match totals.iter_mut().find(|(c, _)| *c == f.cause) {
            Some((_, t)) => *t += f.bytes.unwrap_or(0),
            None => totals.push((f.cause.clone(), f.bytes.unwrap_or(0))),
        }
    }
    totals.sort_by_key(|t| std::cmp::Reverse(t.1));
    found.sort_by_key(|f| totals.iter().position(|(c, _)| *c == f.cause));
    out.extend(found);
}

/// Bytes of a value per run, when its type and shape are fully known.
fn bytes(cx: &Context, gi: usize, value: Sym) -> Option<u64> {
    let s = cx.session();
    let elem = s.type_of(gi, value)?.elem()?;
    let dims: Option<Vec<i64>> = s.shape_of(gi, value)?.iter().copied().collect();
    tensor_byte_size(&dims?, elem)
}

/// Why node `ni` is on the host side: the grouping key of copies.
fn reason(cx: &Context, gi: usize, ni: usize) -> String {
    let node = &cx.session().graphs[gi].nodes[ni];
    let since = node.since.map(|s| format!("-{s}")).unwrap_or_default();
    let label = cx.provider().label;
    match cx
        .placement
        .decisions
        .get(crate::session::NodeRef::new(gi, ni))
    {
        Some(Decision::CpuFallback { miss, .. }) if matches!(**miss, Miss::Version { .. }) => {
            format!(
                "{}{since} on CPU: no {label} kernel for this since-version",
                node.op
            )
        }
        Some(Decision::CpuFallback { .. }) | Some(Decision::CpuUnsupported { .. }) => {
            format!(
                "{}{since} on CPU: no {label} kernel for its types or attributes",
                node.op
            )
        }
        Some(Decision::CpuPreferred { .. }) => "shape computation moved to CPU".to_string(),
        Some(Decision::Fp32OnCpu { .. }) => format!("{}{since} run in float32 on CPU", node.op),
        Some(Decision::Provider) => {
            let on = node.ep.map_or(label, |e| crate::providers::of(e).label);
            match node.kernel {
                Some(k) => format!(
                    "host-memory argument of {on} {} ({})",
                    node.op,
                    k.range_label()
                ),
                None => format!("host-memory argument of {on} {}", node.op),
            }
        }
        _ => format!("{}{since} on CPU", node.op),
    }
}

/// The finding on the host-side node that causes a copy: `OL101 (registration-gap) on `n``.
fn linked_finding(cx: &Context, gi: usize, ni: usize) -> Option<String> {
    let node = &cx.session().graphs[gi].nodes[ni];
    let code = match cx
        .placement
        .decisions
        .get(crate::session::NodeRef::new(gi, ni))?
    {
        Decision::CpuFallback { miss, .. }
            if matches!(**miss, Miss::Version { since }
                if crate::rules::registration_gap::older_provider_match(cx, gi, node, since).is_some()) =>
        {
            "OL101 (registration-gap)"
        }
        Decision::CpuFallback { .. } | Decision::CpuUnsupported { .. } => "OL102 (cpu-fallback)",
        Decision::CpuPreferred { .. } => "OL103 (cpu-preferred)",
        _ => return None,
    };
    Some(format!("{code} on `{}` ({})", node.name, node.op))
}
