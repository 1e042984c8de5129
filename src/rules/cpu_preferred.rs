//! OL103 cpu-preferred.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::placer::Decision;
use crate::rules::{Context, nodes};

declare_rule! {
    /// ## What it does
    /// Reports a node that has a CUDA kernel but that ORT moves to the CPU in its shape-subgraph
    /// pass (`GetCpuPreferredNodes`): starting from the host-memory outputs of CUDA kernels such as
    /// `Shape`, ORT walks downstream and puts on the CPU every node whose inputs are all CPU values,
    /// small initializers (at most 100 elements) or graph inputs.
    ///
    /// ## Why is this bad?
    /// Usually it is not: shape arithmetic is cheaper on the CPU, and feeds host-memory inputs
    /// (`Reshape`'s shape) without a copy. It matters when such a node's output is read by a CUDA
    /// node in device memory: then each such value is copied (see OL201). Informational by default.
    ///
    /// ## Example
    /// ```text
    /// s = Shape (x)
    /// d = Gather <axis = 0> (s, idx)     # moved to CPU: input is Shape's host output
    /// ```
    ///
    /// ## How to fix
    /// Nothing, unless OL201 reports copies next to it; then fold the shape computation into a
    /// constant (see OL301) or let ORT fold it (static input shapes, optimisation level `basic` or
    /// higher).
    ///
    /// ## Fix safety
    /// No automatic fix.
    pub static RULE = ("OL103", "cpu-preferred", Allow, "ORT's shape-subgraph pass moves a node to CPU", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    for (gi, ni, node) in nodes(cx.session()) {
        let Some(Decision::CpuPreferred { kernel, .. }) = cx
            .placement
            .decisions
            .get(crate::session::NodeRef::new(gi, ni))
        else {
            continue;
        };
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "ORT moves `{}` ({}) to the CPU: all its inputs are host values or small constants (shape-subgraph pass)",
                node.name, node.op
            ),
        );
        f.cause = "shape subgraph".into();
        f.evidence.push(format!(
            "{} would take it ({} {}), but GetCpuPreferredNodes prefers the CPU",
            cx.provider().label,
            kernel.op,
            kernel.range_label()
        ));
        out.push(f);
    }
}
