//! The kernel look-up that starts ORT's copy planning: `TransformerMemcpyImpl::ModifyGraph`
//! (`onnxruntime/core/optimizer/transformer_memcpy.cc`) runs `ProcessInitializers` before it
//! adds any copy, and that looks up the kernel of every node on its provider, failing the
//! session (`status.IsOK() was false. Failed to find kernel for Op(since) ...`) when one has
//! none. Partitioning only gives a provider nodes it has kernels for, but a transformer
//! that creates a node after partitioning hands it the provider of the nodes it replaces without
//! asking: `GatherSliceToSplitFusion`'s `Squeeze` in an opset-21 model takes since-version 21,
//! and ORT 1.23.2 registers the CUDA `Squeeze` for 13+ only (an open-ended registration matches
//! its own since-version alone), so that session fails there: no copy and no placement is
//! logged (oracle: `unseen2/vc21.tsd.mistral.L2.onnx`, 1.23.2, `all`; 1.24.4 registers 21-22).

use crate::infer;
use crate::session::Session;
use crate::tables::{Ep, KernelTable};

use super::{Miss, lookup};

/// The first node on provider `ep` (graph by graph, in node order, as ORT's node set is
/// ordered by index) that no kernel registration of `ep` serves at its since-version, with ORT's
/// error. Only nodes the placer left unbound (created by a transformer after partitioning) are
/// looked up; a type mismatch is not counted, as the placer's own types of fused nodes may be
/// incomplete.
pub(super) fn missing_provider_kernel(
    session: &Session,
    table: &'static KernelTable,
    ep: Ep,
) -> Option<(crate::session::NodeRef, String)> {
    let label = crate::providers::of(ep).label;
    let versions = infer::domain_versions(session, table);
    for (gi, g) in session.graphs.iter().enumerate() {
        for (ni, n) in g.live_nodes() {
            // A CPU row (a node a transformer copied from a CPU node) binds nothing on `ep`.
            let bound = n.kernel.is_some_and(|kd| kd.ep == ep);
            if n.ep != Some(ep) || bound || n.op.starts_with("Memcpy") {
                continue;
            }
            let Ok(schema) = infer::resolve_schema(table, &versions, n.domain, n.op) else {
                continue;
            };
            let mut probe = n.clone();
            probe.since = Some(schema.since);
            if let Err(Miss::Version { .. } | Miss::NoRegistration) =
                lookup(table, ep, session, gi, &probe, Some(schema))
            {
                return Some((
                    crate::session::NodeRef::new(gi, ni),
                    format!(
                        "init: Exception during initialization: transformer_memcpy.cc \
                             TransformerMemcpyImpl::ProcessInitializers: status.IsOK() was false. \
                             Failed to find kernel for {}({}) (node:'{}' ep:'{}'): \
                             a transformer created it on the {label} provider after partitioning, and \
                             {label} registers no kernel for that version",
                        n.op,
                        schema.since,
                        n.name,
                        ep.name()
                    ),
                ));
            }
        }
    }
    None
}
