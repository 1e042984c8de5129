//! ORT's `FastGeluFusion` (`core/optimizer/fast_gelu_fusion.cc`).
//!
//! Two formulas, each matched from its first node in topological order:
//! - first: `x·0.044715` → `·x` → `+1` → `·(x·√(2/π))` (the `0.79788·x·(1 + 0.044715·x²)` form of
//!   BLOOM's `gelu_impl`);
//! - second: `Pow(x, 3)` → `·0.044715` → `+x` → `·√(2/π)` (optionally with `x` a `Cast` output
//!   read twice, and a `Cast` before the last `Mul`);
//!
//! then `Tanh` → `+1` → `·(0.5·x)`. Other spellings (`x·x·x`, `(x·(1+tanh))·0.5`, the usual
//! TorchScript export of `gelu(approximate="tanh")`) are not fused. Every node but the last
//! has one output edge; none produces a graph output; `Mul`/`Add` must be at since-version
//! 7, 13 or 14, `Pow` at 7, 12, 13 or 15, `Cast` at 9, 13 or 19, `Tanh` at 6 or 13.

use super::*;

const MUL_ADD: &[i64] = &[7, 13, 14];
const CAST_SINCE_FAST_GELU: &[i64] = &[9, 13, 19];
const SQRT_2_OVER_PI: f64 = 0.797_884_583_473_205_6;

/// One matched head: the nodes to fuse, the Gelu input, the node feeding the `Tanh`, and for
/// the second formula with a `Cast` parent, that Cast's input.
struct Head {
    nodes: Vec<usize>,
    x: Sym,
    tanh_input: usize,
    cast_input: Option<Sym>,
}

impl Fuser {
    /// ORT's `IsSupportedDataType` for FastGelu: float16/float/bfloat16 inputs on CUDA, float
    /// on CPU.
    fn fast_gelu_types_ok(&self, session: &Session, n: &SNode) -> bool {
        let allowed: &[D] = match n.ep {
            Some(Ep::Cpu) => &[D::Float],
            _ => &[D::Float16, D::Float, D::Bfloat16],
        };
        n.existing_inputs().all(|(_, i)| {
            matches!(session.type_of(self.gi, i), Some(Type::Tensor(t))
                if allowed.iter().any(|d| *d as i32 == *t))
        })
    }

    /// The fusion's `CheckNode`: `op` at one of `since`, on `ep`, supported types, one output
    /// edge when `single`, no graph output.
    fn fast_gelu_node(
        &self,
        session: &Session,
        ni: usize,
        op: &str,
        since: &[i64],
        ep: Option<Ep>,
        single: bool,
    ) -> bool {
        let n = &session.graphs[self.gi].nodes[ni];
        !n.removed
            && is_op(n, op, since)
            && n.ep == ep
            && self.fast_gelu_types_ok(session, n)
            && (!single || self.out_edges(session, n) == 1)
            && !self.produces_graph_output(n)
    }

    /// The other input of binary `n` than the first slot reading `v` (`IndexOfNodeInput`).
    pub(super) fn other_input(n: &SNode, v: Sym) -> Option<Sym> {
        let at = n.inputs.iter().position(|i| *i == v)?;
        if n.inputs.len() != 2 {
            return None;
        }
        n.inputs.get((at + 1) % 2).copied()
    }

    /// The start node of a formula: `op` at `since`, on CUDA or CPU, one output edge, supported
    /// types (no graph-output check).
    fn fast_gelu_start(&self, session: &Session, n: &SNode, op: &str, since: &[i64]) -> bool {
        is_op(n, op, since)
            && self.compatible.contains(n.ep)
            && self.out_edges(session, n) == 1
            && self.fast_gelu_types_ok(session, n)
    }

