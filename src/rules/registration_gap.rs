//! OL101 registration-gap.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::infer::{Type, formal_input_positions};
use crate::placer::ir::SNode;
use crate::placer::{Decision, Miss, lookup};
use crate::rules::{Context, nodes};
use crate::tables::{Ep, KernelTable, OpSchema};

declare_rule! {
    /// ## What it does
    /// Flags a node that falls back to the CPU only because the release's CUDA table has no
    /// kernel for the node's since-version, while it has one for an older since-version of the
    /// same op that would accept the node's types: the "opset 24 false positive".
    ///
    /// ORT's version rule is exact: a kernel registered open-ended as "23+" matches only nodes whose
    /// since-version is exactly 23. A model at opset 24 resolves `Reshape` to since-version 24, so
    /// the "23+" CUDA kernel does not match and the node runs on the CPU.
    ///
    /// ## Why is this bad?
    /// The node and everything ORT pushes around it run on the CPU, and every value crossing the
    /// boundary is copied (`MemcpyFromHost`/`MemcpyToHost`): on a decoder this is tens of copies
    /// per step, and CUDA-graph capture becomes impossible.
    ///
    /// ## Example
    /// ```text
    /// <ir_version: 11, opset_import: ["" : 24]>       # ORT 1.24.4
    /// y = Reshape (x, shape)                          # Reshape-24; CUDA registers Reshape 23+
    /// ```
    /// Use instead:
    /// ```text
    /// <ir_version: 11, opset_import: ["" : 23]>       # Reshape-23 matches the 23+ CUDA kernel
    /// ```
    ///
    /// ## How to fix
    /// Either lower the model's ai.onnx opset to the one the finding names (it says whether every
    /// node of the model keeps its schema's inputs, outputs and the types it uses at that opset), or
    /// move to the first bundled ORT release whose CUDA table has the kernel (also named).
    ///
    /// ## Fix safety
    /// Lowering the opset import is safe when, for every node, the schema at the lower opset has the
    /// same formal inputs and outputs and accepts the types the node uses: the newer version only
    /// added types. The finding says which node breaks that when one does. Attribute changes
    /// between versions are not in the tables; re-export with the exporter's `opset_version` rather
    /// than editing the import when in doubt.
    pub static RULE = ("OL101", "registration-gap", Warn, "the CUDA table lacks only this since-version of the op: the node falls back to CPU", check);
}

/// The older since-version of the node's op that a CUDA kernel of `table` would take.
pub fn older_cuda_match(cx: &Context, gi: usize, node: &SNode, since: i64) -> Option<i64> {
    let mut older: Vec<&OpSchema> = cx
        .table
        .schemas(&node.domain, &node.op)
        .iter()
        .filter(|s| s.since < since && !s.deprecated)
        .collect();
    older.reverse();
    older
        .into_iter()
        .map(|s| s.since)
        .find(|&s| cuda_takes_at(cx.table, cx, gi, node, s))
}

fn cuda_takes_at(table: &KernelTable, cx: &Context, gi: usize, node: &SNode, since: i64) -> bool {
    let Some(schema) = table
        .schemas(&node.domain, &node.op)
        .iter()
        .find(|s| s.since == since)
    else {
        return false;
    };
    let mut probe = node.clone();
    probe.since = Some(since);
    lookup(table, Ep::Cuda, cx.session(), gi, &probe, Some(schema)).is_ok()
}

/// The highest opset below `current` at which `op` resolves to since-version `target`.
fn opset_for(schemas: &[OpSchema], target: i64) -> i64 {
    schemas
        .iter()
        .map(|s| s.since)
        .filter(|&s| s > target)
        .min()
        .map(|next| next - 1)
        .unwrap_or(target)
}

