//! What a finding costs at run time: the bytes its copies move per run (a symbolic expression
//! over the model's dim names and its value at the dims the user sets), and the order of
//! findings by that cost.

use std::collections::BTreeMap;

use crate::diagnostics::Finding;
use crate::infer::symbolic::{Dim, product_text};
use crate::model::element_bits;
use crate::rules::Context;
use crate::sym::Sym;

/// The value a dim name counts when the user did not set it (`--dim`, `dims` in the
/// configuration): one sequence of one token, the cost of one decoding step.
pub const DEFAULT_DIM: u64 = 1;

/// Dim values to evaluate sizes at: `batch = 1`, `sequence_length = 2048`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Dims(pub BTreeMap<String, u64>);

impl Dims {
    /// The value of a dim name; an unnamed dim (`?`) and a name not set count [`DEFAULT_DIM`].
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(DEFAULT_DIM)
    }

    /// Parses `name=value` (the `--dim` flag).
    pub fn parse_one(s: &str) -> Result<(String, u64), String> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: expected NAME=VALUE, as in `batch=1`"))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("`{s}`: the dim name is empty"));
        }
        let v: u64 = v
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: the value must be a non-negative integer"))?;
        Ok((k.to_string(), v))
    }
}

/// Bytes per run of value `name` of session graph `gi`: the symbolic expression
/// (`2·batch·seq·64 B`) and its value at the context's dims.
pub fn value_bytes(cx: &Context, gi: usize, name: Sym) -> (Option<u64>, Option<String>) {
    use crate::infer::Type;
    let s = cx.session();
    // A tensor (or an optional one); a sequence of tensors counts an unknown number of them.
    let (elem, seq) = match s.type_of(gi, name) {
        Some(Type::Tensor(e)) => (*e, false),
        Some(Type::Optional(t)) if t.elem().is_some() => (t.elem().unwrap_or(0), false),
        Some(Type::Seq(t)) if t.elem().is_some() => (t.elem().unwrap_or(0), true),
        _ => return (None, Some("? B".into())),
    };
    let Some(bits) = element_bits(elem) else {
        return (None, Some("? B".into()));
    };
    // Unknown dims (an unknown rank, a sequence's length and element shapes) print as `?` and
    // count like a dim not set.
    let unknown = |what: &str| Dim::sym(&format!("?{what}#{name}"));
    let shape: Vec<Dim> = match cx.symbolic().shape(gi, name) {
        Some(d) if !seq => d.to_vec(),
        _ if seq => vec![unknown("len"), unknown("elements")],
        _ => vec![unknown("elements")],
    };
    let dims = |n: &str| cx.dims.get(n);
    let mut elements: Option<u64> = Some(1);
    let mut factors: Vec<Dim> = Vec::new();
    let mut constant: i64 = 1;
    for d in &shape {
        elements = elements.and_then(|e| e.checked_mul(d.eval(&dims)?));
        match d.as_const() {
            Some(k) => constant = constant.saturating_mul(k),
            None => factors.push(d.clone()),
        }
    }
    let bytes = elements
        .and_then(|e| e.checked_mul(bits))
        .map(|b| b.div_ceil(8));
    // Element size first, then the symbolic dims, then the product of the static ones.
    let mut parts: Vec<Dim> = Vec::new();
    let text = if factors.is_empty() {
        match bytes {
            Some(b) => format!("{b} B"),
            None => "? B".into(),
        }
    } else if bits % 8 == 0 {
        if bits != 8 {
            parts.push(Dim::konst(i64::try_from(bits / 8).unwrap_or(i64::MAX)));
        }
        parts.extend(factors.iter().cloned());
        if constant != 1 {
            parts.push(Dim::konst(constant));
        }
        format!("{} B", product_text(&parts))
    } else {
        parts.extend(factors.iter().cloned());
        parts.push(Dim::konst(
            constant.saturating_mul(i64::try_from(bits).unwrap_or(1)),
        ));
        format!("{}/8 B", product_text(&parts))
    };
    (bytes, Some(text))
}

/// A sum of sizes: the total at the dims, and the expressions joined by `+` (same terms
/// counted once with a multiplier).
pub fn sum_bytes(items: &[(Option<u64>, Option<String>)]) -> (Option<u64>, Option<String>) {
    if items.is_empty() {
        return (None, None);
    }
    let total = items
        .iter()
        .map(|(b, _)| *b)
        .try_fold(0u64, |acc, b| acc.checked_add(b?));
    let mut counted: Vec<(String, usize)> = Vec::new();
    for (_, e) in items {
        let e = e.clone().unwrap_or_else(|| "? B".into());
        match counted.iter_mut().find(|(x, _)| *x == e) {
            Some((_, n)) => *n += 1,
            None => counted.push((e, 1)),
        }
    }
    let text = counted
        .into_iter()
        .map(|(e, n)| if n == 1 { e } else { format!("{n}×({e})") })
        .collect::<Vec<_>>()
        .join(" + ");
    (total, Some(text))
}

/// Orders findings by cost, highest first: bytes moved per run, then the rule's order (stable).
pub fn sort_by_cost(findings: &mut [Finding]) {
    findings.sort_by_key(|f| std::cmp::Reverse(f.bytes.unwrap_or(0)));
}

/// The values copied by the Memcpy nodes that feed node `ni` of graph `gi` or read its outputs.
pub fn copies_at(cx: &Context, gi: usize, ni: usize) -> Vec<Sym> {
    let g = &cx.session().graphs[gi];
    crate::rules::copy_nodes_at(cx, gi, ni)
        .into_iter()
        .filter_map(|m| g.nodes[m].inputs.first().copied())
        .collect()
}

/// Sets a finding's cost from the values it copies: `bytes`, `bytes_expr`, and `zero_cost`
/// when there is no copy. A CPU node that no copy connects to a CUDA node runs in a CPU island
/// ORT feeds from host-bound inputs: it costs no transfer, and ORT runs the model with 0 copies.
pub fn set_cost(cx: &Context, gi: usize, f: &mut Finding, copied: &[Sym]) {
    let sizes: Vec<_> = copied.iter().map(|v| value_bytes(cx, gi, *v)).collect();
    (f.bytes, f.bytes_expr) = sum_bytes(&sizes);
    f.zero_cost = copied.is_empty();
}

/// Bytes all of ORT's copies move per run: at the dims, and as a sum of expressions.
pub fn copied_per_run(cx: &Context) -> (Option<u64>, Option<String>) {
    let sizes: Vec<_> = cx
        .placement
        .copies
        .iter()
        .map(|c| value_bytes(cx, c.graph, c.value))
        .collect();
    sum_bytes(&sizes)
}
