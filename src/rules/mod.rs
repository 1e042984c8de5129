//! The lint rules: one file each, thin queries over the placer's analysis.
//!
//! A rule is declared with [`declare_rule!`]: its doc comment (fixed sections: what it does, why
//! is this bad, example, how to fix, fix safety) is the only copy of its documentation;
//! `rules/<CODE>-<name>.md` and `rules/README.md` are generated from it (checked by
//! `tests/it/docs.rs`). A rule never parses, never does I/O and never prints.

pub mod cost;
mod cpu_fallback;
mod cpu_preferred;
mod cuda_graph_blocker;
mod cumsum_int64_chain;
mod float_attention_bias;
mod function_opset_mismatch;
mod memcpy;
mod no_kernel;
mod registration_gap;
mod shape_fed_reshape;
pub mod shape_proof;
pub mod symbolic;
mod unsupported_opset;

use crate::sym::{SymMap as HashMap, SymSet as HashSet};

use crate::diagnostics::{Finding, Severity, ValueLabel};
use crate::model::{Model, NodeId};
use crate::placer::Placement;
use crate::placer::ir::{SNode, Session};
use crate::sym::Sym;
use crate::tables::KernelTable;

/// A rule's identity and documentation.
#[derive(Debug)]
pub struct RuleMeta {
    pub code: &'static str,
    pub name: &'static str,
    pub default: Severity,
    /// One line, for indexes and SARIF `shortDescription`.
    pub summary: &'static str,
    /// The rule's doc comment, Markdown, with the fixed sections.
    pub doc: &'static str,
    pub check: fn(&Context, &mut Vec<Finding>),
}

impl RuleMeta {
    /// The doc comment with rustdoc's one-space indent removed.
    pub fn doc_text(&self) -> String {
        self.doc
            .lines()
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string()
    }

    /// The page `rules/<CODE>-<name>.md`.
    pub fn page(&self) -> String {
        let mut summary = self.summary.to_string();
        if let Some(first) = summary.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        let group = if ZERO_COST_RULES.contains(&self.code) {
            format!(
                " A finding that causes no copy at the simulated release is in the opt-in `{ZERO_COST}` group: reported only with `--warn {ZERO_COST}` (or `{ZERO_COST} = \"warn\"` under `[rules]`)."
            )
        } else {
            String::new()
        };
        format!(
            "# {} {}\n\n{summary}.\n\nDefault level: **{}**.{group} Explain it with `cargo onnx-lint explain {}`.\n\n{}\n",
            self.code,
            self.name,
            self.default,
            self.code,
            self.doc_text()
        )
    }

    pub fn file_name(&self) -> String {
        format!("{}-{}.md", self.code, self.name)
    }
}

/// Declares a rule: `declare_rule! { /// docs... pub static NAME = (code, name, default, summary, check_fn); }`.
#[macro_export]
macro_rules! declare_rule {
    ($(#[doc = $doc:literal])* pub static $id:ident = ($code:literal, $name:literal, $default:ident, $summary:literal, $check:path);) => {
        $(#[doc = $doc])*
        pub static $id: $crate::rules::RuleMeta = $crate::rules::RuleMeta {
            code: $code,
            name: $name,
            default: $crate::diagnostics::Severity::$default,
            summary: $summary,
            doc: concat!($($doc, "\n"),*),
            check: $check,
        };
    };
}

/// Every rule, in code order.
pub fn all() -> [&'static RuleMeta; 11] {
    [
        &unsupported_opset::RULE,
        &no_kernel::RULE,
        &function_opset_mismatch::RULE,
        &registration_gap::RULE,
        &cpu_fallback::RULE,
        &cpu_preferred::RULE,
        &memcpy::RULE,
        &cuda_graph_blocker::RULE,
        &shape_fed_reshape::RULE,
        &cumsum_int64_chain::RULE,
        &float_attention_bias::RULE,
    ]
}

/// A rule by code (`OL101`, any case) or name (`registration-gap`).
pub fn find(key: &str) -> Option<&'static RuleMeta> {
    all()
        .into_iter()
        .find(|r| r.code.eq_ignore_ascii_case(key) || r.name == key)
}

/// What a rule sees.
pub struct Context<'a> {
    pub model: &'a Model,
    pub placement: &'a Placement,
    pub table: &'a KernelTable,
    /// Every bundled release's table, oldest first, for "first release that fixes it".
    pub releases: &'a [(&'static str, &'a KernelTable)],
    /// The dims sizes are evaluated at (`--dim`, `dims` in the configuration).
    pub dims: &'a cost::Dims,
    symbolic: std::cell::OnceCell<symbolic::Shapes>,
    /// Per session graph, its producer/consumer maps, built on first use and shared by the
    /// rules: a rule that asks them per finding does not walk the graph per finding.
    edges: Vec<std::cell::OnceCell<Edges>>,
}

