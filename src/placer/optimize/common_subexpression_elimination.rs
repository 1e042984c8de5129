//! ORT's `CommonSubexpressionElimination` (`core/optimizer/common_subexpression_elimination.cc`).

use super::*;

impl Optimizer<'_> {
    pub(super) fn cse(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
        seen: &mut FxMap<Vec<u8>, usize>,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        // ORT's CSE never merges an ai.onnx DequantizeLinear: each QDQ node unit keeps its own
        // (`EnsureUniqueDQForNodeUnit`; measured on tests/fixtures/realworld/qdq*).
        let dq = node.domain == Sym::AI_ONNX && node.op == Sym::DEQUANTIZE_LINEAR;
        if dq || !node.subgraphs.is_empty() || !is_deterministic(node.domain, node.op) {
            return false;
        }
        // Names by their interned ids (equal ids, equal names), the counts first so that the
        // fixed-width fields cannot run into the attributes. Sized once for the names and a few
        // small attributes: the key is built for every node.
        let mut key = Vec::with_capacity(32 + 4 * node.inputs.len() + 64);
        key.extend_from_slice(&node.domain.id().to_le_bytes());
        key.extend_from_slice(&node.op.id().to_le_bytes());
        key.extend_from_slice(&node.since.unwrap_or(-1).to_le_bytes());
        key.extend_from_slice(&(node.outputs.len() as u64).to_le_bytes());
        key.extend_from_slice(&(node.inputs.len() as u64).to_le_bytes());
        for i in &node.inputs {
            key.extend_from_slice(&i.id().to_le_bytes());
        }
        // Up to 1.24 a tensor attribute whose data is not in `raw_data` (e.g. `float_data`)
        // never compares equal, so its node is never merged (oracle: ConstantOfShape with a
        // `float_data` value merges from 1.25.1 on only).
        if !self.table.release_at_least(1, 25)
            && node.attrs.iter().any(|a| {
                a.t.as_ref()
                    .is_some_and(|t| t.raw_data.as_ref().is_none_or(|r| r.is_empty()))
            })
        {
            return false;
        }
        let mut attrs: Vec<_> = node.attrs.iter().collect();
        attrs.sort_by(|a, b| a.name().cmp(b.name()));
        for a in attrs {
            // Encoded straight into the key (a `Vec` grows: encoding cannot fail).
            if a.encode(&mut key).is_err() {
                return false;
            }
            key.push(2);
        }
        match seen.get(&key) {
            Some(&rep) if rep != ni && !session.graphs[gi].nodes[rep].removed => {
                let outs = node.outputs.clone();
                if outs.iter().any(|o| idx.outputs.contains(o)) {
                    return false;
                }
                let rep_outs = session.graphs[gi].nodes[rep].outputs.clone();
                for (o, r) in outs.iter().zip(&rep_outs) {
                    if o.is_empty() {
                        continue;
                    }
                    if r.is_empty() {
                        return false;
                    }
                }
                for (o, r) in outs.iter().zip(&rep_outs) {
                    if !o.is_empty() {
                        Self::replace_uses(session, gi, idx, *o, *r);
                    }
                }
                Self::remove(session, gi, ni);
                true
            }
            _ => {
                seen.insert(key, ni);
                false
            }
        }
    }
}
