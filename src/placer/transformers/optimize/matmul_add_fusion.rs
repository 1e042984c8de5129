//! ORT's `MatMulAddFusion` (`core/optimizer/matmul_add_fusion.cc`).

use super::*;

/// What [`Optimizer::matmul_add_fusion`] fuses at a MatMul, found without a change to the
/// graph: the Add, the MatMul's inputs, the bias, the element type and, for a first input of
/// another rank than 2, the reshapes' `[M, K]` and output shape.
pub(super) struct Plan {
    add: usize,
    a: Sym,
    w: Sym,
    bias: Sym,
    elem: i32,
    dim_n: Option<i64>,
    reshape: Option<(i64, i64, Vec<i64>)>,
}

/// The fusion `MatMulAddFusion` makes at node `ni`, if any (see
/// [`Optimizer::matmul_add_fusion`]); reads the graph only.
pub(super) fn plan(
    session: &Session,
    gi: usize,
    ni: usize,
    idx: &Editor,
    read_by_add: &HashSet<Sym>,
) -> Option<Plan> {
    let mm = &session.graphs[gi].nodes[ni];
    if mm.op != "MatMul"
        || mm.domain != Sym::AI_ONNX
        || !matches!(mm.since, Some(1 | 9 | 13))
        || mm.inputs.len() != 2
        || mm.outputs.len() != 1
    {
        return None;
    }
    let out = mm.outputs[0];
    if idx.is_output(out) || !read_by_add.contains(&out) {
        return None;
    }
    let add = idx.sole_user(session, out)?;
    let an = &session.graphs[gi].nodes[add];
    let edges = an.inputs.iter().filter(|i| **i == out).count()
        + an.implicit_inputs.iter().filter(|i| **i == out).count();
    if edges != 1
        || an.op != "Add"
        || an.domain != Sym::AI_ONNX
        || !matches!(an.since, Some(7 | 13 | 14))
        || an.inputs.len() != 2
        || an.outputs.len() != 1
    {
        return None;
    }
    let a = mm.inputs[0];
    let w = mm.inputs[1];
    let ty = session.type_of(gi, a);
    let float_ok = matches!(ty, Some(Type::Tensor(e)) if *e == D::Float as i32 || *e == D::Float16 as i32 || *e == D::Bfloat16 as i32);
    if !float_ok || session.type_of(gi, an.inputs[0]) != ty {
        return None;
    }
    let elem = match ty {
        Some(Type::Tensor(e)) => *e,
        _ => return None,
    };
    // Shapes are read in place: most MatMuls of a model decline here.
    let (Some(a_shape), Some(w_shape)) = (session.shape_of(gi, a), session.shape_of(gi, w)) else {
        return None;
    };
    if w_shape.len() != 2 {
        return None;
    }
    let need_reshape = a_shape.len() != 2;
    let dim_n = w_shape[1];
    let mut reshape: Option<(i64, i64, Vec<i64>)> = None;
    if need_reshape {
        let dims = a_shape.iter().copied().collect::<Option<Vec<i64>>>()?;
        let (Some(k), Some(n)) = (w_shape[0], w_shape[1]) else {
            return None;
        };
        let m: i64 = dims[..dims.len().saturating_sub(1)].iter().product();
        let mut back = dims;
        if let Some(last) = back.last_mut() {
            *last = n;
        }
        reshape = Some((m, k, back));
    }
    let bias_idx = usize::from(an.inputs[0] == out);
    let bias = an.inputs[bias_idx];
    let b_shape = session.shape_of(gi, bias)?;
    let eq = |x: Option<i64>, y: Option<i64>| x.is_some() && x == y;
    let valid = (b_shape.len() == 1 && eq(b_shape[0], dim_n))
        || (!need_reshape && b_shape.len() == 2 && b_shape[0] == Some(1) && eq(b_shape[1], dim_n))
        || (!need_reshape
            && b_shape.len() == 2
            && eq(b_shape[0], a_shape[0])
            && (b_shape[1] == Some(1) || eq(b_shape[1], dim_n)));
    if !valid {
        return None;
    }
    Some(Plan {
        add,
        a,
        w,
        bias,
        elem,
        dim_n,
        reshape,
    })
}