/// Whether every node keeps its schema's formals and its types' validity at `opset` for `domain`;
/// the first node that does not, with the reason.
pub fn lowering_breaks(cx: &Context, domain: &str, opset: i64) -> Option<String> {
    for (gi, _, node) in nodes(cx.session()) {
        if node.domain != domain || node.origin.is_none() {
            continue;
        }
        let Some(now) = node.since else { continue };
        let Some(now_schema) = cx
            .table
            .schemas(domain, &node.op)
            .iter()
            .find(|s| s.since == now)
        else {
            continue;
        };
        let Some(low) = cx.table.schema(domain, &node.op, opset) else {
            return Some(format!(
                "`{}` ({}) does not exist at opset {opset}",
                node.name, node.op
            ));
        };
        if low.since == now {
            continue;
        }
        if low.deprecated {
            return Some(format!("{}-{} is deprecated", node.op, low.since));
        }
        let same_formals = |a: &[crate::tables::FormalParam], b: &[crate::tables::FormalParam]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    x.name == y.name && x.type_str == y.type_str && x.option == y.option
                })
        };
        if !same_formals(&now_schema.inputs, &low.inputs)
            || !same_formals(&now_schema.outputs, &low.outputs)
        {
            return Some(format!(
                "`{}`: {}-{} and {}-{} have different inputs or outputs",
                node.name, node.op, now, node.op, low.since
            ));
        }
        for (k, range) in formal_input_positions(low, node.inputs.len())
            .into_iter()
            .enumerate()
        {
            let param = &low.inputs[k];
            let Some(allowed) = low.allowed(&param.type_str) else {
                continue;
            };
            for i in range {
                let Some(name) = node.inputs.get(i).filter(|n| !n.is_empty()) else {
                    continue;
                };
                if let Some(t) = cx.session().type_of(gi, name)
                    && !allowed.contains(&t.to_string())
                    && !matches!(t, Type::Map(..))
                {
                    return Some(format!(
                        "`{}`: {}-{} does not accept {} = {t}",
                        node.name, node.op, low.since, param.type_str
                    ));
                }
            }
        }
    }
    None
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let ort = cx.table.release().ort.clone();
    let first = out.len();
    // The release that has every missing kernel of this model (None: some kernel is in none).
    let mut whole_model: Option<Option<&str>> = None;
    for (gi, ni, node) in nodes(cx.session()) {
        let Some(Decision::CpuFallback {
            cuda_miss: Miss::Version { since },
            ..
        }) = cx.placement.decisions.get(&(gi, ni))
        else {
            continue;
        };
        let since = *since;
        let Some(older) = older_cuda_match(cx, gi, node, since) else {
            continue;
        };
        let rows: Vec<String> = cx
            .table
            .kernels(Ep::Cuda, &node.domain, &node.op)
            .iter()
            .map(|k| k.range_label())
            .fold(Vec::new(), |mut v: Vec<String>, l| {
                if !v.contains(&l) {
                    v.push(l);
                }
                v
            });
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "{}-{since} has no CUDA kernel in ORT {ort} (CUDA registers {} {}): `{}` runs on the CPU",
                node.op,
                node.op,
                rows.join(", "),
                node.name
            ),
        );
        f.cause = format!("{}-{since}", node.op);
        f.evidence.push(format!(
            "ORT's version rule: an open-ended registration `N+` matches only since-version N; {}-{since} matches none of [{}]",
            node.op,
            rows.join(", ")
        ));
        f.evidence.push(format!(
            "{}-{older} would match a CUDA kernel with the node's types",
            node.op
        ));
        let schemas = cx.table.schemas(&node.domain, &node.op);
        let opset = opset_for(schemas, older);
        let mut ways = Vec::new();
        match lowering_breaks(cx, &node.domain, opset) {
            None => ways.push(format!(
                "lower the {} opset to {opset}: every node keeps its inputs, outputs and the types it uses (only types were added since)",
                node.domain
            )),
            Some(why) => ways.push(format!(
                "lowering the {} opset to {opset} would restore the kernel, but is not safe as-is: {why}; re-export at opset {opset} instead",
                node.domain
            )),
        }
        let model_opset = cx.session().opsets.get(&node.domain).copied();
        let fixed_in = cx.releases.iter().find(|(r, t)| {
            newer(r, &ort)
                && model_opset.is_some_and(|o| {
                    t.schema(&node.domain, &node.op, o)
                        .is_some_and(|s| cuda_takes_at(t, cx, gi, node, s.since))
                })
        });
        whole_model = Some(match (whole_model, fixed_in) {
            (Some(None), _) | (_, None) => None,
            (None, Some((r, _))) => Some(*r),
            (Some(Some(w)), Some((r, _))) => Some(if newer(r, w) { *r } else { w }),
        });
        match fixed_in {
            Some((r, _)) => ways.push(format!(
                "or use ORT {r}, the first bundled release whose CUDA table has {}-{since}",
                node.op
            )),
            None => ways.push(format!(
                "no bundled ORT release newer than {ort} has a CUDA kernel for {}-{since}",
                node.op
            )),
        }
        f.help = Some(ways.join("; "));
        let copied = crate::rules::cost::copies_at(cx, gi, ni);
        crate::rules::cost::set_cost(cx, gi, &mut f, &copied);
        out.push(f);
    }
    // Several ops may lack kernels; say which release has all of them.
    let gaps = out.len() - first;
    if gaps > 1
        && let Some(Some(release)) = whole_model
    {
        for f in &mut out[first..] {
            if let Some(h) = f.help.as_mut() {
                h.push_str(&format!(
                    " (ORT {release} is the first bundled release with CUDA kernels for all {gaps} nodes this rule flags in the model)"
                ));
            }
        }
    }
}

/// `a` is a newer release than `b` (dotted numeric versions).
pub fn newer(a: &str, b: &str) -> bool {
    let parse = |v: &str| {
        v.split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    };
    parse(a) > parse(b)
}
