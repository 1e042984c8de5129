//! ORT's `CommonSubexpressionElimination` (`core/optimizer/common_subexpression_elimination.cc`).

use super::*;

/// The expressions CSE has seen in one pass over a graph: each node's key (domain, op,
/// since-version, arity, inputs by id, encoded attributes) mapped to the node that holds it.
/// Keys are built in one reused buffer and stored end to end in one arena, found by their hash;
/// two different keys with the same hash go to `collided`, keyed by their bytes. So a node
/// costs no allocation, and a lookup answers exactly what a map keyed by the bytes would.
///
/// A key's hash puts it beside the keys of nodes that read values interned near its newest
/// input (that input's id times four, plus two bits of the key's hash, below a tag mixed from
/// the key, as [`crate::sym::BuildSymHasher`] does for syms): nodes are visited in about file
/// order, so the table is walked rather than jumped through.
#[derive(Default)]
pub(super) struct Seen {
    key: Vec<u8>,
    /// The highest input id of the current key's node.
    anchor: u32,
    arena: Vec<u8>,
    /// Hash -> (start, end) of the key in `arena`, and its node.
    by_hash: std::collections::HashMap<u64, (usize, usize, usize), Prehashed>,
    collided: FxMap<Vec<u8>, usize>,
    /// Nodes visited but not recorded, by their first input, which they alone read: no node
    /// visited later can hold their key unless a merge makes it read that value too, and the
    /// merge records them first ([`Optimizer::cse`]).
    aside: FxMap<Sym, usize>,
}

/// The hasher of [`Seen::by_hash`], whose keys are hashes already.
#[derive(Clone, Copy, Default)]
pub(super) struct Prehashed(u64);

impl std::hash::BuildHasher for Prehashed {
    type Hasher = Prehashed;
    fn build_hasher(&self) -> Prehashed {
        Prehashed(0)
    }
}

impl std::hash::Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        // Not reached (the keys are `u64`s); hashed anyway, should that change.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Where a key's node is kept.
enum Slot {
    Arena(u64),
    Collided,
    Absent(u64),
}

impl Seen {
    /// Room for the keys of `nodes` nodes (the map does not grow node by node).
    pub(super) fn with_capacity(nodes: usize) -> Seen {
        Seen {
            key: Vec::new(),
            anchor: 0,
            arena: Vec::with_capacity(nodes * 32),
            by_hash: std::collections::HashMap::with_capacity_and_hasher(nodes, Prehashed(0)),
            collided: FxMap::default(),
            aside: FxMap::default(),
        }
    }

    /// Empty again, keeping its memory for the next pass (the next step's CSE over the same
    /// graph needs as much: its pages are not faulted in a second time).
    pub(super) fn clear(&mut self) {
        self.key.clear();
        self.anchor = 0;
        self.arena.clear();
        self.by_hash.clear();
        self.collided.clear();
        self.aside.clear();
    }

    fn slot(&self) -> Slot {
        use std::hash::BuildHasher;
        const TAG: u64 = !0 << 57;
        let mixed = rustc_hash::FxBuildHasher.hash_one(self.key.as_slice());
        let h = ((u64::from(self.anchor) << 2) | (mixed >> 62)) | (mixed & TAG);
        match self.by_hash.get(&h) {
            Some(&(a, b, _)) if self.arena.get(a..b) == Some(self.key.as_slice()) => Slot::Arena(h),
            Some(_) => Slot::Collided,
            None => Slot::Absent(h),
        }
    }

    /// The node holding the current key, if any.
    fn get(&self, slot: &Slot) -> Option<usize> {
        match slot {
            Slot::Arena(h) => self.by_hash.get(h).map(|e| e.2),
            Slot::Collided => self.collided.get(&self.key).copied(),
            Slot::Absent(_) => None,
        }
    }

    /// Records `ni` as the node holding the current key.
    fn set(&mut self, slot: Slot, ni: usize) {
        match slot {
            Slot::Arena(h) => {
                if let Some(e) = self.by_hash.get_mut(&h) {
                    e.2 = ni;
                }
            }
            Slot::Collided => {
                self.collided.insert(self.key.clone(), ni);
            }
            Slot::Absent(h) => {
                let a = self.arena.len();
                self.arena.extend_from_slice(&self.key);
                self.by_hash.insert(h, (a, self.arena.len(), ni));
            }
        }
    }
}

impl Optimizer<'_> {
    /// CSE at node `ni` (ORT's walk is topological: a node's inputs are final when it is met).
    ///
    /// A node whose first input it alone reads is set aside rather than recorded: an earlier
    /// node with its key would read that input too, and so would a later one, unless a merge
    /// renames its readers to that value; a merge records the node set aside on the value it
    /// renames to before renaming. The answer is the one recording every node gives, without
    /// the table's lookup for most nodes of a model's chains.
    pub(super) fn cse(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
        seen: &mut Seen,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        if let Some(&first) = node.inputs.first()
            && !first.is_empty()
            && idx.sole_user(session, first) == Some(ni)
        {
            seen.aside.insert(first, ni);
            return false;
        }
        if !self.cse_key(session, gi, ni, seen) {
            return false;
        }
        let node = &session.graphs[gi].nodes[ni];
        let slot = seen.slot();
        match seen.get(&slot) {
            Some(rep) if rep != ni && !session.graphs[gi].nodes[rep].removed => {
                let outs = node.outputs.clone();
                if outs.iter().any(|o| idx.is_output(*o)) {
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
                        // The node set aside on `r` now has company: recorded as it would
                        // have been when met.
                        if let Some(k) = seen.aside.remove(r)
                            && !session.graphs[gi].nodes[k].removed
                            && self.cse_key(session, gi, k, seen)
                        {
                            let slot = seen.slot();
                            if seen.get(&slot).is_none() {
                                seen.set(slot, k);
                            }
                        }
                        idx.replace_reads(session, *o, *r);
                    }
                }
                idx.remove(session, ni);
                true
            }
            _ => {
                seen.set(slot, ni);
                false
            }
        }
    }

    /// Builds node `ni`'s key in `seen.key` (and its anchor); false for a node CSE never merges.
    fn cse_key(&self, session: &Session, gi: usize, ni: usize, seen: &mut Seen) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        let mut key = std::mem::take(&mut seen.key);
        let keyed = node_key(self.table, node, &mut key);
        seen.anchor = node.inputs.iter().map(|i| i.id()).max().unwrap_or(0);
        seen.key = key;
        keyed
    }
}

