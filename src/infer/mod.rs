//! Since-version resolution and type inference over the session graph, as ORT's `Graph::Resolve`
//! does it at load: every node is bound to the schema its domain's opset selects, and every value
//! gets a type from the schema's type parameters (or, for the ops whose output type comes from an
//! attribute or a subgraph, from those).
//!
//! Knows schemas, never providers.

pub mod eval;
pub mod shape_proof;
pub mod shapes;
pub mod symbolic;

use crate::sym::{SymMap as HashMap, SymSet as HashSet};

pub use crate::session::order::{topological_order, topological_order_by};
pub use crate::session::types::{Type, elem_from_name, is_cuda_preferred_float};

use crate::model::DataType as D;
use crate::session::{SNode, Session};
use crate::sym::Sym;
use std::rc::Rc;

use crate::session::types::TypeSet;
use crate::tables::{FormalParam, KernelTable, OpSchema, ParamOption};

/// Why a node has no schema: ORT fails the session load for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaError {
    /// Domain not imported and unknown to ORT's registry.
    UnknownDomain,
    /// No schema of that name at or below the opset.
    UnknownOp,
    /// The resolved schema is deprecated (`Upsample` at 10+, `Scatter` at 11+, ...).
    Deprecated(i64),
}

/// The domain → opset map ORT builds at load (§2.1): the model's imports, plus every domain the
/// release knows at its highest version; `com.ms.internal.nhwc` follows ai.onnx.
pub fn domain_versions(session: &Session, table: &KernelTable) -> HashMap<Sym, i64> {
    let mut map: HashMap<Sym, i64> = table
        .opsets()
        .iter()
        .map(|(d, v)| (Sym::new(d), *v))
        .collect();
    // Map inserts only: the order of the walk cannot reach the map's contents.
    for (d, v) in &session.opsets {
        map.insert(*d, *v);
    }
    if !session.opsets.contains_key(&Sym::COM_MS_INTERNAL_NHWC)
        && let Some(v) = session.opsets.get(&Sym::AI_ONNX)
    {
        map.insert(Sym::COM_MS_INTERNAL_NHWC, *v);
    }
    map
}

/// The schema a node resolves to.
pub fn resolve_schema<'t>(
    table: &'t KernelTable,
    versions: &HashMap<Sym, i64>,
    domain: Sym,
    op: Sym,
) -> Result<&'t OpSchema, SchemaError> {
    let Some(&v) = versions.get(&domain) else {
        return Err(SchemaError::UnknownDomain);
    };
    match table.schema_of(domain, op, v) {
        None => Err(SchemaError::UnknownOp),
        Some(s) if s.deprecated => Err(SchemaError::Deprecated(s.since)),
        Some(s) => Ok(s),
    }
}

/// For each formal input of `schema`, the positions of the node's actual inputs that fill it.
/// Only the last formal may be variadic; it takes every remaining actual.
pub fn formal_input_positions(schema: &OpSchema, actual: usize) -> Vec<std::ops::Range<usize>> {
    formal_positions(&schema.inputs, actual)
}

pub fn formal_output_positions(schema: &OpSchema, actual: usize) -> Vec<std::ops::Range<usize>> {
    formal_positions(&schema.outputs, actual)
}

fn formal_positions(
    params: &[crate::tables::FormalParam],
    actual: usize,
) -> Vec<std::ops::Range<usize>> {
    (0..params.len())
        .map(|k| formal_range(params, k, actual))
        .collect()
}

/// A schema resolved for one (domain, op) under the session's opsets, with what the per-node
/// passes read of it worked out once: which formals name a type parameter, and each parameter's
/// allowed types as a [`TypeSet`].
#[derive(Debug)]
pub struct Resolved<'t> {
    pub schema: &'t OpSchema,
    /// Per type parameter of `schema.type_constraints`: its allowed types.
    sets: Vec<TypeSet<'t>>,
    /// Per formal input: the index in `sets` of its type parameter.
    in_param: Vec<Option<usize>>,
    /// Per formal input that is not a type parameter but a literal tensor type: that type, as a
    /// one-entry set.
    in_literal: Vec<Option<TypeSet<'t>>>,
    /// Per formal output: the index in `sets` of its type parameter.
    out_param: Vec<Option<usize>>,
    /// Per formal output: the type it gives without binding (a parameter with one allowed type,
    /// or a literal type).
    out_fixed: Vec<Option<Type>>,
    /// Whether the op's output type has its own rule ([`special_output_type`]).
    special: bool,
}

