//! The TransposeOptimizer's QDQ handling (`onnx_transpose_optimization.cc`): looking past a
//! `DequantizeLinear` (`DQToLookPast`, `GetDQWithConstInitializerInputAndSingleConsumer`, the
//! look-past in `EstimateTransposeValueCost`) and `MakeQDQNodeUnit`, which keeps a Transpose
//! added after a DQ inside a QDQ node unit by following it with a `Q -> DQ` pair of the DQ's
//! scale and zero point (nodes `QuantizeLinear`, `DequantizeLinear` from the name generator),
//! and the fix-up pass after it (`FixQDQNodeUnits`).

use super::*;

impl Opt<'_> {
    /// The `DequantizeLinear` (by op type, as ORT matches) producing `value`.
    pub(super) fn dq_producer(&self, value: Sym) -> Option<usize> {
        self.producer(value)
            .filter(|&p| self.node(p).op == Sym::DEQUANTIZE_LINEAR)
    }

    /// `GetQuantizationInfo` succeeded with a supported mode: per-tensor (a scale of shape `[]`
    /// or `[1]`), or per-axis with a valid axis over an input of known rank (not blocked).
    pub(super) fn dq_mode_supported(&self, dq: usize) -> bool {
        let n = self.node(dq);
        let Some(scale) = n.inputs.get(1).and_then(|s| self.shape(*s)) else {
            return false;
        };
        if scale.is_empty() || (scale.len() == 1 && scale[0] == Some(1)) {
            return true;
        }
        if n.attr_i("block_size").unwrap_or(0) != 0 {
            return false;
        }
        let axis = n.attr_i("axis").unwrap_or(1);
        let Some(rank) = n
            .inputs
            .first()
            .and_then(|i| self.shape(*i))
            .map(|s| s.len() as i64)
        else {
            return false;
        };
        (-rank..rank).contains(&axis)
    }

    /// `GetDQWithConstInitializerInputAndSingleConsumer`: the DQ producing `value` when it reads
    /// a constant initializer with a known consumer list, its mode is supported and its output
    /// has one consumer node.
    pub(super) fn const_dq(&self, value: Sym) -> Option<usize> {
        let dq = self.dq_producer(value)?;
        let input = *self.node(dq).inputs.first()?;
        if !self.is_constant(input) || !self.dq_mode_supported(dq) || !self.consumers(input).1 {
            return None;
        }
        let (users, comprehensive) = self.consumers(value);
        (comprehensive && users.len() == 1).then_some(dq)
    }

    /// `DQToLookPast::SetUpdatedInput`: the DQ reads `input` and takes its shape.
    pub(super) fn set_dq_input(&mut self, dq: usize, input: Sym) {
        self.set_input(dq, 0, input);
        let s = self.shape(input);
        if let Some(out) = self.node(dq).outputs.first().cloned() {
            self.set_shape(out, s);
        }
    }

    /// `MakeQDQNodeUnit`: `DQ -> next` (a Transpose just added) becomes
    /// `DQ -> next -> Q -> DQ'`, `DQ'` taking over `next`'s output.
    pub(super) fn make_qdq_node_unit(&mut self, dq: usize) -> bool {
        let Some(out) = self.node(dq).outputs.first().cloned() else {
            return false;
        };
        let (users, comprehensive) = self.consumers(out);
        let [next] = users[..] else { return false };
        if !comprehensive || !self.dq_mode_supported(dq) {
            return false;
        }
        let d = self.node(dq);
        let domain = d.domain;
        let scale = d.inputs.get(1).cloned().unwrap_or_default();
        let zp = d.inputs.get(2).cloned();
        let dq_input = d.inputs.first().cloned().unwrap_or_default();
        let Some(next_out) = self.node(next).outputs.first().cloned() else {
            return false;
        };
        let mut inputs: Vec<Sym> = vec![Sym::EMPTY, scale];
        if let Some(z) = zp {
            inputs.push(z);
        }
        let q = self.add_node_in(domain, "QuantizeLinear", &inputs, 1);
        let q_out = self.node(q).outputs[0];
        self.copy_value_info(dq_input, q_out);
        let s = self.shape(next_out);
        self.set_shape(q_out, s);
        inputs[0] = q_out;
        let new_dq = self.add_node_in(domain, "DequantizeLinear", &inputs, 1);
        let new_dq_out = self.node(new_dq).outputs[0];
        self.copy_value_info(next_out, new_dq_out);
        self.move_output(next, 0, new_dq, 0);
        let moved = self.node(next).outputs[0];
        self.set_input(q, 0, moved);
        self.copy_value_info(next_out, moved);
        true
    }

    /// `FixQDQNodeUnits`, run after the pass when the graph has a DQ: over the nodes in
    /// topological order (those the pass may change: unassigned ones), an empty `DQ -> Q`
    /// left behind is removed (`TryRemoveEmptyDQQ`) and a Transpose next to a DQ or a Q gets
    /// the pair that makes it a QDQ node unit again (`TryFixTransposeMissingQ`/`...MissingDQ`).
    pub(super) fn fix_qdq_node_units(&mut self) -> bool {
        let order =
            crate::session::edit::order_of(self.session, self.gi, crate::session::edit::Order::Dfs);
        let mut changed = false;
        for k in order {
            let n = self.node(k);
            // Nodes of another provider than the one the optimizer runs for (level 1: none).
            if n.removed || (n.ep.is_some() && n.ep != self.provider) {
                continue;
            }
            if n.op == Sym::QUANTIZE_LINEAR {
                changed |= self.try_remove_empty_dqq(k);
            } else if n.op == Sym::TRANSPOSE {
                changed |=
                    self.try_fix_transpose_missing_q(k) || self.try_fix_transpose_missing_dq(k);
            }
        }
        changed
    }

    /// The constant initializer `name` decoded, for comparing scales and zero points.
    fn constant_value(&self, name: Sym) -> Option<Tensor> {
        if !self.is_constant(name) {
            return None;
        }
        self.session
            .initializer(self.gi, name)
            .and_then(|i| Tensor::from_proto(&i.tensor))
    }

    /// `CheckQDQNodePairMatch`: one domain, the DQ's input type is the Q's output type, equal
    /// scales and zero points (an absent zero point equals an all-zero one).
    fn qdq_pair_match(&self, dq: usize, q: usize) -> bool {
        let (d, qn) = (self.node(dq), self.node(q));
        if d.domain != qn.domain {
            return false;
        }
        let ty = |v: Option<&Sym>| v.and_then(|v| self.session.type_of(self.gi, *v)).cloned();
        match (ty(d.inputs.first()), ty(qn.outputs.first())) {
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
        let same = |a: Sym, b: Sym| {
            a == b
                || matches!((self.constant_value(a), self.constant_value(b)),
                    (Some(x), Some(y)) if x.elem == y.elem && x.as_f64() == y.as_f64())
        };
        let (ds, qs) = (
            d.inputs.get(1).cloned().unwrap_or_default(),
            qn.inputs.get(1).cloned().unwrap_or_default(),
        );
        if !same(ds, qs) {
            return false;
        }
        let dz = d.inputs.get(2).cloned().unwrap_or_default();
        let qz = qn.inputs.get(2).cloned().unwrap_or_default();
        if dz == qz {
            return true;
        }
        let zero = |z: Sym| {
            self.constant_value(z)
                .is_some_and(|t| t.as_f64().iter().all(|&v| v == 0.0))
        };
        match (dz.is_empty(), qz.is_empty()) {
            (false, false) => same(dz, qz),
            (true, false) => zero(qz),
            (false, true) => zero(dz),
            (true, true) => true,
        }
    }

    /// `TryRemoveEmptyDQQ` on Q node `q`.
    fn try_remove_empty_dqq(&mut self, q: usize) -> bool {
        let Some(dq) = self
            .node(q)
            .inputs
            .first()
            .and_then(|i| self.dq_producer(*i))
        else {
            return false;
        };
        let dq_out = self.node(dq).outputs[0];
        let (dq_users, dq_comp) = self.consumers(dq_out);
        if !(dq_comp && dq_users.len() == 1 && self.qdq_pair_match(dq, q)) {
            return false;
        }
        let q_out = self.node(q).outputs[0];
        let dq_in = self.node(dq).inputs.first().cloned().unwrap_or_default();
        let (q_users, q_comp) = self.consumers(q_out);
        if q_comp && q_users.len() == 1 {
            let c = q_users[0];
            let slots: Vec<usize> = (0..self.node(c).inputs.len())
                .filter(|&j| self.node(c).inputs[j] == q_out)
                .collect();
            for j in slots {
                self.set_input(c, j, dq_in);
            }
            self.remove_node(dq);
            self.remove_node(q);
            return true;
        }
        if q_users.is_empty() && self.ed.is_output(q_out) {
            let Some(parent) = self.producer(dq_in) else {
                return false;
            };
            let Some(idx) = self.node(parent).outputs.iter().position(|o| *o == dq_in) else {
                return false;
            };
            let (pu, pc) = self.consumers(dq_in);
            if !(pc && pu.len() == 1) {
                return false;
            }
            self.set_input(dq, 0, Sym::EMPTY);
            self.move_output(q, 0, parent, idx);
            self.remove_node(dq);
            self.remove_node(q);
            return true;
        }
        false
    }

    /// `TryFixTransposeMissingQ` on Transpose node `t`.
    fn try_fix_transpose_missing_q(&mut self, t: usize) -> bool {
        let Some(dq) = self
            .node(t)
            .inputs
            .first()
            .and_then(|i| self.dq_producer(*i))
        else {
            return false;
        };
        let out = self.node(t).outputs[0];
        let (users, _) = self.consumers(out);
        if users.len() > 1
            || users
                .first()
                .is_some_and(|&c| self.node(c).op == Sym::QUANTIZE_LINEAR)
        {
            return false;
        }
        self.make_qdq_node_unit(dq)
    }

    /// `TryFixTransposeMissingDQ` on Transpose node `t`.
    fn try_fix_transpose_missing_dq(&mut self, t: usize) -> bool {
        let t_in = self.node(t).inputs.first().cloned().unwrap_or_default();
        let t_out = self.node(t).outputs[0];
        let (users, comprehensive) = self.consumers(t_out);
        let [q] = users[..] else { return false };
        if !comprehensive || self.node(q).op != Sym::QUANTIZE_LINEAR {
            return false;
        }
        let Some(prev) = self.producer(t_in) else {
            return false;
        };
        if self.node(prev).op == Sym::DEQUANTIZE_LINEAR || self.consumers(t_in).0.len() != 1 {
            return false;
        }
        if !self.dq_mode_supported(q) {
            return false;
        }
        let qn = self.node(q);
        let domain = qn.domain;
        let scale = qn.inputs.get(1).cloned().unwrap_or_default();
        let zp = qn.inputs.get(2).cloned();
        let q_out = qn.outputs[0];
        let mut inputs: Vec<Sym> = vec![Sym::EMPTY, scale];
        if let Some(z) = zp {
            inputs.push(z);
        }
        let new_q = self.add_node_in(domain, "QuantizeLinear", &inputs, 1);
        let new_q_out = self.node(new_q).outputs[0];
        self.copy_value_info(q_out, new_q_out);
        let s = self.shape(t_in);
        self.set_shape(new_q_out, s);
        inputs[0] = new_q_out;
        let new_dq = self.add_node_in(domain, "DequantizeLinear", &inputs, 1);
        let new_dq_out = self.node(new_dq).outputs[0];
        self.copy_value_info(t_in, new_dq_out);
        let Some(idx) = self.node(prev).outputs.iter().position(|o| *o == t_in) else {
            return true;
        };
        self.move_output(prev, idx, new_dq, 0);
        let moved = self.node(prev).outputs[idx];
        self.set_input(new_q, 0, moved);
        self.copy_value_info(new_dq_out, moved);
        true
    }
}
