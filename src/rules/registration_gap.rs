//! OL101 registration-gap.

use crate::sym::SymMap as HashMap;

use crate::analysis::opset_lowering::{self, Lowering, Verdict};
use crate::declare_rule;
use crate::diagnostics::{Finding, Fix, FixSafety};
use crate::placer::ir::SNode;
use crate::placer::{Decision, Miss, lookup};
use crate::rules::{Context, nodes};
use crate::tables::{KernelTable, OpSchema};

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
    /// `--fix` lowers the opset import (JSON `fix`: `set-opset-import`) when, for every node of
    /// every graph whose since-version changes, the lower version has the inputs and outputs the
    /// node passes (same formal at each position, none it omits required), the attributes it sets
    /// (and none it does not set required), and accepts the types bound to them: what each node
    /// *uses* is compared, not whole schemas, so an `Attention` passing 6 of the 7 inputs of
    /// `Attention`-24 lowers to 23. Model-local functions importing the domain are compared the
    /// same way under their own import and move with the model when they are safe too. When a
    /// type cannot be inferred the fix is unsafe (applied only with `--unsafe-fixes`); when a node
    /// uses something the lower version lacks there is no fix, and the finding names the node.
    /// Attribute defaults and prose semantics are not in the tables; ONNX gives every such change a
    /// new since-version, which this comparison sees.
    pub static RULE = ("OL101", "registration-gap", Warn, "the CUDA table lacks only this since-version of the op: the node falls back to CPU", check);
}

/// The older since-version of the node's op that a kernel of the advised provider (`Context::provider`)
/// in `table` would take.
pub fn older_provider_match(cx: &Context, gi: usize, node: &SNode, since: i64) -> Option<i64> {
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
        .find(|&s| provider_takes_at(cx.table, cx, gi, node, s))
}

fn provider_takes_at(
    table: &KernelTable,
    cx: &Context,
    gi: usize,
    node: &SNode,
    since: i64,
) -> bool {
    let Some(schema) = table
        .schemas(&node.domain, &node.op)
        .iter()
        .find(|s| s.since == since)
    else {
        return false;
    };
    let mut probe = node.clone();
    probe.since = Some(since);
    lookup(
        table,
        cx.provider().ep,
        cx.session(),
        gi,
        &probe,
        Some(schema),
    )
    .is_ok()
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

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let ort = cx.table.release().ort.clone();
    let label = cx.provider().label;
    let first = out.len();
    // The release that has every missing kernel of this model (None: some kernel is in none).
    let mut whole_model: Option<Option<&str>> = None;
    let mut lowerings: HashMap<(String, i64), Lowering> = HashMap::default();
    for (gi, ni, node) in nodes(cx.session()) {
        let Some(Decision::CpuFallback { miss, .. }) = cx
            .placement
            .decisions
            .get(crate::session::NodeRef::new(gi, ni))
        else {
            continue;
        };
        let Miss::Version { since } = **miss else {
            continue;
        };
        let Some(older) = older_provider_match(cx, gi, node, since) else {
            continue;
        };
        let rows: Vec<String> = cx
            .provider()
            .kernels(cx.table, &node.domain, &node.op)
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
                "{}-{since} has no {label} kernel in ORT {ort} ({label} registers {} {}): `{}` runs on the CPU",
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
            "{}-{older} would match a {label} kernel with the node's types",
            node.op
        ));
        let schemas = cx.table.schemas(&node.domain, &node.op);
        let opset = opset_for(schemas, older);
        let mut ways = Vec::new();
        let lowering = lowerings
            .entry((node.domain.to_string(), opset))
            .or_insert_with(|| {
                opset_lowering::analyse(cx.model, cx.table, Some(cx.session()), &node.domain, opset)
            });
        match &lowering.model {
            Verdict::Safe => ways.push(format!(
                "lower the {} opset to {opset}: every node keeps the inputs, attributes and types it uses{}",
                node.domain,
                functions_note(lowering)
            )),
            Verdict::Unproven(why) => ways.push(format!(
                "lowering the {} opset to {opset} would restore the kernel, but could not be proved safe: {why}",
                node.domain
            )),
            Verdict::Breaks(why) => ways.push(format!(
                "lowering the {} opset to {opset} would restore the kernel, but is not safe as-is: {why}; re-export at opset {opset} instead",
                node.domain
            )),
        }
        f.fix = lowering_fix(cx, lowering);
        let model_opset = cx.session().opsets.get(&node.domain).copied();
        let fixed_in = cx.releases.iter().find(|(r, t)| {
            newer(r, &ort)
                && model_opset.is_some_and(|o| {
                    t.schema(&node.domain, &node.op, o)
                        .is_some_and(|s| provider_takes_at(t, cx, gi, node, s.since))
                })
        });
        whole_model = Some(match (whole_model, fixed_in) {
            (Some(None), _) | (_, None) => None,
            (None, Some((r, _))) => Some(*r),
            (Some(Some(w)), Some((r, _))) => Some(if newer(r, w) { *r } else { w }),
        });
        match fixed_in {
            Some((r, _)) => ways.push(format!(
                "or use ORT {r}, the first bundled release whose {label} table has {}-{since}",
                node.op
            )),
            None => ways.push(format!(
                "no bundled ORT release newer than {ort} has a {label} kernel for {}-{since}",
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
                    " (ORT {release} is the first bundled release with {label} kernels for all {gaps} nodes this rule flags in the model)"
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

/// How the local functions move with the model (appended to the help).
fn functions_note(l: &Lowering) -> String {
    if l.functions.is_empty() {
        String::new()
    } else if l.functions.iter().all(|(_, _, v)| v.is_safe()) {
        match l.functions.len() {
            1 => ", and so does the local function importing it (lowered with it)".to_string(),
            n => format!(", and so do the {n} local functions importing it (lowered with them)"),
        }
    } else {
        let why = l
            .functions
            .iter()
            .find_map(|(_, _, v)| v.reason())
            .unwrap_or_default();
        format!("; the local functions keep their import ({why})")
    }
}

/// The machine-readable fix: set the model's import (and the functions', when they move too).
/// Safe when proved, unsafe when a type could not be proved, none when a node breaks.
fn lowering_fix(cx: &Context, l: &Lowering) -> Option<Fix> {
    let from = cx.model.opset(&l.domain)?;
    let safety = match l.model {
        Verdict::Safe => FixSafety::Safe,
        Verdict::Unproven(_) => FixSafety::Unsafe,
        Verdict::Breaks(_) => return None,
    };
    Some(Fix::SetOpsetImport {
        domain: l.domain.clone(),
        from,
        to: l.to,
        functions: !l.functions.is_empty() && l.functions.iter().all(|(_, _, v)| v.is_safe()),
        safety,
    })
}