impl<'t> Resolved<'t> {
    fn new(schema: &'t OpSchema, domain: &str, op: &str) -> Resolved<'t> {
        let constraints = &schema.type_constraints;
        let sets: Vec<TypeSet<'t>> = constraints.iter().map(|(_, l)| TypeSet::new(l)).collect();
        let param = |p: &FormalParam| constraints.iter().position(|(n, _)| *n == p.type_str);
        let in_param: Vec<Option<usize>> = schema.inputs.iter().map(param).collect();
        let in_literal = schema
            .inputs
            .iter()
            .zip(&in_param)
            .map(|(p, k)| {
                (k.is_none() && p.type_str.starts_with("tensor("))
                    .then(|| TypeSet::new(std::slice::from_ref(&p.type_str)))
            })
            .collect();
        let out_param: Vec<Option<usize>> = schema.outputs.iter().map(param).collect();
        let out_fixed = schema
            .outputs
            .iter()
            .zip(&out_param)
            .map(|(p, k)| match k {
                Some(k) => match &*constraints[*k].1 {
                    [only] => Type::parse(only),
                    _ => None,
                },
                None => Type::parse(&p.type_str),
            })
            .collect();
        Resolved {
            schema,
            sets,
            in_param,
            in_literal,
            out_param,
            out_fixed,
            special: has_special_output_type(domain, op),
        }
    }
}

/// A node's since-version and output types, as type inference gave them.
type Typed = (i64, Box<[Option<Type>]>);

/// Schema resolution for one session's opsets, each (domain, op) resolved once.
pub struct Resolver<'t> {
    table: &'t KernelTable,
    versions: HashMap<Sym, i64>,
    cache: HashMap<(Sym, Sym), Result<Rc<Resolved<'t>>, SchemaError>>,
    /// [`type_conflict`]'s queries that found no conflict: the op, then per input its type
    /// (see [`input_signature`]). A node whose query is here passes without a check.
    consistent: HashSet<Box<[u32]>>,
    /// Type inference's answers for nodes without subgraphs or a special rule, by
    /// [`type_signature`]: the since-version and the output types.
    typed: HashMap<Box<[u32]>, Typed>,
    /// The query being built (kept to reuse its buffer).
    query: Vec<u32>,
}