    /// `CheckFirstFormula` from `mul1`.
    fn fast_gelu_first(&self, session: &Session, mul1: usize) -> Option<Head> {
        let g = self.gi;
        let nodes = &session.graphs[g].nodes;
        let m1 = &nodes[mul1];
        if !self.fast_gelu_start(session, m1, "Mul", MUL_ADD) || m1.inputs.len() != 2 {
            return None;
        }
        let k = (0..2).find(|&i| is_const(session, g, m1.inputs[i], 0.044_715))?;
        let x = m1.inputs[(k + 1) % 2];
        let ep = m1.ep;
        let mul2 = self.single_consumer(session, m1)?;
        let m2 = &nodes[mul2];
        if !self.fast_gelu_node(session, mul2, "Mul", MUL_ADD, ep, true)
            || Self::other_input(m2, *m1.outputs.first()?)? != x
        {
            return None;
        }
        let add1 = self.single_consumer(session, m2)?;
        let a1 = &nodes[add1];
        if !self.fast_gelu_node(session, add1, "Add", MUL_ADD, ep, true)
            || !is_const(
                session,
                g,
                Self::other_input(a1, *m2.outputs.first()?)?,
                1.0,
            )
        {
            return None;
        }
        let mul3 = self.single_consumer(session, a1)?;
        if !self.fast_gelu_node(session, mul3, "Mul", MUL_ADD, ep, true) {
            return None;
        }
        let m3 = &nodes[mul3];
        let mul4 = self.producer_of(session, Self::other_input(m3, *a1.outputs.first()?)?)?;
        // ORT checks the op and version of the third Mul again here, not of this node: any op
        // reading `x` and the constant passes.
        let m4 = &nodes[mul4];
        if m4.ep != ep
            || !self.fast_gelu_types_ok(session, m4)
            || self.out_edges(session, m4) != 1
            || self.produces_graph_output(m4)
        {
            return None;
        }
        if m4.inputs.len() != 2 {
            return None;
        }
        let c = (0..2).find(|&i| is_const(session, g, m4.inputs[i], SQRT_2_OVER_PI))?;
        if m4.inputs[(c + 1) % 2] != x {
            return None;
        }
        Some(Head {
            nodes: vec![mul1, mul2, add1, mul3, mul4],
            x,
            tanh_input: mul3,
            cast_input: None,
        })
    }

    /// `CheckSecondFormula` from `pow1`.
    fn fast_gelu_second(&self, session: &Session, pow1: usize) -> Option<Head> {
        let g = self.gi;
        let nodes = &session.graphs[g].nodes;
        let p = &nodes[pow1];
        if !self.fast_gelu_start(session, p, "Pow", &[7, 12, 13, 15])
            || !is_const(session, g, *p.inputs.get(1)?, 3.0)
        {
            return None;
        }
        let x = *p.inputs.first()?;
        let ep = p.ep;
        let mul1 = self.single_consumer(session, p)?;
        let m1 = &nodes[mul1];
        if !self.fast_gelu_node(session, mul1, "Mul", MUL_ADD, ep, true)
            || !is_const(
                session,
                g,
                Self::other_input(m1, *p.outputs.first()?)?,
                0.044_715,
            )
        {
            return None;
        }
        let add1 = self.single_consumer(session, m1)?;
        let a1 = &nodes[add1];
        if !self.fast_gelu_node(session, add1, "Add", MUL_ADD, ep, true)
            || Self::other_input(a1, *m1.outputs.first()?)? != x
        {
            return None;
        }
        // A Cast parent of the Pow must be read by exactly this Pow and this Add.
        let mut cast_input = None;
        if let Some(c) = self.first_parent(session, p, "Cast") {
            let cn = &nodes[c];
            if !self.fast_gelu_node(session, c, "Cast", CAST_SINCE_FAST_GELU, ep, false)
                || self.out_edges(session, cn) != 2
                || self.first_child(session, cn, "Pow") != Some(pow1)
                || self.first_child(session, cn, "Add") != Some(add1)
            {
                return None;
            }
            cast_input = Some(*cn.inputs.first()?);
        }
        let mul2 = self.single_consumer(session, a1)?;
        if !self.fast_gelu_node(session, mul2, "Mul", MUL_ADD, ep, true)
            || !is_const(
                session,
                g,
                Self::other_input(&nodes[mul2], *a1.outputs.first()?)?,
                SQRT_2_OVER_PI,
            )
        {
            return None;
        }
        Some(Head {
            nodes: vec![pow1, mul1, add1, mul2],
            x,
            tanh_input: mul2,
            cast_input,
        })
    }

