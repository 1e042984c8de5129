//! Whether changing an opset import (`ai.onnx` 24 → 23, say) keeps every node's meaning: for each
//! node whose since-version changes, compare what the node *uses* between the two schema
//! versions — the inputs and outputs it has, the attributes it sets, the types bound to them —
//! rather than whole schemas. `Attention`-24 added a seventh input; a node that passes six of
//! them means the same under `Attention`-23.
//!
//! The comparison runs over the model as written (every graph, subgraphs included) and over each
//! model-local function under its own opset import, with value types from ONNX type inference over
//! the unoptimised model (and, for a function, over its body typed from its first call site).
//!
//! **Limits.** The tables record schemas' formal inputs, outputs, type constraints and attribute
//! names, not attribute defaults or prose semantics: a version that changed what an unchanged
//! signature computes would go unnoticed. ONNX's own versioning adds a new since-version for
//! every such change, so the comparison is exact for the common case (types and optional
//! inputs/attributes added) and says so when it cannot prove a type.

use crate::diagnostics::Fix;
use crate::infer::{self, Type, formal_input_positions, formal_output_positions};
use crate::model::proto::{GraphProto, ModelProto, ValueInfoProto};
use crate::model::{Model, normalize_domain};
use crate::session::{SNode, Session};
use crate::sym::Sym;
use crate::tables::attributes::SchemaAttributes;
use crate::tables::{FormalParam, KernelTable, OpSchema, ParamOption, attributes_of};

/// The outcome of comparing one scope (the model, or one function) between two opsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every node keeps what it uses: the change is safe.
    Safe,
    /// Nothing is known to break, but something could not be proved (a type inference could not
    /// bind); the reason names the node.
    Unproven(String),
    /// A node uses something the other version does not have (or has differently).
    Breaks(String),
}

impl Verdict {
    fn worse(self, other: Verdict) -> Verdict {
        match (&self, &other) {
            (Verdict::Breaks(_), _) => self,
            (_, Verdict::Breaks(_)) => other,
            (Verdict::Unproven(_), _) => self,
            _ => other,
        }
    }

    pub fn is_safe(&self) -> bool {
        matches!(self, Verdict::Safe)
    }

    /// The reason, when not safe.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Verdict::Safe => None,
            Verdict::Unproven(r) | Verdict::Breaks(r) => Some(r),
        }
    }
}

/// What changing the import of one domain does to the model and to each of its local functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lowering {
    pub domain: String,
    pub to: i64,
    /// The model's graphs (only meaningful when the model imports the domain).
    pub model: Verdict,
    /// Each local function (index in `ModelProto.functions`) that imports the domain: its current
    /// version and the verdict of moving it to `to`.
    pub functions: Vec<(usize, i64, Verdict)>,
}

impl Lowering {
    /// Whether the model's import and every function's import can move to `to` together.
    pub fn all_safe(&self) -> bool {
        self.model.is_safe() && self.functions.iter().all(|(_, _, v)| v.is_safe())
    }
}

/// The unoptimised model's types, with the placed session's (which has local functions inlined
/// and typed) for values the first does not know. Graph `i` of both is graph `i` of the model.
#[derive(Clone, Copy)]
pub struct Types<'a> {
    pub typed: &'a Session,
    pub placed: Option<&'a Session>,
}

impl Types<'_> {
    pub fn get(&self, gi: usize, name: Sym) -> Option<Type> {
        self.typed
            .type_of(gi, name)
            .or_else(|| self.placed.and_then(|p| p.type_of(gi, name)))
            .cloned()
    }
}

/// The model as written, with types inferred (no optimisation, no inlining).
pub fn typed_session(model: &Model, table: &KernelTable) -> Session {
    let mut session = Session::from_model(model);
    infer::infer_session(&mut session, table);
    session
}

