//! ORT's `ReshapeFusion` (`core/optimizer/reshape_fusion.cc`), with `FuseContiguousReshapes`.

use super::*;

impl Optimizer<'_> {
    /// `Reshape(x, Concat(parts))` where every part is a constant or the gathered dim of
    /// `Shape(x)` at its own position: the shape becomes a constant initializer.
    pub(super) fn reshape_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        // The same since-versions as `FuseContiguousReshapes`: a Reshape-19/21 (opset 19+) is
        // fused only from 1.25 on (oracle probes: bert at opset 20 keeps its shape chain on
        // 1.24.4, loses it on 1.31.1).
        if node.op != Sym::RESHAPE
            || node.domain != Sym::AI_ONNX
            || node.inputs.len() < 2
            || !Self::reshape_like(self.table, "Reshape", node.since)
        {
            return false;
        }
        let data = node.inputs[0];
        let shape_in = node.inputs[1];
        let Some(concat) = idx.producer(session, shape_in) else {
            return false;
        };
        let cn = &session.graphs[gi].nodes[concat];
        if cn.op != "Concat" || cn.domain != Sym::AI_ONNX || idx.is_output(shape_in) {
            return false;
        }
        if idx.sole_user(session, shape_in).is_none() {
            return false;
        }
        let parts = cn.inputs.clone();
        let mut value: Vec<i64> = Vec::new();
        for p in &parts {
            if let Some(v) = self.constant(session, gi, *p) {
                if v.dims.len() > 1 {
                    return false;
                }
                value.extend(v.as_i64());
                continue;
            }
            // Unsqueeze(Gather(Shape(data), i)) at position i, or a known dim.
            let Some(u) = idx.producer(session, *p) else {
                return false;
            };
            let un = &session.graphs[gi].nodes[u];
            let pos = value.len() as i64;
            let ok = (|| -> Option<bool> {
                if un.op != "Unsqueeze" || !Self::reshape_like(self.table, "Unsqueeze", un.since) {
                    return Some(false);
                }
                let g = idx.producer(session, *un.inputs.first()?)?;
                let gn = &session.graphs[gi].nodes[g];
                if gn.op != "Gather" || gn.attr_i("axis").unwrap_or(0) != 0 {
                    return Some(false);
                }
                let i = self.values.get(session, gi, *gn.inputs.get(1)?)?.as_i64();
                if i.len() != 1 {
                    return Some(false);
                }
                let s = idx.producer(session, *gn.inputs.first()?)?;
                let sn = &session.graphs[gi].nodes[s];
                if sn.op != Sym::SHAPE || sn.attr_i("start").unwrap_or(0) != 0 {
                    return Some(false);
                }
                let root = sn.inputs.first()?;
                let rank = session.shape_of(gi, *root).map(|s| s.len() as i64);
                let index = if i[0] < 0 { i[0] + rank? } else { i[0] };
                // The Shape may read another value than the Reshape: then the two values'
                // inferred shapes decide (`same_dims`).
                let same =
                    root == &data || same_dims(self.table, session, gi, idx, *root, data, index);
                Some(same && index == pos)
            })()
            .unwrap_or(false);
            if ok {
                value.push(0);
                continue;
            }
            // `Is_One_Element_Input`: a part whose inferred shape holds exactly one element
            // stands for a -1 (CPU wheels 1.23.2, 1.24.4, 1.31.1: a torch detector's
            // `Reshape(grid, Concat(Shape(grid), [1]))`), an unmatched
            // `Unsqueeze(Gather(Shape))` too: `qop.llama.op17`'s `Reshape_o`, whose first part
            // reads a dim ORT's inference lost (`[?, unk__20, ?, unk__45]` against the DQ's
            // declared `[unk__50, unk__20, ..]`), becomes `[-1, 0, 16]`; its second layer's
            // q/k/v Reshapes, both parts lost, are kept (two -1s).
            let one = session
                .shape_of(gi, *p)
                .is_some_and(|s| s.iter().all(|d| *d == Some(1)));
            if !one {
                return false;
            }
            value.push(-1);
        }
        if value.iter().filter(|&&v| v == -1).count() > 1 {
            return false;
        }
        self.add_initializer(session, gi, shape_in, Some(Tensor::i64_1d(value)));
        // The Concat goes first, so that the Shape/Gather/Unsqueeze chains it alone read are
        // seen dead and removed with it, as ORT removes the matched subgraph.
        idx.remove(session, concat);
        Self::remove_dead_inputs(session, gi, concat, idx);
        true
    }

    /// `ReshapeFusion::FuseContiguousReshapes` (`core/optimizer/reshape_fusion.cc`): from a
    /// `Reshape`, follow single-edge, non-graph-output links through `Reshape`/`Squeeze`/
    /// `Unsqueeze` (the since-versions of [`Self::reshape_like`]); cut the chain after its last node
    /// with a fully known output shape; two or more nodes become one `Reshape` named
    /// `GenerateNodeName(<first>_new_reshape)` with the shape initializer
    /// `GenerateNodeArgName(<first>_new_shape)`.
    pub(super) fn fuse_contiguous_reshapes(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
        names: &mut Option<NameGen>,
    ) -> bool {
        let first = &session.graphs[gi].nodes[ni];
        if first.removed
            || first.op != Sym::RESHAPE
            || first.domain != Sym::AI_ONNX
            || !Self::reshape_like(self.table, "Reshape", first.since)
        {
            return false;
        }
        let mut chain = vec![ni];
        loop {
            let cur = &session.graphs[gi].nodes[chain[chain.len() - 1]];
            let Some(out) = cur.outputs.first().filter(|o| !o.is_empty()) else {
                break;
            };
            if idx.is_output(*out) || cur.outputs.len() != 1 {
                break;
            }
            let users = idx.users(session, *out);
            let [next] = users[..] else {
                break;
            };
            let nn = &session.graphs[gi].nodes[next];
            let edges = nn.inputs.iter().filter(|i| *i == out).count()
                + nn.implicit_inputs.iter().filter(|i| *i == out).count();
            let ok = edges == 1
                && nn.domain == Sym::AI_ONNX
                && Self::reshape_like(self.table, &nn.op, nn.since);
            if !ok || chain.contains(&next) {
                break;
            }
            chain.push(next);
        }
        let mut shape: Option<Vec<i64>> = None;
        while let Some(&last) = chain.last() {
            let out = session.graphs[gi].nodes[last].outputs.first().cloned();
            if let Some(s) = out
                .and_then(|o| session.shape_of(gi, o).cloned())
                .and_then(|s| s.into_iter().collect::<Option<Vec<i64>>>())
            {
                shape = Some(s);
                break;
            }
            chain.pop();
        }
        let Some(shape) = shape.filter(|_| chain.len() >= 2) else {
            return false;
        };
        let first = &session.graphs[gi].nodes[ni];
        let base = first.name;
        let data = first.inputs.first().cloned().unwrap_or_default();
        let since = first.since;
        let last = chain[chain.len() - 1];
        let out = session.graphs[gi].nodes[last].outputs[0];
        let names = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        let shape_name = names.value(&format!("{base}_new_shape"));
        let name = names.node(&format!("{base}_new_reshape"));
        session.graphs[gi].generated_names.insert(name);
        self.add_initializer(session, gi, shape_name, Some(Tensor::i64_1d(shape)));
        let origin = session.graphs[gi].nodes[ni].origin;
        for &k in &chain {
            idx.remove(session, k);
        }
        let node = SNode {
            name,
            op: Sym::RESHAPE,
            domain: Sym::AI_ONNX,
            since,
            inputs: vec![data, shape_name],
            outputs: vec![out],
            attrs: thin_vec::ThinVec::new(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: None,
            kernel: None,
            origin,
            removed: false,
        };
        self.append_nodes(session, gi, idx, vec![node]);
        true
    }
}

