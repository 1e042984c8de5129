//! ORT's `QDQSelectorActionTransformer` (`qdq_selector_action_transformer.cc`, driven by
//! `core/optimizer/selectors_actions/selector_action_transformer.cc`): a level-2 transformer
//! that visits every graph's nodes in ORT's topological order (subgraphs first) and, for an ONNX
//! node on the CPU (on CUDA, `DQMatMulToMatMulNBits` only) with rules for its op (and
//! since-version), runs the rules' selectors (`qdq_selectors.rs`) in ORT's order and, for the
//! first that selects a group, its action (`qdq_actions.rs`).
//!
//! A replacement op the CPU provider of the release has no kernel for is not made (the
//! selectors of the CPU rules pick only groups whose result has a CPU kernel).

use crate::placer::OptLevel;
use crate::placer::qdq_transformer::walk;
use crate::session::Session;
use crate::session::edit::Editor;
use crate::sym::Sym;
use crate::tables::KernelTable;

use super::qdq_actions;
use super::qdq_selectors::{self, rules_for};

/// Applies the transformer at level `extended` and above; whether it changed anything.
pub fn run(session: &mut Session, table: &KernelTable, level: OptLevel) -> bool {
    if level < OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    // Every selector's group reads a DequantizeLinear (ORT's node units): a session without one
    // skips the walk and its orders.
    if !session.has_live_op(&[Sym::DEQUANTIZE_LINEAR]) {
        return false;
    }
    let versions = crate::infer::domain_versions(session, table);
    walk(session, 0, 0, &mut |session, gi, edges, ni| {
        visit(session, table, &versions, gi, edges, ni)
    })
}

fn visit(
    session: &mut Session,
    table: &KernelTable,
    versions: &crate::sym::SymMap<Sym, i64>,
    gi: usize,
    edges: &mut Option<Editor>,
    ni: usize,
) -> bool {
    let n = &session.graphs[gi].nodes[ni];
    if n.removed
        || !crate::providers::named(n.ep, super::qdq_selectors::SELECTOR_PROVIDERS)
        || n.domain != Sym::AI_ONNX
    {
        return false;
    }
    let ep = n.ep;
    let (op, since) = (n.op, n.since);
    // The first of the op's rules whose selector picks a group (`MatchAndProcess`).
    let mut chosen = None;
    for rule in rules_for(&op, since, table).into_iter().flatten() {
        if !rule.runs_on(ep, table) {
            continue;
        }
        crate::placer::qdq_transformer::open_editor(session, gi, edges);
        let Some(e) = edges.as_mut() else {
            return false;
        };
        if let Some(group) = qdq_selectors::select(session, gi, e, ni, rule) {
            chosen = Some((rule, group));
            break;
        }
    }
    let Some((rule, group)) = chosen else {
        return false;
    };
    let Some(e) = edges.as_mut() else {
        return false;
    };
    let n = &session.graphs[gi].nodes[ni];
    let since = match qdq_actions::replacement(rule, n, &group) {
        None => None,
        Some((domain, op)) => {
            if ep.is_none_or(|ep| table.kernels_of(ep, domain, op).is_empty()) {
                return false;
            }
            let Ok(schema) = crate::infer::resolve_schema(table, versions, domain, op) else {
                return false;
            };
            Some(schema.since)
        }
    };
    // The action edits through the editor, which keeps the edges current.
    qdq_actions::run(session, gi, e, rule, &group, since);
    true
}

#[cfg(test)]
mod tests {
    use crate::placer::{self, OptLevel, Options};
    use crate::tables::Ep;

    /// The live nodes of the session graph after a CPU-only (or CUDA) session at `level`:
    /// `name domain:op(inputs)`, in index order.
    fn nodes(text: &str, eps: Vec<Ep>, level: OptLevel) -> Vec<String> {
        let proto = crate::model::text::parse_model(text).expect("parses");
        let model = crate::model::Model::from_proto(std::path::Path::new("t.onnx"), 0, proto)
            .expect("loads");
        let table = crate::tables::resolve("1.31.1").expect("bundled").table();
        let p = placer::place(
            &model,
            table,
            &Options {
                eps,
                level,
                ..Default::default()
            },
        );
        assert_eq!(p.outcome, placer::Outcome::Ok);
        p.session.graphs[0]
            .live_nodes()
            .map(|(_, n)| {
                let inputs: Vec<&str> = n.inputs.iter().map(|i| i.as_str()).collect();
                format!("{} {}:{}({})", n.name, n.domain, n.op, inputs.join(","))
            })
            .collect()
    }

    fn cpu(text: &str) -> Vec<String> {
        nodes(text, vec![Ep::Cpu], OptLevel::Extended)
    }

    const CONV: &str = r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] X) => (float[1,4,8,8] Y)