impl<'t> Resolver<'t> {
    /// A resolver under the session's opsets ([`domain_versions`]).
    pub fn new(session: &Session, table: &'t KernelTable) -> Resolver<'t> {
        Resolver::with_versions(table, domain_versions(session, table))
    }

    pub fn with_versions(table: &'t KernelTable, versions: HashMap<Sym, i64>) -> Resolver<'t> {
        Resolver {
            table,
            versions,
            cache: HashMap::default(),
            consistent: HashSet::default(),
            typed: HashMap::default(),
            query: Vec::new(),
        }
    }

    /// [`resolve_schema`], with its facts.
    pub fn resolve(&mut self, domain: Sym, op: Sym) -> Result<Rc<Resolved<'t>>, SchemaError> {
        let (table, versions) = (self.table, &self.versions);
        self.cache
            .entry((domain, op))
            .or_insert_with(|| {
                resolve_schema(table, versions, domain, op)
                    .map(|s| Rc::new(Resolved::new(s, domain.as_str(), op.as_str())))
            })
            .clone()
    }
}

/// The positions of the node's `actual` arguments that fill formal `k` of `params` (only the
/// last formal may be variadic; it takes every remaining actual).
fn formal_range(
    params: &[crate::tables::FormalParam],
    k: usize,
    actual: usize,
) -> std::ops::Range<usize> {
    let start = k.min(actual);
    let end = if params[k].option == ParamOption::Variadic && k + 1 == params.len() {
        actual
    } else {
        (k + 1).min(actual)
    };
    start..end.max(start)
}

/// Infers types for every node of every graph, in topological order, and records the since-
/// version of each node. Returns the nodes (graph, node) whose schema could not be resolved.
pub fn infer_session(
    session: &mut Session,
    table: &KernelTable,
) -> Vec<(usize, usize, SchemaError)> {
    if session.graphs.is_empty() {
        return Vec::new();
    }
    let order = topological_order(session, 0);
    infer_session_in(session, table, &order)
}

/// [`infer_session`] with the main graph's Kahn order given (inference changes no edge, so a
/// caller that needs the order again, for shapes, builds it once).
pub fn infer_session_in(
    session: &mut Session,
    table: &KernelTable,
    order: &[usize],
) -> Vec<(usize, usize, SchemaError)> {
    let mut resolver = Resolver::new(session, table);
    let mut failures = Vec::new();
    if !session.graphs.is_empty() {
        infer_graph(session, &mut resolver, 0, Some(order), &mut failures);
    }
    failures
}

fn infer_graph(
    session: &mut Session,
    resolver: &mut Resolver<'_>,
    gi: usize,
    order: Option<&[usize]>,
    failures: &mut Vec<(usize, usize, SchemaError)>,
) {
    let owned;
    let order = match order {
        Some(o) => o,
        None => {
            owned = topological_order(session, gi);
            &owned
        }
    };
    let mut input_types: Vec<Option<Type>> = Vec::new();
    let mut outputs = Outputs::default();
    for &ni in order {
        let node = &session.graphs[gi].nodes[ni];
        // The output types of a node without subgraphs or a special rule follow from its op, its
        // inputs' types and its outputs' declared types: a node like one typed before gets them.
        let mut key = std::mem::take(&mut resolver.query);
        let memo = node.subgraphs.is_empty() && type_signature(session, gi, node, &mut key);
        outputs.types.clear();
        let since;
        if let Some((s, outs)) = memo.then(|| resolver.typed.get(key.as_slice())).flatten() {
            since = Some(*s);
            outputs.types.extend(outs.iter().cloned());
        } else {
            let schema = resolver.resolve(node.domain, node.op);
            input_types.clear();
            input_types.extend(node.inputs.iter().map(|&n| {
                if n.is_empty() {
                    None
                } else {
                    session.type_of(gi, n).cloned()
                }
            }));
            // Subgraph formal inputs that the file left untyped get ORT's types (Loop and Scan).
            if !node.subgraphs.is_empty() {
                let subs: Vec<usize> = node.subgraphs.iter().map(|(_, s)| *s).collect();
                type_subgraph_inputs(session, gi, ni, &input_types);
                for sg in &subs {
                    infer_graph(session, resolver, *sg, None, failures);
                }
            }
            let node = &session.graphs[gi].nodes[ni];
            since = schema.as_ref().ok().map(|s| s.schema.since);
            match &schema {
                Ok(s) => {
                    infer_outputs(session, gi, node, s, &input_types, &mut outputs);
                    if memo && !s.special {
                        resolver.typed.insert(
                            key.as_slice().into(),
                            (s.schema.since, outputs.types.as_slice().into()),
                        );
                    }
                }
                Err(e) => {
                    failures.push((gi, ni, e.clone()));
                    outputs.types.resize(node.outputs.len(), None);
                }
            }
        }
        resolver.query = key;
        let graph = &mut session.graphs[gi];
        graph.nodes[ni].since = since;
        let (nodes, types) = (&graph.nodes, &mut graph.types);
        for (&name, ty) in nodes[ni].outputs.iter().zip(outputs.types.drain(..)) {
            if let (false, Some(ty)) = (name.is_empty(), ty) {
                types.insert(name, ty);
            }
        }
    }
}

fn type_subgraph_inputs(session: &mut Session, gi: usize, ni: usize, input_types: &[Option<Type>]) {
    let node = &session.graphs[gi].nodes[ni];
    let (op, subs) = (node.op, node.subgraphs.clone());
    for (attr, sg) in subs {
        let formal = session.graphs[sg].inputs.clone();
        let mut guess: Vec<Option<Type>> = vec![None; formal.len()];
        match (op.as_str(), attr.as_str()) {
            ("Loop", "body") => {
                if let Some(g) = guess.get_mut(0) {
                    *g = Some(Type::Tensor(D::Int64 as i32));
                }
                if let Some(g) = guess.get_mut(1) {
                    *g = Some(Type::Tensor(D::Bool as i32));
                }
                for (k, t) in input_types.iter().enumerate().skip(2) {
                    if let Some(g) = guess.get_mut(k) {
                        *g = t.clone();
                    }
                }
            }
            ("Scan", "body") => {
                for (k, t) in input_types.iter().enumerate() {
                    if let Some(g) = guess.get_mut(k) {
                        *g = t.clone();
                    }
                }
            }
            _ => {}
        }
        let graph = &mut session.graphs[sg];
        for (&name, t) in formal.iter().zip(guess) {
            if let Some(t) = t {
                graph.types.entry(name).or_insert(t);
            }
        }
    }
}

/// [`infer_outputs`]'s answer, and its scratch space (kept across nodes).
#[derive(Default)]
struct Outputs {
    /// Per output of the node: its type.
    types: Vec<Option<Type>>,
    /// Per type parameter of the schema: the type bound to it.
    bound: Vec<Option<Type>>,
}

/// Output types of one node under its schema, into `out.types`.
fn infer_outputs(
    session: &Session,
    gi: usize,
    node: &SNode,
    resolved: &Resolved<'_>,
    inputs: &[Option<Type>],
    out: &mut Outputs,
) {
    let schema = resolved.schema;
    // The type bound to each type parameter: the first typed argument of its first formal.
    let bound = &mut out.bound;
    bound.clear();
    bound.resize(resolved.sets.len(), None);
    for (k, param) in resolved.in_param.iter().enumerate() {
        let Some(p) = *param else { continue };
        if bound[p].is_some() {
            continue;
        }
        let range = formal_range(&schema.inputs, k, inputs.len());
        if let Some(t) = range.clone().find_map(|i| inputs.get(i).cloned().flatten()) {
            bound[p] = Some(t);
        }
    }
    let declared = |i: usize| {
        node.outputs
            .get(i)
            .and_then(|n| session.graphs[gi].types.get(n))
            .cloned()
    };
    let special = if resolved.special {
        special_output_type(session, node, inputs)
    } else {
        None
    };
    let (bound, out) = (&out.bound, &mut out.types);
    out.resize(node.outputs.len(), None);
    for k in 0..schema.outputs.len() {
        for i in formal_range(&schema.outputs, k, node.outputs.len()) {
            // A type parameter with a single allowed type needs no binding (`Shape`'s T1).
            let generic = match resolved.out_param[k] {
                Some(p) => bound[p].clone(),
                None => None,
            }
            .or_else(|| resolved.out_fixed[k].clone());
            let from_special = special.as_ref().and_then(|s| s.get(i).cloned().flatten());
            out[i] = from_special.or(generic).or_else(|| declared(i));
        }
    }
    for (i, slot) in out.iter_mut().enumerate() {
        if slot.is_none() {
            *slot = declared(i);
        }
    }
}

/// Whether [`special_output_type`] has a rule for the op (it is asked only then).
fn has_special_output_type(domain: &str, op: &str) -> bool {
    matches!(
        (domain, op),
        ("ai.onnx", "Cast")
            | ("ai.onnx", "ConstantOfShape")
            | ("ai.onnx", "EyeLike")
            | ("ai.onnx", "RandomNormalLike")
            | ("ai.onnx", "RandomUniformLike")
            | ("ai.onnx", "Bernoulli")
            | ("ai.onnx", "RandomNormal")
            | ("ai.onnx", "RandomUniform")
            | ("ai.onnx", "Multinomial")
            | ("ai.onnx", "QuantizeLinear")
            | ("com.microsoft", "QuantizeLinear")
            | ("com.microsoft", "QGemm")
            | ("ai.onnx", "SequenceEmpty")
            | ("ai.onnx", "SequenceConstruct")
            | ("ai.onnx", "SplitToSequence")
            | ("ai.onnx", "SequenceAt")
            | ("ai.onnx", "ConcatFromSequence")
            | ("ai.onnx", "Optional")
            | ("ai.onnx", "OptionalGetElement")
            | ("ai.onnx", "If")
            | ("ai.onnx", "Loop")
            | ("ai.onnx", "Scan")
            | ("ai.onnx.ml", "LabelEncoder")
            | ("ai.onnx.ml", "CastMap")
            | ("ai.onnx.ml", "CategoryMapper")
    )
}

/// Ops whose output type is not a function of their input types under the schema. Asked only
/// for the ops [`has_special_output_type`] lists (type inference memoises the others' answers),
/// so a rule added here is listed there too.
fn special_output_type(
    session: &Session,
    node: &SNode,
    inputs: &[Option<Type>],
) -> Option<Vec<Option<Type>>> {
    let dtype = |name: &str, default: Option<i32>| node.attr_i(name).map(|v| v as i32).or(default);
    let first = inputs.first().cloned().flatten();
    let one = |t: Option<Type>| Some(vec![t]);
    match (node.domain.as_str(), node.op.as_str()) {
        ("ai.onnx", "Cast") => one(dtype("to", None).map(Type::Tensor)),
        ("ai.onnx", "ConstantOfShape") => {
            let elem = node
                .attr("value")
                .and_then(|a| a.t.as_ref())
                .map(|t| t.data_type())
                .unwrap_or(D::Float as i32);
            one(Some(Type::Tensor(elem)))
        }
        ("ai.onnx", "EyeLike")
        | ("ai.onnx", "RandomNormalLike")
        | ("ai.onnx", "RandomUniformLike")
        | ("ai.onnx", "Bernoulli") => one(dtype("dtype", None).map(Type::Tensor).or(first)),
        ("ai.onnx", "RandomNormal") | ("ai.onnx", "RandomUniform") => {
            one(Some(Type::Tensor(dtype("dtype", Some(1)).unwrap_or(1))))
        }
        ("ai.onnx", "Multinomial") => one(Some(Type::Tensor(dtype("dtype", Some(6)).unwrap_or(6)))),
        ("ai.onnx", "QuantizeLinear") | ("com.microsoft", "QuantizeLinear") => {
            let out = dtype("output_dtype", None).filter(|&d| d != 0);
            let zp = inputs.get(2).cloned().flatten();
            one(out
                .map(Type::Tensor)
                .or(zp)
                .or(Some(Type::Tensor(D::Uint8 as i32))))
        }
        // QGemm's Y: quantized like `y_zero_point` when the output is quantized, else float
        // (its contrib schema's inference).
        ("com.microsoft", "QGemm") => {
            let y_scale = node.inputs.get(7).is_some_and(|n| !n.is_empty());
            let zp = inputs.get(8).cloned().flatten();
            one(if y_scale {
                zp
            } else {
                Some(Type::Tensor(D::Float as i32))
            })
        }
        ("ai.onnx", "SequenceEmpty") => one(Some(Type::Seq(Box::new(Type::Tensor(
            dtype("dtype", Some(1)).unwrap_or(1),
        ))))),
        ("ai.onnx", "SequenceConstruct") | ("ai.onnx", "SplitToSequence") => {
            one(first.map(|t| Type::Seq(Box::new(t))))
        }
        ("ai.onnx", "SequenceAt") | ("ai.onnx", "ConcatFromSequence") => one(match first {
            Some(Type::Seq(t)) => Some(*t),
            _ => None,
        }),
        ("ai.onnx", "Optional") => {
            let t = node
                .attr("type")
                .and_then(|a| a.tp.as_deref())
                .and_then(Type::from_proto)
                .or(first);
            one(t.map(|t| Type::Optional(Box::new(t))))
        }
        ("ai.onnx", "OptionalGetElement") => one(match first {
            Some(Type::Optional(t)) => Some(*t),
            other => other,
        }),
        ("ai.onnx", "If") => {
            let then = node
                .subgraphs
                .iter()
                .find(|(a, _)| a == "then_branch")
                .map(|(_, g)| *g)?;
            let g = &session.graphs[then];
            Some(
                g.outputs
                    .iter()
                    .map(|&o| session.type_of(then, o).cloned())
                    .collect::<Vec<_>>(),
            )
        }
        ("ai.onnx", "Loop") | ("ai.onnx", "Scan") => {
            let body = node
                .subgraphs
                .iter()
                .find(|(a, _)| a == "body")
                .map(|(_, g)| *g)?;
            let g = &session.graphs[body];
            let skip = usize::from(node.op == Sym::LOOP);
            Some(
                g.outputs
                    .iter()
                    .skip(skip)
                    .map(|&o| session.type_of(body, o).cloned())
                    .collect(),
            )
        }
        ("ai.onnx.ml", "LabelEncoder") => {
            let t = if node.attr("values_strings").is_some() {
                Some(D::String as i32)
            } else if node.attr("values_int64s").is_some() {
                Some(D::Int64 as i32)
            } else if node.attr("values_floats").is_some() {
                Some(D::Float as i32)
            } else {
                node.attr("values_tensor")
                    .and_then(|a| a.t.as_ref())
                    .map(|t| t.data_type())
            };
            one(t.map(Type::Tensor))
        }
        ("ai.onnx.ml", "CastMap") => {
            let to = node.attr_s("cast_to").unwrap_or_else(|| "TO_FLOAT".into());
            let e = match to.as_str() {
                "TO_STRING" => D::String,
                "TO_INT64" => D::Int64,
                _ => D::Float,
            };
            one(Some(Type::Tensor(e as i32)))
        }
        ("ai.onnx.ml", "CategoryMapper") => one(match first.as_ref().and_then(Type::elem) {
            Some(e) if e == D::String as i32 => Some(Type::Tensor(D::Int64 as i32)),
            Some(_) => Some(Type::Tensor(D::String as i32)),
            None => None,
        }),
        _ => None,
    }
}

/// ORT's type check of a node's inputs against its schema (`Graph::InferAndVerifyTypeMatch`,
/// onnxruntime/core/graph/graph.cc), input by input: an input's type must be one of its formal
/// parameter's permitted types (a type parameter's constraint, or the literal type, e.g. Resize's
/// `scales`: `tensor(float)`), then the arguments bound to one type parameter (single and
/// optional parameters, and every argument of a homogeneous variadic one) must share a type.
/// Returns ORT's message for the first failure. Measured with the oracle (1.23.2, 1.24.4, 1.31.1)
/// and the CPU wheels: a float16 `scales` of Resize fails the load with "Type Error: Type
/// 'tensor(float16)' of input parameter (..) of operator (Resize) in node (..) is invalid."
/// (`tests/it/load_type_checks.rs`).
pub fn type_conflict(
    session: &Session,
    resolver: &mut Resolver<'_>,
    gi: usize,
    ni: usize,
) -> Option<String> {
    let node = &session.graphs[gi].nodes[ni];
    if node.inputs.iter().all(|i| i.is_empty()) {
        return None;
    }
    // The check reads only the op and the inputs' types (and which are omitted): a node like
    // one already found consistent is consistent (its schema resolved).
    let mut query = std::mem::take(&mut resolver.query);
    let memo = input_signature(session, gi, node, &mut query);
    if memo && resolver.consistent.contains(query.as_slice()) {
        resolver.query = query;
        return None;
    }
    let found = match resolver.resolve(node.domain, node.op) {
        Ok(resolved) => check_types(session, gi, node, &resolved),
        Err(_) => {
            resolver.query = query;
            return None;
        }
    };
    if memo && found.is_none() {
        resolver.consistent.insert(query.as_slice().into());
    }
    resolver.query = query;
    found
}

/// The op of `node` and the type of each input as numbers, into `query`: 0 for an omitted
/// input, 1 for an untyped one, `2 + e` for a tensor of element type `e`. False when an input
/// has another type (the query does not say it).
fn input_signature(session: &Session, gi: usize, node: &SNode, query: &mut Vec<u32>) -> bool {
    query.clear();
    query.extend([node.domain.id(), node.op.id()]);
    for &name in &node.inputs {
        let code = if name.is_empty() {
            0
        } else {
            match session.type_of(gi, name) {
                None => 1,
                Some(Type::Tensor(e)) if (0..1 << 30).contains(e) => 2 + *e as u32,
                Some(_) => return false,
            }
        };
        query.push(code);
    }
    true
}

/// The op of `node`, its inputs' types (as [`input_signature`] gives them), its outputs'
/// declared types in graph `gi` (1 for none, `2 + e` for a tensor) and its number of inputs,
/// into `query`. False when a type is not a tensor.
fn type_signature(session: &Session, gi: usize, node: &SNode, query: &mut Vec<u32>) -> bool {
    if !input_signature(session, gi, node, query) {
        return false;
    }
    let types = &session.graphs[gi].types;
    for name in &node.outputs {
        let code = match types.get(name) {
            None => 1,
            Some(Type::Tensor(e)) if (0..1 << 30).contains(e) => 2 + *e as u32,
            Some(_) => return false,
        };
        query.push(code);
    }
    // Where the inputs end (the length of the query then says where the outputs do).
    query.push(node.inputs.len() as u32);
    true
}

/// [`type_conflict`]'s check of one node.
fn check_types(
    session: &Session,
    gi: usize,
    node: &SNode,
    resolved: &Resolved<'_>,
) -> Option<String> {
    let schema = resolved.schema;
    let actual = node.inputs.len();
    let mut bound: Vec<(usize, &Type)> = Vec::new();
    for (k, formal) in schema.inputs.iter().enumerate() {
        let range = formal_range(&schema.inputs, k, actual);
        let param = resolved.in_param[k];
        let permitted: Option<&TypeSet<'_>> = match param {
            Some(p) => Some(&resolved.sets[p]),
            None => resolved.in_literal[k].as_ref(),
        };
        // Only tensors are checked against a list that names tensors (the other kinds' spelling
        // in the tables is not compared here).
        let invalid = |ty: &Type| {
            permitted
                .is_some_and(|p| matches!(ty, Type::Tensor(_)) && p.any_tensor() && !p.allows(ty))
        };
        for idx in range.clone() {
            let name = node.inputs[idx];
            if name.is_empty() {
                continue;
            }
            if let Some(ty) = session.type_of(gi, name).filter(|t| invalid(t)) {
                return Some(format!(
                    "Type Error: Type '{ty}' of input parameter ({name}) of operator ({}) in node ({}) is invalid.",
                    node.op, node.name
                ));
            }
        }
        let Some(p) = param else {
            continue;
        };
        let args = if formal.option == ParamOption::Variadic && !formal.homogeneous {
            range.start..range.start.min(range.end)
        } else {
            range
        };
        for idx in args {
            let name = node.inputs[idx];
            if name.is_empty() {
                continue;
            }
            let Some(ty) = session.type_of(gi, name) else {
                continue;
            };
            match bound.iter().find(|(q, _)| *q == p) {
                Some((_, first)) if *first != ty => {
                    return Some(format!(
                        "Type Error: Type parameter ({}) of Optype ({}) bound to different types ({} and {} in node ({}).",
                        formal.type_str, node.op, first, ty, node.name
                    ));
                }
                Some(_) => {}
                None => bound.push((p, ty)),
            }
        }
    }
    None
}
