//! ORT's `SkipLayerNormFusion` (`core/optimizer/skip_layer_norm_fusion.cc`).
//!
//! Measured with the CPU wheels 1.23.2, 1.24.4, 1.31.1 and the oracle
//! (`tests/it/skip_layer_norm_fusion.rs`): a bias Add is absorbed only when its bias is a constant
//! initializer (a graph input, or the `InsertedPrecisionFreeCast_` of an fp16 bias re-fused
//! after `FuseInitializersTransformer`, is not), and only float16, float and bfloat16 nodes
//! fuse.

use super::*;

impl Fuser {
    /// `Add(Add(x, bias), skip)`, `Add(skip, Add(x, bias))` or `Add(x, skip)` feeding
    /// `LayerNormalization` → `SkipLayerNormalization`, named `SkipLayerNormalization`.
    pub(super) fn skip_layer_norm(&mut self, session: &mut Session) {
        let g = self.gi;
        let is_add = |n: &SNode| {
            n.domain == Sym::AI_ONNX && n.op == "Add" && matches!(n.since, Some(7 | 13 | 14))
        };
        for ni in self.pass_order_of(session, &["SkipLayerNormalization", "LayerNormalization"]) {
            let ln = &session.graphs[g].nodes[ni];
            if ln.op == "SkipLayerNormalization" && ln.domain == MS && self.since_1_25 {
                self.skip_layer_norm_bias(session, ni);
                continue;
            }
            if ln.removed
                || !self.compatible.contains(ln.ep)
                || ln.op != "LayerNormalization"
                || !(ln.domain == Sym::AI_ONNX || ln.domain == MS)
                || ln.inputs.len() < 2
                || !self.sln_types_ok(session, ln)
            {
                continue;
            }
            let Some(a1) = self.producer_of(session, ln.inputs[0]) else {
                continue;
            };
            let add1 = &session.graphs[g].nodes[a1];
            // The Add next to the LayerNorm: 3-D inputs, read only by it.
            if !is_add(add1)
                || add1.ep != ln.ep
                || add1.inputs.len() != 2
                || self.out_edges(session, add1) != 1
                || self.produces_graph_output(add1)
                || !self.sln_types_ok(session, add1)
                || !self.same_dims_3d(session, add1.inputs[0], add1.inputs[1])
            {
                continue;
            }
            // A bias Add above it (3-D input, 1-D bias of the last dim).
            let mut bias: Option<(usize, usize)> = None;
            for slot in 0..2 {
                let Some(a2) = self.producer_of(session, add1.inputs[slot]) else {
                    continue;
                };
                let add2 = &session.graphs[g].nodes[a2];
                if !is_add(add2)
                    || add2.ep != ln.ep
                    || add2.inputs.len() != 2
                    || self.out_edges(session, add2) != 1
                    || self.produces_graph_output(add2)
                    || !self.sln_types_ok(session, add2)
                {
                    continue;
                }
                // `CheckSecondAdd`: the bias is a constant initializer; a graph input or a
                // Cast's output (the `InsertedPrecisionFreeCast_` of an fp16 bias) is not.
                if session
                    .initializer(g, add2.inputs[1])
                    .is_none_or(|i| i.overridable)
                {
                    continue;
                }
                let (Some(x), Some(b)) = (
                    session.shape_of(g, add2.inputs[0]),
                    session.shape_of(g, add2.inputs[1]),
                ) else {
                    continue;
                };
                // Both dims known and equal (`HasDimValue`).
                if x.len() == 3 && b.len() == 1 && x[2].is_some() && x[2] == b[0] {
                    bias = Some((slot, a2));
                    break;
                }
            }
            let mut node = fused_node(ln, "SkipLayerNormalization");
            let gamma = ln.inputs[1];
            let beta = ln.inputs.get(2).cloned().unwrap_or_default();
            let mut fused = vec![a1];
            node.inputs = match bias {
                Some((slot, a2)) => {
                    let add2 = &session.graphs[g].nodes[a2];
                    fused.push(a2);
                    vec![
                        add2.inputs[0],
                        add1.inputs[1 - slot],
                        gamma,
                        beta,
                        add2.inputs[1],
                    ]
                }
                None => vec![add1.inputs[0], add1.inputs[1], gamma, beta],
            };
            while node.inputs.last().is_some_and(Sym::is_empty) {
                node.inputs.pop();
            }
            node.outputs = vec![ln.outputs.first().cloned().unwrap_or_default()];
            fused.push(ni);
            node.name = self.node_name(session, "SkipLayerNormalization");
            self.fuse(session, &fused, ni, node);
        }
    }