/// Compares the model (all graphs) and each local function between their current import of
/// `domain` and `to`. `placed` (the placer's session) supplies types ONNX inference cannot see.
pub fn analyse(
    model: &Model,
    table: &KernelTable,
    placed: Option<&Session>,
    domain: &str,
    to: i64,
) -> Lowering {
    let domain = normalize_domain(domain).to_string();
    let attrs = attributes_of(&table.release().ort);
    let session = typed_session(model, table);
    let types = Types {
        typed: &session,
        placed,
    };
    let model_verdict = match model.opset(&domain) {
        Some(from) => compare_session(&session, types, table, attrs, &domain, from, to),
        None => Verdict::Safe,
    };
    let functions = (0..model.proto.functions.len())
        .filter_map(|fi| {
            let from = function_import(&model.proto, fi, &domain)?;
            Some((fi, from, function(model, types, table, fi, &domain, to)))
        })
        .collect();
    Lowering {
        domain,
        to,
        model: model_verdict,
        functions,
    }
}

/// The verdict on an opset edit, whoever proposed it (the fixer checks every one again before
/// applying it): the model's and, with `functions`, the functions' for `SetOpsetImport`; the
/// function's for `SetFunctionOpsetImport`; other fixes are not opset edits (`Safe`).
pub fn verdict_of(
    model: &Model,
    table: &KernelTable,
    placed: Option<&Session>,
    fix: &Fix,
) -> Verdict {
    match fix {
        Fix::SetOpsetImport {
            domain,
            to,
            functions,
            ..
        } => {
            let l = analyse(model, table, placed, domain, *to);
            let function_verdict = l
                .functions
                .iter()
                .map(|(_, _, v)| v.clone())
                .find(|v| !v.is_safe())
                .filter(|_| *functions);
            match function_verdict {
                Some(v) if l.model.is_safe() => v,
                _ => l.model,
            }
        }
        Fix::SetFunctionOpsetImport {
            function_domain,
            function: name,
            domain,
            to,
            ..
        } => {
            let found = model.proto.functions.iter().position(|f| {
                normalize_domain(f.domain()) == normalize_domain(function_domain)
                    && f.name() == name
            });
            let Some(fi) = found else {
                return Verdict::Breaks(format!("the model has no local function `{name}`"));
            };
            let typed = typed_session(model, table);
            let types = Types {
                typed: &typed,
                placed,
            };
            function(model, types, table, fi, normalize_domain(domain), *to)
        }
        Fix::ReplaceInputWithConstant { .. }
        | Fix::CollapseReshape { .. }
        | Fix::UnflattenGemm { .. } => Verdict::Safe,
    }
}

/// The version function `fi` imports for `domain` (normalised), if it imports it.
pub fn function_import(model: &ModelProto, fi: usize, domain: &str) -> Option<i64> {
    model
        .functions
        .get(fi)?
        .opset_import
        .iter()
        .find(|o| normalize_domain(o.domain()) == domain)
        .map(|o| o.version())
}

