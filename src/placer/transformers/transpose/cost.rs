//! The TransposeOptimizer's cost model (`CanLikelyRemoveTranspose`, `EstimateValueRank`,
//! `ShouldPushTranspose` in `transpose_optimizer.cc`): whether pushing a Transpose pays.

use super::*;

impl Opt<'_> {
    pub(super) fn can_likely_remove_transpose(&self, t: usize) -> bool {
        let out = &self.node(t).outputs[0];
        let (consumers, comprehensive) = self.consumers(*out);
        comprehensive
            && consumers.iter().all(|&c| {
                let n = self.node(c);
                Handler::of(&n.domain, &n.op).is_some()
            })
    }

    pub(super) fn value_cost(&self, input: Sym, perm: &[i64]) -> i32 {
        if self.is_constant(input) || self.const_dq(input).is_some() {
            return 0;
        }
        // Look past a DQ (and a Squeeze under it when a Transpose is above that) for the
        // Transpose, as `TransposeInput` does.
        let mut producer = self.producer(input);
        if let Some(dq) = self.dq_producer(input)
            && let Some(above) = self.node(dq).inputs.first().and_then(|v| self.producer(*v))
        {
            let a = self.node(above);
            if a.op == "Squeeze" {
                if let Some(t) = a.inputs.first().and_then(|v| self.producer(*v))
                    && self.node(t).op == Sym::TRANSPOSE
                {
                    producer = Some(t);
                }
            } else {
                producer = Some(above);
            }
        }
        if let Some(p) = producer
            && self.is_transpose(p)
            && let Some(perm2) = self.perm_of(p)
        {
            return if perm2 == perm && self.can_likely_remove_transpose(p) {
                -self.estimate_rank(input)
            } else {
                0
            };
        }
        self.estimate_rank(input)
    }

    pub(super) fn push_pays(
        &self,
        node: usize,
        perm: &[i64],
        handler: Handler,
        indices: &[usize],
        leading: &Leading,
    ) -> bool {
        if self.is_transpose(node) {
            return true;
        }
        let n = self.node(node);
        // `OrtEPCostCheck`: for the CPU provider a CPU `MaxPool` is always pushed through
        // (`HandleMaxPool` decides whether it can be).
        if self.provider.is_some()
            && n.ep == self.provider
            && n.op == "MaxPool"
            && n.domain == Sym::AI_ONNX
        {
            return true;
        }
        let mut cost: i32 = indices
            .iter()
            .map(|&j| self.value_cost(n.inputs[j], perm))
            .sum();
        if cost < 0 && handler.transposes_outputs() {
            let mut out_cost = 0;
            let mut leads = false;
            // From 1.31: every output read by one node (and no graph output).
            let single = n.outputs.iter().filter(|o| !o.is_empty()).all(|o| {
                let (readers, comprehensive) = self.consumers(*o);
                comprehensive && readers.len() == 1
            });
            for o in &n.outputs {
                out_cost = out_cost.max(self.estimate_rank(*o));
                leads |= leading.waives(*o, perm, single);
            }
            if !leads {
                cost += out_cost;
            }
        }
        cost < 0
    }

    pub(super) fn transposable_inputs(&self, node: usize, handler: Handler) -> Vec<usize> {
        let n = self.node(node);
        match handler {
            Handler::Simple | Handler::Concat => (0..n.inputs.len()).collect(),
            Handler::Broadcast => (0..n.inputs.len())
                .filter(|&i| self.shape(n.inputs[i]).is_none_or(|s| !s.is_empty()))
                .collect(),
            Handler::QLinearBinary => [0, 3].into_iter().filter(|&i| i < n.inputs.len()).collect(),
            Handler::QLinearConcat => (2..n.inputs.len()).step_by(3).collect(),
            _ => vec![0],
        }
    }
}