    /// The fusion: each node in topological order tried as the first node of either formula,
    /// then the common tail; the fused `FastGelu` is named `GPT2Gelu` and takes the start
    /// node's provider.
    pub(super) fn fast_gelu(&mut self, session: &mut Session) {
        let g = self.gi;
        for ni in self.pass_order_of(session, &["Mul", "Pow"]) {
            let n = &session.graphs[g].nodes[ni];
            if n.removed || !(n.op == "Mul" || n.op == "Pow") {
                continue;
            }
            let ep = n.ep;
            let Some(head) = self
                .fast_gelu_first(session, ni)
                .or_else(|| self.fast_gelu_second(session, ni))
            else {
                continue;
            };
            let Some(tail) = self.fast_gelu_tail(session, &head, ep) else {
                continue;
            };
            let mut fused = head.nodes;
            fused.extend(&tail);
            let Some(&last) = tail.last() else {
                continue;
            };
            let ln = &session.graphs[g].nodes[last];
            let mut node = fused_node(ln, "FastGelu");
            node.inputs = vec![head.x];
            node.outputs = ln.outputs.clone();
            // ORT names a new output value first, advancing the shared counter.
            self.arg_name(session, "fast_gelu_output");
            node.name = self.node_name(session, "GPT2Gelu");
            self.fuse(session, &fused, ni, node);
        }
    }

    /// `Tanh` → `+1` → `Mul` by `0.5·x`: the tail's nodes, the output node last.
    fn fast_gelu_tail(&self, session: &Session, head: &Head, ep: Option<Ep>) -> Option<Vec<usize>> {
        let g = self.gi;
        let nodes = &session.graphs[g].nodes;
        let tanh = self.single_consumer(session, &nodes[head.tanh_input])?;
        if !self.fast_gelu_node(session, tanh, "Tanh", &[6, 13], ep, true) {
            return None;
        }
        let t = &nodes[tanh];
        let add2 = self.single_consumer(session, t)?;
        if !self.fast_gelu_node(session, add2, "Add", MUL_ADD, ep, true) {
            return None;
        }
        let a2 = &nodes[add2];
        if !is_const(session, g, Self::other_input(a2, *t.outputs.first()?)?, 1.0) {
            return None;
        }
        let mul5 = self.single_consumer(session, a2)?;
        if !self.fast_gelu_node(session, mul5, "Mul", MUL_ADD, ep, false) {
            return None;
        }
        let m5 = &nodes[mul5];
        let mut out = vec![tanh, add2];
        let mut mul6 = self.producer_of(session, Self::other_input(m5, *a2.outputs.first()?)?)?;
        if head.cast_input.is_some() {
            // The Cast-wrapped variant: `Mul(0.5, x)` → Cast → the last Mul.
            let cast3 = self.first_parent(session, m5, "Cast")?;
            if !self.fast_gelu_node(session, cast3, "Cast", CAST_SINCE_FAST_GELU, ep, true) {
                return None;
            }
            mul6 = self.first_parent(session, &nodes[cast3], "Mul")?;
            out.push(cast3);
        }
        if !self.fast_gelu_node(session, mul6, "Mul", MUL_ADD, ep, false) {
            return None;
        }
        let m6 = &nodes[mul6];
        if m6.inputs.len() != 2 {
            return None;
        }
        let h = (0..2).find(|&i| is_const(session, g, m6.inputs[i], 0.5))?;
        let want = head.cast_input.as_deref().unwrap_or(&head.x);
        if m6.inputs[(h + 1) % 2] != want {
            return None;
        }
        out.extend([mul6, mul5]);
        Some(out)
    }
}