/// `Match_Shape` when the Shape reads another value than the Reshape: up to 1.28 the two
/// values' whole shapes must be the same known values (`CompareShape`), from 1.29 on only
/// dim `index` must agree (oracle:
/// 1.29.0, 1.30.0 and 1.31.x fuse CodeGen's and GPT-NeoX's first `Reshape` of the fused QKV
/// projection, whose Shape reads the LayerNorm output `[batch, sequence, 64]` against
/// `[batch, sequence, 192]`; 1.23.2 to 1.28.0 do not). From 1.29 a dim agrees when both are
/// the same known value or both carry the same `dim_param`; an unknown dim agrees with nothing.
fn same_dims(
    table: &KernelTable,
    session: &Session,
    gi: usize,
    idx: &Editor,
    a: Sym,
    b: Sym,
    index: i64,
) -> bool {
    // From 1.29 each side is looked at through a `DequantizeLinear` (ai.onnx or com.microsoft)
    // producing it: a QOperator model's Shape reads the DQ of the tensor the Reshape reads, a
    // QDQ model's Reshape a DQ copy (`EnsureUniqueDQForNodeUnit`). The DQ's own declared dims do
    // not count, the dims of the tensor it reads do, and an unknown one there agrees with
    // nothing: CPU wheel 1.31.1 fuses `tests/fixtures/reshape_dims/dq_declared` (the DQ output
    // declared `[ua, ub, 16]`, its input inferred `[batch, seq, 16]`) and keeps
    // `qop.llama.op17`'s second-layer q/k/v Reshapes (the QLinearMatMul output they read
    // inferred `[?, ?, 16]`, its DQ declared `[unk__55, unk__56, 16]`).
    let through = |v: Sym| -> Sym {
        if !table.release_at_least(1, 29) {
            return v;
        }
        idx.producer(session, v)
            .and_then(|p| session.graphs.get(gi)?.nodes.get(p))
            .filter(|n| {
                n.op == Sym::DEQUANTIZE_LINEAR
                    && (n.domain == Sym::AI_ONNX || n.domain == Sym::COM_MICROSOFT)
            })
            .and_then(|n| n.inputs.first())
            .map_or(v, |x| *x)
    };
    let (a, b) = (through(a), through(b));
    let (Some(sa), Some(sb)) = (session.shape_of(gi, a), session.shape_of(gi, b)) else {
        return false;
    };
    let empty = Default::default();
    let params = if gi == 0 {
        &session.graphs[0].dim_params
    } else {
        &empty
    };
    let producer = |v: Sym| idx.producer(session, v);
    let memo = Default::default();
    let symbols = crate::placer::transformers::dim_symbols::Symbols {
        session,
        gi,
        params,
        producer: &producer,
        memo: &memo,
    };
    let dim_agrees = |i: usize| match (sa.get(i), sb.get(i)) {
        (Some(Some(x)), Some(Some(y))) => x == y,
        (Some(None), Some(None)) => {
            matches!((symbols.dim(a, i, 0), symbols.dim(b, i, 0)), (Some(x), Some(y)) if x == y)
        }
        _ => false,
    };
    if table.release_at_least(1, 29) {
        // Dim `index` alone, whatever the ranks: CPU wheel 1.31.1 fuses the `[0, 0, -1]` of
        // `Reshape(b, Concat(Unsqueeze(Gather(Shape(a), 0)), Unsqueeze(Gather(Shape(a), 1)),
        // [-1]))` with `a` `[batch, seq, 8]` and `b` `[batch, seq, 4, 2]`
        // (tools/realworld/shape_probes.py, `reshape_ranks`; onnxsim's value_info on
        // unseen3/sim.tv.fasterrcnn's box head gives the same). A GQA `repeat_kv` Reshape is
        // kept because its Expand's dims are unknown to ORT (`dim_symbols.rs`).
        usize::try_from(index).is_ok_and(dim_agrees)
    } else {
        // Known values only: 1.24.4 and 1.28.0 keep `tests/fixtures/fix/shape_chain`'s chain,
        // whose two shapes are the same `[batch, seq, 32]`.
        sa.len() == sb.len() && sa.iter().zip(sb).all(|(x, y)| x.is_some() && x == y)
    }
}

/// `ReshapeFusion` as its registry entry runs it: node by node, in the optimiser's walk.
pub(crate) const LEVEL1: super::Level1 =
    super::Level1(|step, session| step.walk(session, super::Pass::ReshapeFusion));