impl<'a> Context<'a> {
    pub fn new(
        model: &'a Model,
        placement: &'a Placement,
        table: &'a KernelTable,
        releases: &'a [(&'static str, &'a KernelTable)],
        dims: &'a cost::Dims,
    ) -> Context<'a> {
        Context {
            model,
            placement,
            table,
            releases,
            dims,
            symbolic: std::cell::OnceCell::new(),
            edges: (0..placement.session.graphs.len())
                .map(|_| std::cell::OnceCell::new())
                .collect(),
        }
    }

    /// The session's symbolic shapes, inferred on first use.
    pub fn symbolic(&self) -> &symbolic::Shapes {
        self.symbolic
            .get_or_init(|| symbolic::infer(self.model, &self.placement.session))
    }

    pub fn session(&self) -> &Session {
        &self.placement.session
    }

    /// The provider the rules' findings and advice are about: the simulated list's provider
    /// before the CPU (for a CPU-only list, the default list's: `providers::advised`).
    pub fn provider(&self) -> &'static crate::providers::Provider {
        crate::providers::advised(&self.placement.eps)
    }

    /// A finding about node `ni` of session graph `gi`, filled with its identity, its input
    /// labels and its Python source location.
    pub fn node_finding(&self, rule: &RuleMeta, gi: usize, ni: usize, message: String) -> Finding {
        let node = &self.session().graphs[gi].nodes[ni];
        let mut f = Finding::new(rule.code, rule.name, rule.default, message);
        f.node = node.origin;
        f.node_name = Some(node.name.to_string());
        f.op = Some(node.op.to_string());
        f.graph = self.session().graphs[gi].name.to_string();
        f.values = node
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, &n)| ValueLabel {
                name: n.to_string(),
                text: format!("input {i}: {}", self.describe_value(gi, n)),
            })
            .collect();
        f.source_location = node.origin.and_then(|o| source_location(self.model, o));
        f
    }

    /// `tensor(float)[N, 8]` for a value, as far as known.
    pub fn describe_value(&self, gi: usize, name: Sym) -> String {
        let s = self.session();
        let ty = s
            .type_of(gi, name)
            .map(|t| t.to_string())
            .unwrap_or_else(|| "?".into());
        match s.shape_of(gi, name) {
            Some(dims) => format!(
                "{ty}[{}]",
                dims.iter()
                    .map(|d| d.map(|v| v.to_string()).unwrap_or_else(|| "?".into()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => ty,
        }
    }

    /// Producer of each value and consumers in session graph `gi` (the final graph), built
    /// once per graph.
    pub fn edges(&self, gi: usize) -> &Edges {
        self.edges[gi].get_or_init(|| Edges::new(self.session(), gi))
    }
}

/// Value → producer / consumers maps of one session graph.
pub struct Edges {
    pub producer: HashMap<Sym, usize>,
    pub consumers: HashMap<Sym, Vec<usize>>,
}

impl Edges {
    pub fn new(s: &Session, gi: usize) -> Edges {
        let g = &s.graphs[gi];
        let mut producer = HashMap::default();
        let mut consumers: HashMap<Sym, Vec<usize>> = HashMap::default();
        for (i, n) in g.live_nodes() {
            for &o in n.outputs.iter().filter(|o| !o.is_empty()) {
                producer.insert(o, i);
            }
            for &name in n.inputs.iter().filter(|o| !o.is_empty()) {
                consumers.entry(name).or_default().push(i);
            }
        }
        Edges {
            producer,
            consumers,
        }
    }
}

/// The innermost frame of a Python stack trace stored in the node's metadata by exporters
/// (`pkg.torch.onnx.stack_trace`; also `stack_trace`, `source_location`): `file:line in fn`.
pub fn source_location(model: &Model, node: NodeId) -> Option<String> {
    let proto = model.node_proto(node);
    let trace = proto
        .metadata_props
        .iter()
        .find(|p| {
            matches!(
                p.key(),
                "pkg.torch.onnx.stack_trace" | "stack_trace" | "source_location"
            )
        })?
        .value()
        .to_string();
    let frame = trace
        .lines()
        .rev()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("File \"")?;
            let (file, rest) = rest.split_once('"')?;
            let rest = rest.trim_start_matches(',').trim();
            let line = rest.strip_prefix("line ")?.split(',').next()?.trim();
            let func = rest.split_once(" in ").map(|(_, f)| f.trim()).unwrap_or("");
            Some(if func.is_empty() {
                format!("{file}:{line}")
            } else {
                format!("{file}:{line} in {func}")
            })
        })
        .next();
    frame.or_else(|| Some(trace.lines().last()?.trim().to_string()).filter(|s| !s.is_empty()))
}