/// Builds `node`'s CSE key in `key`; false for a node CSE never merges.
fn node_key(table: &crate::tables::KernelTable, node: &SNode, key: &mut Vec<u8>) -> bool {
    // ORT's CSE never merges an ai.onnx DequantizeLinear: each QDQ node unit keeps its own
    // (`EnsureUniqueDQForNodeUnit`; measured on tests/fixtures/realworld/qdq*).
    let dq = node.domain == Sym::AI_ONNX && node.op == Sym::DEQUANTIZE_LINEAR;
    if dq || !node.subgraphs.is_empty() || !is_deterministic(node.domain, node.op) {
        return false;
    }
    // Names by their interned ids (equal ids, equal names), the counts first so that the
    // fixed-width fields cannot run into the attributes.
    key.clear();
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
    if !table.release_at_least(1, 25)
        && node.attrs.iter().any(|a| {
            a.t.as_ref()
                .is_some_and(|t| t.raw_data.as_ref().is_none_or(|r| r.is_empty()))
        })
    {
        return false;
    }
    if node.attrs.len() < 2 {
        node.attrs.iter().all(|a| encode_attr(a, key))
    } else {
        let mut attrs: Vec<_> = node.attrs.iter().collect();
        attrs.sort_by(|a, b| a.name().cmp(b.name()));
        attrs.into_iter().all(|a| encode_attr(a, key))
    }
}

/// Graphs from which CSE first asks, on threads, whether it can merge anything at all.
pub(super) const PARALLEL_PROOF_NODES: usize = 32 * 1024;

/// Whether CSE over graph `gi`, as it stands, would merge nothing: no two of the nodes it would
/// record (live, keyed, not set aside) have keys of the same hash. A merge needs two nodes of
/// one key, and a node set aside is the only reader of its first input, which any node of its
/// key reads too; so where no merge happens, the nodes recorded are the only ones that could
/// pair, and distinct hashes mean distinct keys. Two keys of one hash (equal, or a collision)
/// answer false, and the walk decides.
///
/// The keys are hashed a part of the node array per thread, on up to
/// [`crate::threads::threads`] threads, and the hashes checked a range of them per thread: a
/// million-node graph whose walk would read each node in turn, missing the cache, is read in
/// parallel. Only for a graph without subgraphs (the walk would visit theirs).
pub(super) fn cannot_merge(
    table: &crate::tables::KernelTable,
    session: &Session,
    gi: usize,
    idx: &Editor,
) -> bool {
    use std::hash::BuildHasher;
    /// Hashes are sorted into this many ranges (by their top bits) for the check.
    const RANGES: usize = 256;
    const PART: usize = 16 * 1024;
    let nodes = &session.graphs[gi].nodes;
    let threads = crate::threads::threads();
    let starts: Vec<usize> = (0..nodes.len()).step_by(PART).collect();
    let parts: Vec<Vec<Vec<u64>>> = crate::threads::map_chunks(&starts, 1, threads, "cse", |s| {
        let mut ranges: Vec<Vec<u64>> = vec![Vec::new(); RANGES];
        let mut key = Vec::new();
        for &start in s {
            let end = nodes.len().min(start + PART);
            for (ni, node) in nodes.iter().enumerate().take(end).skip(start) {
                if node.removed {
                    continue;
                }
                // Set aside by the walk (`Optimizer::cse`).
                if let Some(&first) = node.inputs.first()
                    && !first.is_empty()
                    && idx.sole_user(session, first) == Some(ni)
                {
                    continue;
                }
                if node_key(table, node, &mut key) {
                    let h = rustc_hash::FxBuildHasher.hash_one(key.as_slice());
                    ranges[(h >> 56) as usize % RANGES].push(h);
                }
            }
        }
        ranges
    });
    let all: Vec<usize> = (0..RANGES).collect();
    crate::threads::map_chunks(&all, 16, threads, "cse", |rs| {
        rs.iter().all(|&r| {
            let mut hashes: Vec<u64> = parts.iter().flat_map(|p| p[r].iter().copied()).collect();
            hashes.sort_unstable();
            hashes.windows(2).all(|w| w[0] != w[1])
        })
    })
    .into_iter()
    .all(|distinct| distinct)
}

/// Appends an attribute's encoding and a separator to a CSE key; false if it cannot be encoded
/// (never, into a `Vec`, which grows).
fn encode_attr(a: &crate::model::proto::AttributeProto, key: &mut Vec<u8>) -> bool {
    if a.encode(key).is_err() {
        return false;
    }
    key.push(2);
    true
}

/// `CommonSubexpressionElimination` as its registry entry runs it: node by node, in the optimiser's walk.
pub(crate) const LEVEL1: super::Level1 =
    super::Level1(|step, session| step.walk(session, super::Pass::Cse));
