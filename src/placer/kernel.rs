//! Kernel lookup exactly as ORT's `KernelRegistry::TryFindKernel` does it: the version rule
//! (an open-ended registration matches only its own since-version) and the type rule (each
//! constraint checks only the first existing argument bound to it).

use crate::infer::{formal_input_positions, formal_output_positions};
use crate::session::types::{Type, type_allowed};
use crate::session::{SNode, Session};
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
    let _ = formal_output_positions(schema, node.outputs.len());
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