/// The metadata key that suppresses rules on one node: a comma- or space-separated list of
/// codes or names (`OL301, memcpy`), or `all`.
pub const SUPPRESS_KEY: &str = "onnx-lint.allow";

/// Rules suppressed on a model node.
pub fn suppressed(model: &Model, node: NodeId, rule: &RuleMeta) -> bool {
    model
        .node_proto(node)
        .metadata_props
        .iter()
        .filter(|p| p.key() == SUPPRESS_KEY)
        .flat_map(|p| {
            p.value()
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .any(|s| s == "all" || s.eq_ignore_ascii_case(rule.code) || s == rule.name)
}

/// Severity overrides, applied in order (later wins): config files, then the command line.
#[derive(Debug, Clone, Default)]
pub struct Severities {
    overrides: Vec<(String, Severity)>,
}

/// An unknown rule name in a severity override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRule(pub String);

impl Severities {
    /// Adds an override for a rule code, name, `all`, or the [`ZERO_COST`] group.
    pub fn set(&mut self, key: &str, level: Severity) -> Result<(), UnknownRule> {
        if !is_group(key) && find(key).is_none() {
            return Err(UnknownRule(key.to_string()));
        }
        self.overrides.push((key.to_string(), level));
        Ok(())
    }

    /// A rule's level: its default, then each override in order. `all` acts as clippy's
    /// `-D warnings` does: `deny all`/`warn all` change only the rules enabled at that point
    /// (an allow-by-default rule stays off unless named), `allow all` turns every rule off.
    pub fn level(&self, rule: &RuleMeta) -> Severity {
        let mut level = rule.default;
        for (key, l) in &self.overrides {
            if key == "all" {
                if level != Severity::Allow || *l == Severity::Allow {
                    level = *l;
                }
            } else if key.eq_ignore_ascii_case(rule.code) || key == rule.name {
                level = *l;
            }
        }
        level
    }

    /// The level of a rule's findings that cost nothing at the simulated release: the
    /// [`ZERO_COST`] group's (`allow` unless `zero-cost` or `all` is set), and `allow` when the
    /// rule itself is.
    pub fn zero_cost_level(&self, rule: &RuleMeta) -> Severity {
        let mut group = Severity::Allow;
        for (key, l) in &self.overrides {
            if key == "all" || key == ZERO_COST {
                group = *l;
            }
        }
        if self.level(rule) == Severity::Allow {
            Severity::Allow
        } else {
            group
        }
    }
}

/// The opt-in group of findings that cost nothing at the simulated release: no copy moves
/// data because of them. Off (`allow`) unless enabled with `--warn zero-cost` or
/// `zero-cost = "warn"` under `[rules]`.
pub const ZERO_COST: &str = "zero-cost";

/// Rules whose findings may cost nothing (no copy) and then belong to the [`ZERO_COST`] group.
pub const ZERO_COST_RULES: [&str; 5] = ["OL101", "OL102", "OL301", "OL302", "OL303"];

/// Keys of severity overrides that name groups of rules rather than one rule.
pub fn is_group(key: &str) -> bool {
    key == "all" || key == ZERO_COST
}

/// Runs every enabled rule and returns the findings at their configured severity (findings that
/// cost nothing at the [`ZERO_COST`] group's), suppressed ones removed, ordered by cost: bytes
/// copied per run, highest first, then rule order.
pub fn check(cx: &Context, severities: &Severities) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in all() {
        let level = severities.level(rule);
        if level == Severity::Allow {
            continue;
        }
        let zero_cost_level = severities.zero_cost_level(rule);
        let mut found = Vec::new();
        (rule.check)(cx, &mut found);
        for mut f in found {
            if f.node.is_some_and(|n| suppressed(cx.model, n, rule)) {
                continue;
            }
            f.severity = if f.zero_cost { zero_cost_level } else { level };
            if f.severity == Severity::Allow {
                continue;
            }
            if f.zero_cost {
                f.evidence.push(format!(
                    "no copy at ORT {}: reported because the opt-in `{ZERO_COST}` group is enabled",
                    cx.table.release().ort
                ));
            }
            out.push(f);
        }
    }
    cost::sort_by_cost(&mut out);
    out
}

/// `nodes` (of graph `gi`) sorted into the graph's topological order.
pub fn in_topological_order(s: &Session, gi: usize, nodes: &mut [usize]) {
    let order = crate::infer::topological_order(s, gi);
    let pos: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &n)| (n, p)).collect();
    nodes.sort_by_key(|n| pos.get(n).copied().unwrap_or(usize::MAX));
}