    /// From ORT 1.25: a `SkipLayerNormalization` without bias whose input or skip comes from
    /// `Add(x, bias)` or `Add(bias, x)` (1-D constant bias of the last dim) takes the bias in;
    /// the new node gets a newly generated `SkipLayerNormalization` name. Up to 1.24 only a
    /// bias in the Add's second input is fused, in the first step. (Measured with the oracle
    /// on 1.24.4–1.31.1: a bias-first Add is absorbed from 1.25.1 on, in a second step, so
    /// every such fused node carries a `_token_` name.)
    pub(super) fn skip_layer_norm_bias(&mut self, session: &mut Session, ni: usize) {
        let g = &session.graphs[self.gi];
        let sln = &g.nodes[ni];
        if sln.removed
            || !self.compatible.contains(sln.ep)
            || !(sln.inputs.len() == 3 || sln.inputs.len() == 4)
        {
            return;
        }
        let mut found: Option<(usize, usize, usize)> = None;
        for slot in 0..2 {
            let Some(a) = self.producer_of(session, sln.inputs[slot]) else {
                continue;
            };
            let an = &g.nodes[a];
            if !is_op(an, "Add", &[7, 13, 14])
                || an.ep != sln.ep
                || an.inputs.len() != 2
                || !self.edges_are(session, an, 1)
                || !self.gelu_types_ok(session, an)
            {
                continue;
            }
            let bias_at = (0..2).find(|&k| {
                let b = &an.inputs[k];
                let x = &an.inputs[1 - k];
                // The biased value comes from a MatMul (not, say, the scale `Mul` of a
                // dynamically quantized MatMul: `tests/fixtures/realworld/qdyn.*` at 1.31.1).
                let from_matmul = self
                    .producer_of(session, *x)
                    .is_some_and(|p| g.nodes[p].op == "MatMul");
                from_matmul
                    && session
                        .initializer(self.gi, *b)
                        .is_some_and(|i| !i.overridable && i.dims.len() == 1)
                    && matches!((session.shape_of(self.gi, *x), session.shape_of(self.gi, *b)),
                        (Some(xs), Some(bs)) if xs.len() == 3 && bs.len() == 1
                            && xs[2].is_some() && xs[2] == bs[0])
            });
            if let Some(k) = bias_at {
                found = Some((slot, a, k));
                break;
            }
        }
        let Some((slot, a, k)) = found else {
            return;
        };
        let an = &g.nodes[a];
        let mut node = fused_node(sln, "SkipLayerNormalization");
        let mut inputs = sln.inputs.clone();
        inputs.resize(4, Sym::EMPTY);
        inputs[slot] = an.inputs[1 - k];
        inputs.push(an.inputs[k]);
        node.inputs = inputs;
        node.attrs = sln.attrs.clone();
        node.name = self.node_name(session, "SkipLayerNormalization");
        self.fuse(session, &[a, ni], ni, node);
    }

    /// ORT's `IsSupportedDataType`: every input float16, float or bfloat16 (a double
    /// LayerNorm is left alone; measured with the CPU wheels of 1.23.2 and 1.31.1).
    fn sln_types_ok(&self, session: &Session, n: &SNode) -> bool {
        n.existing_inputs().all(|(_, i)| {
            matches!(session.type_of(self.gi, i), Some(Type::Tensor(t))
                if [D::Float16, D::Float, D::Bfloat16].iter().any(|d| *d as i32 == *t))
        })
    }

    /// ORT's check on the Add next to the LayerNorm: both inputs 3-D with equal `dim_param`s
    /// (concrete dims have none, so they always compare equal). A dim we know neither
    /// value nor declared symbol of counts as different: ORT's own inference gives such dims
    /// a symbol or none, and which one we cannot tell.
    pub(super) fn same_dims_3d(&self, session: &Session, a: Sym, b: Sym) -> bool {
        let (Some(sa), Some(sb)) = (session.shape_of(self.gi, a), session.shape_of(self.gi, b))
        else {
            return false;
        };
        if sa.len() != 3 || sb.len() != 3 {
            return false;
        }
        (0..3).all(|i| match (sa[i], sb[i]) {
            (Some(_), Some(_)) => true,
            _ => matches!((self.dim_symbol(session, a, i, 0), self.dim_symbol(session, b, i, 0)),
                (Some(x), Some(y)) if x == y),
        })
    }

    /// The symbolic dim (`dim_param`) ORT's shape inference gives dim `i` of `v`
    /// ([`crate::placer::dim_symbols`]).
    pub(super) fn dim_symbol(
        &self,
        session: &Session,
        v: Sym,
        i: usize,
        depth: usize,
    ) -> Option<Sym> {
        let producer = |x: Sym| self.producer_of(session, x);
        let ctx = crate::placer::dim_symbols::Symbols {
            session,
            gi: self.gi,
            params: &self.params,
            producer: &producer,
            memo: &self.symbols,
        };
        ctx.dim(v, i, depth)
    }
}