/// Compares the nodes of local function `fi` between its import of `domain` and `to`.
pub fn function(
    model: &Model,
    types: Types,
    table: &KernelTable,
    fi: usize,
    domain: &str,
    to: i64,
) -> Verdict {
    let attrs = attributes_of(&table.release().ort);
    let Some(f) = model.proto.functions.get(fi) else {
        return Verdict::Safe;
    };
    let Some(from) = function_import(&model.proto, fi, domain) else {
        return Verdict::Safe;
    };
    // The body as a graph whose inputs carry the types of the first call site.
    let call = types.typed.graphs.iter().enumerate().find_map(|(gi, g)| {
        g.nodes
            .iter()
            .find(|n| n.op == f.name() && n.domain == normalize_domain(f.domain()))
            .map(|n| (gi, n))
    });
    let input = f
        .input
        .iter()
        .enumerate()
        .map(|(i, name)| ValueInfoProto {
            name: Some(name.clone()),
            r#type: call
                .and_then(|(gi, n)| n.inputs.get(i).and_then(|v| types.get(gi, *v)))
                .map(|t| t.to_proto()),
            ..Default::default()
        })
        .collect();
    let proto = ModelProto {
        ir_version: model.proto.ir_version,
        opset_import: f.opset_import.clone(),
        graph: Some(GraphProto {
            name: Some(f.name().to_string()),
            node: f.node.clone(),
            input,
            output: f
                .output
                .iter()
                .map(|name| ValueInfoProto {
                    name: Some(name.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let Ok(body) = Model::from_proto(&model.path, 0, proto) else {
        return Verdict::Unproven(format!(
            "the body of function `{}` could not be indexed",
            f.name()
        ));
    };
    let session = typed_session(&body, table);
    let body_types = Types {
        typed: &session,
        placed: None,
    };
    match compare_session(&session, body_types, table, attrs, domain, from, to) {
        Verdict::Safe => Verdict::Safe,
        Verdict::Unproven(r) => Verdict::Unproven(format!("in function `{}`: {r}", f.name())),
        Verdict::Breaks(r) => Verdict::Breaks(format!("in function `{}`: {r}", f.name())),
    }
}

/// Compares every node of every graph of a typed, unoptimised session.
fn compare_session(
    s: &Session,
    types: Types,
    table: &KernelTable,
    attrs: Option<&SchemaAttributes>,
    domain: &str,
    from: i64,
    to: i64,
) -> Verdict {
    let mut verdict = Verdict::Safe;
    // Every node: `Constant` nodes are kept as removed placeholders by `Session::from_model`.
    for (gi, g) in s.graphs.iter().enumerate() {
        for node in g.nodes.iter().filter(|n| n.domain == domain) {
            let types = |name: Sym| types.get(gi, name);
            verdict = verdict.worse(compare_node(table, attrs, node, &types, from, to));
            if matches!(verdict, Verdict::Breaks(_)) {
                return verdict;
            }
        }
    }
    verdict
}

/// What `node` uses, compared between the schema it resolves to at `from` and at `to`.
fn compare_node(
    table: &KernelTable,
    attrs: Option<&SchemaAttributes>,
    node: &SNode,
    types: &dyn Fn(Sym) -> Option<Type>,
    from: i64,
    to: i64,
) -> Verdict {
    let who = if node.name.is_empty() {
        format!("a {} node", node.op)
    } else {
        format!("`{}` ({})", node.name, node.op)
    };
    // An op unknown at the current opset fails to load either way: not this analysis's business.
    let Some(now) = table.schema(&node.domain, &node.op, from) else {
        return Verdict::Safe;
    };
    let Some(other) = table.schema(&node.domain, &node.op, to) else {
        return Verdict::Breaks(format!("{who} does not exist at opset {to}"));
    };
    if other.since == now.since {
        return Verdict::Safe;
    }
    let op = &node.op;
    if other.deprecated {
        return Verdict::Breaks(format!("{who}: {op}-{} is deprecated", other.since));
    }
    let mut verdict = Verdict::Safe;
    for (kind, actual, (a, b)) in [
        ("input", &node.inputs, (&now.inputs, &other.inputs)),
        ("output", &node.outputs, (&now.outputs, &other.outputs)),
    ] {
        let (pos_now, pos_other) = if kind == "input" {
            (
                formal_input_positions(now, actual.len()),
                formal_input_positions(other, actual.len()),
            )
        } else {
            (
                formal_output_positions(now, actual.len()),
                formal_output_positions(other, actual.len()),
            )
        };
        let formal_at =
            |pos: &[std::ops::Range<usize>], i: usize| pos.iter().position(|r| r.contains(&i));
        for (i, name) in actual.iter().enumerate() {
            let fo = formal_at(&pos_other, i).and_then(|k| b.get(k));
            if name.is_empty() {
                if let Some(p) = fo
                    && p.option == ParamOption::Single
                {
                    return Verdict::Breaks(format!(
                        "{who}: {op}-{} requires {kind} {i} (`{}`), which the node omits",
                        other.since, p.name
                    ));
                }
                continue;
            }
            let Some(p_other) = fo else {
                return Verdict::Breaks(format!(
                    "{who} uses {kind} {i}, which {op}-{} does not have",
                    other.since
                ));
            };
            let p_now = formal_at(&pos_now, i).and_then(|k| a.get(k));
            if let Some(p_now) = p_now
                && p_now.name != p_other.name
            {
                return Verdict::Breaks(format!(
                    "{who}: {kind} {i} is `{}` in {op}-{} but `{}` in {op}-{}",
                    p_now.name, now.since, p_other.name, other.since
                ));
            }
            verdict = verdict.worse(compare_type(
                &who, now, other, p_now, p_other, *name, types, kind, i,
            ));
            if matches!(verdict, Verdict::Breaks(_)) {
                return verdict;
            }
        }
        // Formals the other version requires past the node's last argument.
        let missing = b
            .iter()
            .enumerate()
            .skip(actual.len())
            .find(|(_, p)| p.option == ParamOption::Single);
        if let Some((k, p)) = missing {
            return Verdict::Breaks(format!(
                "{who}: {op}-{} requires {kind} {k} (`{}`), which the node does not pass",
                other.since, p.name
            ));
        }
    }
    verdict.worse(compare_attributes(&who, attrs, node, other))
}

/// The type bound to one argument, checked against the other version's constraint.
#[allow(clippy::too_many_arguments)]
fn compare_type(
    who: &str,
    now: &OpSchema,
    other: &OpSchema,
    p_now: Option<&FormalParam>,
    p_other: &FormalParam,
    value: Sym,
    types: &dyn Fn(Sym) -> Option<Type>,
    kind: &str,
    i: usize,
) -> Verdict {
    let allowed_other: Vec<String> = match other.allowed(&p_other.type_str) {
        Some(list) => list.to_vec(),
        None => vec![p_other.type_str.clone()],
    };
    match types(value) {
        // Maps are spelled differently by the tables; ORT accepts them where declared.
        Some(Type::Map(..)) => Verdict::Safe,
        Some(t) if allowed_other.contains(&t.to_string()) => Verdict::Safe,
        Some(t) => Verdict::Breaks(format!(
            "{who}: {}-{} does not accept {} = {t} ({kind} {i})",
            other.name, other.since, p_other.type_str
        )),
        None => {
            // Unknown type: safe only if the other version allows everything this one does.
            let allowed_now: Vec<String> = match p_now {
                Some(p) => match now.allowed(&p.type_str) {
                    Some(list) => list.to_vec(),
                    None => vec![p.type_str.clone()],
                },
                None => Vec::new(),
            };
            if !allowed_now.is_empty() && allowed_now.iter().all(|t| allowed_other.contains(t)) {
                Verdict::Safe
            } else {
                Verdict::Unproven(format!(
                    "{who}: the type of `{value}` ({kind} {i}) is unknown and {}-{} accepts fewer types than {}-{}",
                    other.name, other.since, now.name, now.since
                ))
            }
        }
    }
}

/// The attributes the node sets must exist in the other version; the ones it requires must be set.
fn compare_attributes(
    who: &str,
    attrs: Option<&SchemaAttributes>,
    node: &SNode,
    other: &OpSchema,
) -> Verdict {
    let Some(declared) = attrs.and_then(|a| a.get(&other.domain, &other.name, other.since)) else {
        return Verdict::Unproven(format!(
            "{who}: the attributes of {}-{} are not in the tables",
            other.name, other.since
        ));
    };
    let set: Vec<&str> = node
        .attrs
        .iter()
        .map(|a| a.name())
        .chain(node.subgraphs.iter().map(|(n, _)| n.as_str()))
        .filter(|n| !n.starts_with("__"))
        .collect();
    if let Some(a) = set.iter().find(|a| !declared.iter().any(|(d, _)| d == *a)) {
        return Verdict::Breaks(format!(
            "{who} sets attribute `{a}`, which {}-{} does not have",
            other.name, other.since
        ));
    }
    if let Some((d, _)) = declared
        .iter()
        .find(|(d, req)| *req && !set.contains(&d.as_str()))
    {
        return Verdict::Breaks(format!(
            "{who}: {}-{} requires attribute `{d}`, which the node does not set",
            other.name, other.since
        ));
    }
    Verdict::Safe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worse_keeps_the_worst() {
        let b = Verdict::Breaks("b".into());
        let u = Verdict::Unproven("u".into());
        assert_eq!(Verdict::Safe.worse(u.clone()), u);
        assert_eq!(u.clone().worse(b.clone()), b);
        assert_eq!(b.clone().worse(Verdict::Safe), b);
        assert_eq!(u.clone().worse(Verdict::Safe), u);
    }
}
