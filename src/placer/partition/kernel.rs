//! Kernel lookup exactly as ORT's `KernelRegistry::TryFindKernel` does it: the version rule
//! (an open-ended registration matches only its own since-version) and the type rule (each
//! constraint checks only the first existing argument bound to it).

use crate::infer::formal_input_positions;
use crate::session::types::{Type, type_allowed};
use crate::session::{SNode, Session};
use crate::sym::SymMap as HashMap;
use crate::tables::{Ep, KernelDef, KernelTable, OpSchema};

/// Why no registration of an EP matched a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// The EP registers nothing for the op.
    NoRegistration,
    /// Registrations exist, none for the node's since-version.
    Version { since: i64 },
    /// A registration matches the version, but not the type bound to `constraint`.
    Type { constraint: String, actual: Type },
    /// The node has no schema (no since-version), so nothing can match.
    NoSchema,
}

/// Looks up the kernel `ep` would use for node `ni` of graph `gi`.
pub fn lookup<'t>(
    table: &'t KernelTable,
    ep: Ep,
    session: &Session,
    gi: usize,
    node: &SNode,
    schema: Option<&OpSchema>,
) -> Result<&'t KernelDef, Miss> {
    let rows = table.kernels_of(ep, node.domain, node.op);
    if rows.is_empty() {
        return Err(Miss::NoRegistration);
    }
    let (Some(since), Some(schema)) = (node.since, schema) else {
        return Err(Miss::NoSchema);
    };
    let mut miss = Miss::Version { since };
    for kd in rows {
        if !kd.matches_since(since) {
            continue;
        }
        match type_mismatch(kd, session, gi, node, schema) {
            None => return Ok(kd),
            Some(m) => miss = m,
        }
    }
    Err(miss)
}

/// Where a constraint name binds in the schema: formal inputs (by type parameter, or by formal
/// name for literal types) then formal outputs.
enum Slot {
    Input(usize),
    Output(usize),
}

fn type_mismatch(
    kd: &KernelDef,
    session: &Session,
    gi: usize,
    node: &SNode,
    schema: &OpSchema,
) -> Option<Miss> {
    let in_pos = formal_input_positions(schema, node.inputs.len());
    for (cname, allowed) in kd.types.iter() {
        let key = |p: &crate::tables::FormalParam| -> bool {
            let key = if schema.allowed(&p.type_str).is_some() {
                &p.type_str
            } else {
                &p.name
            };
            key == cname
        };
        let slots = schema
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, p)| key(p))
            .map(|(k, _)| Slot::Input(k))
            .chain(
                schema
                    .outputs
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| key(p))
                    .map(|(k, _)| Slot::Output(k)),
            );
        let mut arg = None;
        for slot in slots {
            let name = match slot {
                Slot::Input(k) => in_pos
                    .get(k)
                    .filter(|r| !r.is_empty())
                    .and_then(|r| node.inputs.get(r.start)),
                Slot::Output(k) => node.outputs.get(k),
            };
            if let Some(n) = name.filter(|n| !n.is_empty()) {
                arg = Some(n);
                break;
            }
        }
        let Some(arg) = arg else { continue };
        let Some(ty) = session.type_of(gi, *arg) else {
            continue;
        };
        if !type_allowed(ty, allowed) {
            return Some(Miss::Type {
                constraint: cname.clone(),
                actual: ty.clone(),
            });
        }
    }
    None
}

/// [`lookup`] answered once per query: the answer depends only on the provider, the op, the
/// node's since-version and schema, which of its arguments are omitted and the types of the
/// others, so nodes that agree on all of these (the layers of a model) share one lookup.
pub struct Kernels<'t> {
    table: &'t KernelTable,
    memo: HashMap<Box<[u32]>, Result<&'t KernelDef, Miss>>,
    /// Types other than tensors met in queries; a query names one by its index here.
    other: Vec<Type>,
    /// The query being built (kept to reuse its buffer).
    key: Vec<u32>,
}

/// Codes of an argument in a query: omitted, untyped, a tensor (of element `e`: `TENSOR + e`),
/// or another type (`OTHER + index`).
const OMITTED: u32 = 0;
const UNTYPED: u32 = 1;
const TENSOR: u32 = 2;
const OTHER: u32 = 1 << 31;

impl<'t> Kernels<'t> {
    pub fn new(table: &'t KernelTable) -> Kernels<'t> {
        Kernels {
            table,
            memo: HashMap::default(),
            other: Vec::new(),
            key: Vec::new(),
        }
    }

    /// [`lookup`] through the memo.
    #[inline(never)]
    pub fn lookup(
        &mut self,
        ep: Ep,
        session: &Session,
        gi: usize,
        node: &SNode,
        schema: Option<&OpSchema>,
    ) -> Result<&'t KernelDef, Miss> {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let wide = |v: Option<i64>, key: &mut Vec<u32>| {
            let v = v.map_or(u64::MAX, |v| v as u64);
            key.extend([v as u32, (v >> 32) as u32]);
        };
        key.extend([
            ep as u32,
            node.domain.id(),
            node.op.id(),
            node.inputs.len() as u32,
        ]);
        wide(node.since, &mut key);
        wide(schema.map(|s| s.since), &mut key);
        for &name in node.inputs.iter().chain(&node.outputs) {
            let code = if name.is_empty() {
                OMITTED
            } else {
                match session.type_of(gi, name) {
                    None => UNTYPED,
                    Some(Type::Tensor(e)) if (0..(OTHER - TENSOR) as i32).contains(e) => {
                        TENSOR + *e as u32
                    }
                    Some(t) => {
                        let k = match self.other.iter().position(|o| o == t) {
                            Some(k) => k,
                            None => {
                                self.other.push(t.clone());
                                self.other.len() - 1
                            }
                        };
                        OTHER | k as u32
                    }
                }
            };
            key.push(code);
        }
        let found = match self.memo.get(key.as_slice()) {
            Some(r) => r.clone(),
            None => {
                let r = lookup(self.table, ep, session, gi, node, schema);
                self.memo.insert(key.as_slice().into(), r.clone());
                r
            }
        };
        self.key = key;
        found
    }
}