impl Optimizer<'_> {
    /// `MatMulAddFusion` (`core/optimizer/matmul_add_fusion.cc`, the same in 1.23–1.31 by the
    /// oracle): a float/float16/bfloat16 `MatMul` (since 1, 9, 13) whose only edge goes to an
    /// `Add` (since 7, 13, 14) of the same type, with a rank-2 second input, becomes a `Gemm`
    /// named `GenerateNodeName(<matmul>/MatMulAddFusion)` reading the Add's other input as bias.
    /// The bias must be `[N]`, or for a 2-D first input also `[1, N]`, `[M, 1]` or `[M, N]`.
    /// Another rank of the first input needs its shape and the weight's fully known: the Gemm
    /// then sits between two new Reshapes, `gemm_input_reshape` (to `[M, K]`) and
    /// `gemm_output_reshape` (back), each with a shape initializer and a new value, all named
    /// by `GenerateNodeName`/`GenerateNodeArgName`. At level 1 nothing is kept for attention.
    /// `read_by_add` holds at least every value a live `Add` of the graph reads.
    pub(super) fn matmul_add_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
        names: &mut Option<NameGen>,
        read_by_add: &HashSet<Sym>,
    ) -> bool {
        let Some(Plan {
            add,
            a,
            w,
            bias,
            elem,
            dim_n,
            reshape,
        }) = plan(session, gi, ni, idx, read_by_add)
        else {
            return false;
        };
        let add_out = session.graphs[gi].nodes[add].outputs[0];
        let mm_name = session.graphs[gi].nodes[ni].name;
        let names = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        let reshape_since =
            infer::resolve_schema(self.table, &self.versions, Sym::AI_ONNX, Sym::RESHAPE)
                .ok()
                .map(|s| s.since);
        let gemm_since =
            infer::resolve_schema(self.table, &self.versions, Sym::AI_ONNX, Sym::new("Gemm"))
                .ok()
                .map(|s| s.since);
        let mut new_nodes: Vec<SNode> = Vec::new();
        let mut gemm_in = a;
        let mut gemm_out = add_out;
        if let Some((m, k, back)) = reshape {
            for (is_input, shape) in [(true, vec![m, k]), (false, back)] {
                let base = if is_input {
                    "gemm_input"
                } else {
                    "gemm_output"
                };
                let shape_name = names.node(&format!("{base}_shape"));
                names.reserve_value(shape_name);
                let arg = names.value(&format!("{base}_reshape_arg"));
                let node_name = names.node(&format!("{base}_reshape"));
                let g = &mut session.graphs[gi];
                g.generated_names.insert(node_name);
                g.types.insert(arg, Type::Tensor(elem));
                g.shapes
                    .insert(arg, vec![Some(m), if is_input { Some(k) } else { dim_n }]);
                self.add_initializer(session, gi, shape_name, Some(Tensor::i64_1d(shape)));
                let (input, output) = if is_input {
                    gemm_in = arg;
                    (a, arg)
                } else {
                    gemm_out = arg;
                    (arg, add_out)
                };
                new_nodes.push(SNode::plain(
                    node_name,
                    Sym::RESHAPE,
                    Sym::AI_ONNX,
                    reshape_since,
                    vec![input, shape_name],
                    vec![output],
                ));
            }
        }
        let gemm_name = names.node(&format!("{mm_name}/MatMulAddFusion"));
        session.graphs[gi].generated_names.insert(gemm_name);
        let gemm = SNode {
            name: gemm_name,
            op: "Gemm".into(),
            domain: Sym::AI_ONNX,
            since: gemm_since,
            inputs: vec![gemm_in, w, bias],
            outputs: vec![gemm_out],
            attrs: thin_vec::ThinVec::new(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: None,
            kernel: None,
            origin: session.graphs[gi].nodes[ni].origin,
            removed: false,
        };
        new_nodes.push(gemm);
        idx.remove(session, ni);
        idx.remove(session, add);
        self.append_nodes(session, gi, idx, new_nodes);
        true
    }

    /// The ops and since-versions `FuseContiguousReshapes` chains: Reshape 5, 13, 14 and
    /// Squeeze/Unsqueeze 1, 11, 13 up to 1.24; from 1.25 also Reshape 19, 21 and
    /// Squeeze/Unsqueeze 21 (oracle probes: opset-19/21 chains fuse from 1.25.1 on).
    pub(super) fn reshape_like(table: &KernelTable, op: &str, since: Option<i64>) -> bool {
        let new = table.release_at_least(1, 25);
        match (op, since) {
            ("Reshape", Some(5 | 13 | 14)) | ("Squeeze" | "Unsqueeze", Some(1 | 11 | 13)) => true,
            ("Reshape", Some(19 | 21)) | ("Squeeze" | "Unsqueeze", Some(21)) => new,
            _ => false,
        }
    }

    /// Appends new nodes to graph `gi`, keeping the index up to date.
    pub(super) fn append_nodes(
        &mut self,
        session: &mut Session,
        gi: usize,
        idx: &mut Editor,
        nodes: Vec<SNode>,
    ) {
        debug_assert_eq!(idx.gi, gi);
        for n in nodes {
            idx.add(session, n);
        }
    }
}

/// `MatMulAddFusion` as its registry entry runs it: node by node, in the optimiser's walk.
pub(crate) const LEVEL1: super::Level1 =
    super::Level1(|step, session| step.walk(session, super::Pass::MatMulAdd));