<float xs = {0.1}, uint8 xz = {128}, int8[4,3,3,3] w = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27}, float ws = {0.02}, int8 wz = {0}, int32[4] b = {1,2,3,4}, float bs = {0.002}, int32 bz = {0}, float ys = {0.2}, uint8 yz = {128}>
{
    [qx] xq = QuantizeLinear (X, xs, xz)
    [dqx] xd = DequantizeLinear (xq, xs, xz)
    [dqw] wd = DequantizeLinear (w, ws, wz)
    [dqb] bd = DequantizeLinear (b, bs, bz)
    [conv] c = Conv <pads = [1,1,1,1]> (xd, wd, bd)
    [qc] cq = QuantizeLinear (c, ys, yz)
    [dqy] Y = DequantizeLinear (cq, ys, yz)
}
"#;

    #[test]
    fn conv_group_becomes_qlinearconv_named_after_the_conv() {
        assert_eq!(
            cpu(CONV),
            [
                "qx ai.onnx:QuantizeLinear(X,xs,xz)",
                "dqy ai.onnx:DequantizeLinear(cq,ys,yz)",
                "conv ai.onnx:QLinearConv(xq,xs,xz,w,ws,wz,ys,yz,b)",
            ]
        );
        // Level 1 only: nothing fused.
        assert_eq!(nodes(CONV, vec![Ep::Cpu], OptLevel::Basic).len(), 7);
    }

    #[test]
    fn a_conv_on_cuda_is_left_alone() {
        let n = nodes(CONV, vec![Ep::Cuda, Ep::Cpu], OptLevel::Extended);
        assert!(
            n.iter().any(|l| l.starts_with("conv ai.onnx:Conv(")),
            "{n:?}"
        );
    }

    #[test]
    fn drop_qdq_around_maxpool_and_reshape() {
        let text = r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] X) => (float[1,48] Y)
<float s = {0.1}, uint8 z = {128}, int64[2] shape = {1, 48}>
{
    [q0] xq = QuantizeLinear (X, s, z)
    [d0] xd = DequantizeLinear (xq, s, z)
    [pool] p = MaxPool <kernel_shape = [2,2], strides = [2,2]> (xd)
    [q1] pq = QuantizeLinear (p, s, z)
    [d1] pd = DequantizeLinear (pq, s, z)
    [reshape] r = Reshape (pd, shape)
    [q2] rq = QuantizeLinear (r, s, z)
    [d2] Y = DequantizeLinear (rq, s, z)
}
"#;
        assert_eq!(
            cpu(text),
            [
                "q0 ai.onnx:QuantizeLinear(X,s,z)",
                "pool ai.onnx:MaxPool(xq)",
                "reshape ai.onnx:Reshape(pq,shape)",
                "d2 ai.onnx:DequantizeLinear(rq,s,z)",
            ]
        );
    }

    #[test]
    fn binary_add_becomes_qlinearadd_unless_its_output_is_a_graph_output() {
        let text = |out: &str| {
            format!(
                r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] A, float[4] B) => ({out})
<float s = {{0.1}}, uint8 z = {{128}}>
{{
    [qa] aq = QuantizeLinear (A, s, z)
    [da] ad = DequantizeLinear (aq, s, z)
    [qb] bq = QuantizeLinear (B, s, z)
    [db] bd = DequantizeLinear (bq, s, z)
    [add] c = Add (ad, bd)
    [qc] cq = QuantizeLinear (c, s, z)
    [dc] Y = DequantizeLinear (cq, s, z)
}}
"#
            )
        };
        let fused = cpu(&text("float[4] Y"));
        assert!(
            fused.contains(&"add com.microsoft:QLinearAdd(aq,s,z,bq,s,z,s,z)".to_string()),
            "{fused:?}"
        );
        assert_eq!(fused.len(), 4);
        let kept = cpu(&text("float[4] Y, float[4] c"));
        assert!(
            kept.iter().any(|l| l.starts_with("add ai.onnx:Add(")),
            "{kept:?}"
        );
    }

    #[test]
    fn matmul_without_q_becomes_matmulintegertofloat() {
        let text = r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2,2] Y)
<float s = {0.1}, uint8 z = {128}, uint8[3,2] w = {1,2,3,4,5,6}, float ws = {0.5}, uint8 wz = {3}>
{
    [qa] aq = QuantizeLinear (A, s, z)
    [da] ad = DequantizeLinear (aq, s, z)
    [dw] wd = DequantizeLinear (w, ws, wz)
    [mm] Y = MatMul (ad, wd)
}
"#;
        assert_eq!(
            cpu(text),
            [
                "qa ai.onnx:QuantizeLinear(A,s,z)",
                "mm com.microsoft:MatMulIntegerToFloat(aq,w,s,ws,z,wz)",
            ]
        );
    }

    /// int8 activations: a Q with one DQ becomes uint8 (`QDQS8ToU8Transformer`) and its Conv is
    /// fused; a Q read by two DQs stays int8, and int8 is not allowed on x86-64.
    #[test]
    fn int8_activations_fuse_only_after_s8_to_u8() {
        let text = |extra: &str| {
            format!(
                r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,4,4] X) => (float[1,1,4,4] Y{extra})
<float xs = {{0.1}}, int8 xz = {{0}}, int8[1,1,1,1] w = {{100}}, float ws = {{0.02}}, int8 wz = {{0}}>
{{
    [qx] xq = QuantizeLinear (X, xs, xz)
    [dqx] xd = DequantizeLinear (xq, xs, xz)
    [dqw] wd = DequantizeLinear (w, ws, wz)
    [conv] c = Conv (xd, wd)
    [qc] cq = QuantizeLinear (c, xs, xz)
    [dqy] Y = DequantizeLinear (cq, xs, xz)
{body}}}
"#,
                body = if extra.is_empty() {
                    ""
                } else {
                    "    [dqz] Z = DequantizeLinear (xq, xs, xz)\n"
                }
            )
        };
        let one = cpu(&text(""));
        assert!(
            one.iter().any(|l| l.starts_with(
                "conv ai.onnx:QLinearConv(qdq_s8_to_u8_quant,xs,qdq_s8_to_u8_zp_conversion,w,ws,wz,"
            )),
            "{one:?}"
        );
        let two = cpu(&text(", float[1,1,4,4] Z"));
        assert!(
            two.iter().any(|l| l.starts_with("conv ai.onnx:Conv(")),
            "{two:?}"
        );
    }
}