/// Copies (of graph `gi`) of values that the nodes of `chain` produce.
pub fn copies_of_chain(cx: &Context, gi: usize, chain: &[usize]) -> usize {
    let g = &cx.session().graphs[gi];
    let values: HashSet<Sym> = chain
        .iter()
        .flat_map(|&c| g.nodes[c].outputs.iter().copied())
        .collect();
    cx.placement
        .copies
        .iter()
        .filter(|c| c.graph == gi && values.contains(&c.value))
        .count()
}

/// The values (of graph `gi`) that the nodes of `chain` produce and ORT copies.
pub fn copies_of_chain_list(cx: &Context, gi: usize, chain: &[usize]) -> Vec<Sym> {
    let g = &cx.session().graphs[gi];
    let values: HashSet<Sym> = chain
        .iter()
        .flat_map(|&c| g.nodes[c].outputs.iter().copied())
        .collect();
    cx.placement
        .copies
        .iter()
        .filter(|c| c.graph == gi && values.contains(&c.value))
        .map(|c| c.value)
        .collect()
}

/// Copy nodes that feed node `ni` or read its outputs.
pub fn copies_touching(cx: &Context, gi: usize, ni: usize) -> usize {
    copy_nodes_at(cx, gi, ni).len()
}

/// The live copy nodes that write one of node `ni`'s inputs or read one of its outputs, each
/// once, ascending: found from the graph's edges, not by a walk of the graph per node asked.
pub fn copy_nodes_at(cx: &Context, gi: usize, ni: usize) -> Vec<usize> {
    let g = &cx.session().graphs[gi];
    let Some(node) = g.nodes.get(ni) else {
        return Vec::new();
    };
    let edges = cx.edges(gi);
    let is_copy = |m: usize| {
        let op = g.nodes[m].op;
        op == Sym::MEMCPY_FROM_HOST || op == Sym::MEMCPY_TO_HOST
    };
    // The copies writing one of its inputs or reading one of its outputs, each once.
    let mut copies: Vec<usize> = node
        .inputs
        .iter()
        .filter_map(|i| edges.producer.get(i).copied())
        .chain(
            node.outputs
                .iter()
                .filter(|o| !o.is_empty())
                .flat_map(|o| edges.consumers.get(o).into_iter().flatten().copied()),
        )
        .filter(|&m| is_copy(m))
        .collect();
    copies.sort_unstable();
    copies.dedup();
    copies
}

/// Helper for rules: every live node of every session graph.
pub fn nodes(s: &Session) -> impl Iterator<Item = (usize, usize, &SNode)> {
    s.graphs
        .iter()
        .enumerate()
        .flat_map(|(gi, g)| g.live_nodes().map(move |(ni, n)| (gi, ni, n)))
}
