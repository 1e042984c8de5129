//! The editor of one graph: its producer/consumer index and the edits that keep it.
//!
//! A transformer that rewires a graph does it through an [`Editor`]: appending a node
//! ([`Editor::add`]), removing one ([`Editor::remove`]), pointing an input or an output at another
//! value ([`Editor::set_input`], [`Editor::set_output`]), renaming a value's reads
//! ([`Editor::replace_reads`]). Each edit updates the index as it goes, so that a lookup costs
//! the readers of one value, not a walk of the graph, and the index is built once per graph for
//! the whole session: a pass keeps its editor when it is done ([`Editor::keep`]) and the next
//! pass over the graph takes it ([`Editor::open`]) rather than index the graph again, as long as
//! every edit of the graph since went through it ([`crate::session::SGraph::generation`]).
//!
//! The index may keep stale entries (a removed node, a node that no longer reads a value): every
//! lookup checks the node it names, so that an edit never has to find and remove them.
//!
//! Who edits through it: every pass after the session is built. The level-1 optimiser
//! (`placer/transformers/optimize/`), the level-2 fusions (`placer/transformers/fusions/`), every QDQ transformer
//! (`placer/transformers/qdq_transformer/`, the selector/action transformer's actions and
//! `EnsureUniqueDQForNodeUnit` included), the MatMulIntegerToFloat fusions,
//! `FuseInitializersTransformer`, the cast passes (`placer/transformers/casts.rs`) and the TransposeOptimizer
//! with the NHWC transformer (`placer/transformers/transpose/`, whose graph API, as ORT's `api::GraphRef`, is
//! a thin layer over an editor) look values up in its index; the NCHWc transformer, function
//! inlining, an inlined `If` branch's move and the copy pass only write edits at positions they
//! found themselves, through an editor built [`Editor::lazy`], which indexes nothing until a
//! lookup. `tests/it/architecture.rs` checks that nothing else writes a graph's nodes. The lookups
//! in ORT's terms (an edge is an input position of a node, a subgraph's read counting one:
//! [`Editor::reader_slots`], [`Editor::consumers`], [`Editor::edge_count`],
//! [`Editor::node_output_edges`]) are built from the same lists: the index holds each read as
//! ORT's edge does, a node and the input position it reads at, so a lookup checks one position
//! per read, however many inputs the reading node has.

use crate::session::names::Taken;
use crate::session::order::Producers;
use crate::session::{EdgeEnd, SGraph, SNode, Session};
use crate::sym::{Sym, SymMap, SymSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// One read of a value: the reading node's index and the position it reads at, an implicit
/// input (a read by the node's subgraphs) tagged with [`Read::IMPLICIT`]. Indices fit 32 bits:
/// [`crate::model::MAX_NODES`] bounds a graph's nodes, and a node's inputs are fewer than the
/// bytes of its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Read {
    node: u32,
    slot: u32,
}

impl Read {
    /// The tag of a position in the node's implicit inputs.
    const IMPLICIT: u32 = 1 << 31;

    /// Node `node`'s explicit input `slot`, or implicit input `slot` if `implicit`; `None` past
    /// 32 bits.
    fn new(node: usize, slot: usize, implicit: bool) -> Option<Read> {
        let node = u32::try_from(node).ok()?;
        let slot = u32::try_from(slot).ok().filter(|&s| s < Self::IMPLICIT)?;
        Some(Read {
            node,
            slot: if implicit {
                slot | Self::IMPLICIT
            } else {
                slot
            },
        })
    }

    /// Whether the read is one of the node's implicit inputs.
    fn implicit(self) -> bool {
        self.slot & Self::IMPLICIT != 0
    }

    /// Whether node `self.node` of `g` is live and still reads `v` at this position.
    fn holds(self, g: &SGraph, v: Sym) -> bool {
        let Some(n) = g.nodes.get(self.node as usize) else {
            return false;
        };
        let list = if self.implicit() {
            &n.implicit_inputs[..]
        } else {
            &n.inputs[..]
        };
        !n.removed && list.get((self.slot & !Self::IMPLICIT) as usize) == Some(&v)
    }

    /// The edge it is in ORT's terms: a node's input position, a read by its subgraphs as
    /// position `usize::MAX` (one edge per node, however many implicit inputs name the value).
    fn edge(self) -> EdgeEnd {
        let arg = if self.implicit() {
            usize::MAX
        } else {
            self.slot as usize
        };
        EdgeEnd::new(self.node as usize, arg)
    }
}

/// The reads of one value. Most values have one or two, kept in place: no allocation per
/// value, and no larger than a `Vec`.
type Readers = smallvec::SmallVec<[Read; 2]>;

/// The reads of each value of one graph. A graph large against the interner (most of its names
/// are its values) gets a table indexed by symbol id, as [`Producers`] does: a lookup without
/// hashing, and the lists of values named one after another (a file's names are interned in
/// its order) side by side; a small graph in a model of many names gets a hash map. The table
/// holds at most [`DENSE_READS_PER_NODE`] lists per node of its graph.
#[derive(Debug)]
enum ReadTable {
    Dense(Vec<Readers>),
    Sparse(SymMap<Sym, Readers>),
}

/// The most lists of reads a graph's node may account for in a [`ReadTable::Dense`] (24 bytes
/// each).
const DENSE_READS_PER_NODE: usize = 4;

impl ReadTable {
    /// An empty table for graph `g`.
    fn for_graph(g: &SGraph) -> ReadTable {
        if let Some((ids, room)) =
            crate::session::order::dense_table(g.nodes.len(), DENSE_READS_PER_NODE)
        {
            let mut t = Vec::with_capacity(room);
            t.resize_with(ids, Readers::new);
            ReadTable::Dense(t)
        } else {
            ReadTable::Sparse(SymMap::with_capacity_and_hasher(
                g.values_estimate(),
                Default::default(),
            ))
        }
    }

    fn get(&self, v: Sym) -> Option<&Readers> {
        match self {
            ReadTable::Dense(t) => t.get(v.id() as usize),
            ReadTable::Sparse(m) => m.get(&v),
        }
    }

    fn get_mut(&mut self, v: Sym) -> Option<&mut Readers> {
        match self {
            ReadTable::Dense(t) => t.get_mut(v.id() as usize),
            ReadTable::Sparse(m) => m.get_mut(&v),
        }
    }

    /// Records read `r` of `v`; whether it came after every read the list holds (where it
    /// did not, the list is no longer in the order a fresh index lists it).
    fn push(&mut self, v: Sym, r: Read) -> bool {
        let list = match self {
            ReadTable::Dense(t) => {
                let k = v.id() as usize;
                if k >= t.len() {
                    t.resize_with(k + 1, Readers::new);
                }
                &mut t[k]
            }
            ReadTable::Sparse(m) => m.entry(v).or_default(),
        };
        let in_order = list.last().is_none_or(|&last| last < r);
        list.push(r);
        in_order
    }

    /// Forgets every read of `v`.
    fn clear(&mut self, v: Sym) {
        match self {
            ReadTable::Dense(t) => {
                if let Some(l) = t.get_mut(v.id() as usize) {
                    *l = Readers::new();
                }
            }
            ReadTable::Sparse(m) => {
                m.remove(&v);
            }
        }
    }
}

/// What [`Editor::reads_of`] indexes of a graph's nodes.
#[derive(Debug)]
pub struct Reads {
    readers: ReadTable,
    ops: Vec<Sym>,
    op_counts: Option<SymMap<Sym, usize>>,
}

/// An [`Editor`]'s producer/consumer index.
#[derive(Debug)]
struct Index {
    producer: Producers,
    /// The reads of each value: one entry per input position that reads it, in the order they
    /// started reading it; entries go stale (see the module's doc) and are checked on each
    /// lookup, at the one position each names.
    readers: ReadTable,
    /// Per value with more than [`COMPACT_MIN`] reads recorded, how many of them an edit made
    /// stale since its list was last compacted: past half the list, the list is compacted, so
    /// that a lookup of a value many removed nodes read does not pass over all of them.
    stale: SymMap<Sym, u32>,
    /// The values whose lists an edit appended a read to out of order (ahead of a read of a
    /// later node or position, or one the list held already): sorted when the editor is handed
    /// to the next pass ([`Editor::open`]), so that it lists them as a fresh index would.
    unsorted: Vec<Sym>,
}

impl Index {
    /// The index of graph `gi` as it is.
    fn of(session: &Session, gi: usize) -> Index {
        Index {
            producer: Producers::of(session, gi),
            readers: Editor::reads_of(session, gi, false).readers,
            stale: SymMap::default(),
            unsorted: Vec::new(),
        }
    }
}

/// Whether [`Editor::kept`] checks each editor it hands over against a fresh index of its graph
/// ([`Editor::agrees_with`]), and [`order_of`] each order against one computed afresh: always in a debug build; in a release build where
/// [`check_hand_overs`] turned it on (a test does, over every fixture model).
static CHECK_HAND_OVERS: AtomicBool = AtomicBool::new(cfg!(debug_assertions));

/// The hand-overs checked: those that agreed with a fresh index, those that did not.
static HAND_OVERS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The orders [`order_of`] handed over from the session and checked (under the same switch):
/// those that were the order computed afresh, those that were not.
static ORDERS_REUSED: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The orders handed over from the session and checked so far in this process: how many were
/// the order computed afresh, and how many were not.
pub fn orders_reused() -> (usize, usize) {
    (
        ORDERS_REUSED[0].load(Ordering::Relaxed),
        ORDERS_REUSED[1].load(Ordering::Relaxed),
    )
}

/// Turns the check of each hand-over on or off ([`CHECK_HAND_OVERS`]); a debug build always
/// checks.
pub fn check_hand_overs(on: bool) {
    CHECK_HAND_OVERS.store(on || cfg!(debug_assertions), Ordering::Relaxed);
}

/// The hand-overs checked so far in this process: how many agreed with a fresh index of their
/// graph, and how many did not.
pub fn hand_overs() -> (usize, usize) {
    (
        HAND_OVERS[0].load(Ordering::Relaxed),
        HAND_OVERS[1].load(Ordering::Relaxed),
    )
}

/// What the passes keep for the next one: the editors ([`Editor::keep`]), at most one per
/// graph, and each graph's node orders as last computed, where a pass asked for them
/// through [`order_of`] (the reverse DFS the passes after partitioning walk). The editors, for the next pass over
/// the graph to take ([`Editor::open`]) rather than index the graph again: one producer/consumer
/// index per graph for the whole session, built by the first pass that needs it and kept by
/// every edit from then on, as long as every edit goes through it. An editor is taken only if no
/// edit has been made to its graph since but through it ([`SGraph::generation`]). A clone of the
/// session keeps none.
#[derive(Default)]
pub struct Kept {
    editors: Vec<Option<Editor>>,
    /// Per graph, its Kahn order and its reverse-DFS order, each with the graph's generation when
    /// it was computed ([`order_of`]).
    orders: Vec<[Option<HeldOrder>; 2]>,
}

/// An order as [`Kept`] holds it: the graph's generation when it was computed, and the order.
type HeldOrder = (u64, Vec<usize>);

/// Which of the two node orders ORT uses ([`crate::session::order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Kahn's, lowest index first (`Graph::Resolve`).
    Kahn = 0,
    /// The reverse DFS from the leaves (`GraphViewer`).
    Dfs = 1,
}

impl Order {
    /// Computes the order of graph `gi`: from the producers of the editor kept for the graph,
    /// where there is a current one, else from a producer index built for it.
    pub fn compute(self, session: &Session, gi: usize) -> Vec<usize> {
        use crate::session::order as o;
        match (Editor::peek(session, gi), self) {
            (Some(ed), Order::Kahn) => {
                o::topological_order_by(session, gi, &|v| ed.producer(session, v))
            }
            (Some(ed), Order::Dfs) => {
                o::ort_topological_order_by(session, gi, &|v| ed.producer(session, v))
            }
            (None, Order::Kahn) => o::topological_order(session, gi),
            (None, Order::Dfs) => o::ort_topological_order(session, gi),
        }
    }
}

/// The order `which` of graph `gi` the session holds, where the graph had no edit since it was
/// computed.
pub fn current_order(session: &Session, gi: usize, which: Order) -> Option<&[usize]> {
    let generation = session.graphs.get(gi)?.generation;
    match session.kept.orders.get(gi)?[which as usize].as_ref() {
        Some((g, order)) if *g == generation => Some(order),
        _ => None,
    }
}

/// A copy of the order `which` of graph `gi` the session holds, where the graph had no edit
/// since it was computed; checked against the order computed afresh where [`check_hand_overs`]
/// asks it.
pub fn held_order(session: &Session, gi: usize, which: Order) -> Option<Vec<usize>> {
    let order = current_order(session, gi, which)?.to_vec();
    if CHECK_HAND_OVERS.load(Ordering::Relaxed) {
        let agrees = order == which.compute(session, gi);
        ORDERS_REUSED[usize::from(!agrees)].fetch_add(1, Ordering::Relaxed);
        debug_assert!(
            agrees,
            "the {which:?} order kept for graph {gi} is not the graph's"
        );
    }
    Some(order)
}

/// Records `order` as graph `gi`'s order `which` as the graph is now (a caller that computed it
/// itself, beside other work).
pub fn remember_order(session: &mut Session, gi: usize, which: Order, order: &[usize]) {
    let Some(generation) = session.graphs.get(gi).map(|g| g.generation) else {
        return;
    };
    let orders = &mut session.kept.orders;
    if orders.len() <= gi {
        orders.resize_with(session.graphs.len().max(gi + 1), Default::default);
    }
    orders[gi][which as usize] = Some((generation, order.to_vec()));
}

/// Graph `gi`'s order `which`: the one the session holds where the graph had no edit since it
/// was computed ([`SGraph::generation`]), else computed now and held for the next pass. Of the
/// passes after partitioning most change nothing, and each walks an order of its own.
pub fn order_of(session: &mut Session, gi: usize, which: Order) -> Vec<usize> {
    if let Some(order) = held_order(session, gi, which) {
        return order;
    }
    let order = which.compute(session, gi);
    remember_order(session, gi, which, &order);
    order
}

impl Clone for Kept {
    fn clone(&self) -> Kept {
        Kept::default()
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let editors: Vec<usize> = (0..self.editors.len())
            .filter(|&gi| self.editors[gi].is_some())
            .collect();
        let orders: Vec<usize> = (0..self.orders.len())
            .filter(|&gi| self.orders[gi].iter().any(Option::is_some))
            .collect();
        f.debug_struct("Kept")
            .field("editors", &editors)
            .field("orders", &orders)
            .finish()
    }
}

/// One graph's producer/consumer index, and the edits that keep it current.
#[derive(Debug)]
pub struct Editor {
    /// The graph edited (an index into [`Session::graphs`]).
    pub gi: usize,
    /// The graph's [`SGraph::generation`] after the last edit made through this editor, while
    /// every edit of the graph since the editor was built went through it; [`STALE`] once one
    /// did not.
    generation: u64,
    /// The index: built with the editor, or, for an editor built [`Editor::lazy`], at its first
    /// lookup, from the graph as the edits made through it left it; kept by every edit from
    /// then on.
    index: std::sync::OnceLock<Index>,
    /// The graph's outputs (a value read from outside the graph).
    outputs: SymSet<Sym>,
    /// Each node's op, by node index, up to the last node [`Editor::ops_of`] or an edit saw
    /// (a node's op never changes in place): a pass that starts only from some ops reads this
    /// array, not each node, to pass over the others.
    ops: Vec<Sym>,
    /// Live nodes per op, where the editor was built counting them; kept by the edits.
    op_counts: Option<SymMap<Sym, usize>>,
    /// The graph's taken names, counted, from the first name asked of the editor on; kept by
    /// the edits.
    taken: Option<Taken>,
}

impl Editor {
    /// What the editor of graph `gi` indexes besides its producers: the readers of each value
    /// of its live nodes, and, if `count_ops`, its live nodes per op (see
    /// [`Editor::op_count`]); one walk of the nodes, which may run beside an order's.
    pub fn reads_of(session: &Session, gi: usize, count_ops: bool) -> Reads {
        let g = &session.graphs[gi];
        let mut readers = ReadTable::for_graph(g);
        let mut counts: SymMap<Sym, usize> = SymMap::default();
        let mut ops = Vec::new();
        if count_ops {
            ops.reserve(g.nodes.len());
            ops.extend(g.nodes.iter().map(|n| n.op));
        }
        // A graph's nodes are walked in order: every list comes out sorted, but where a node
        // reads a value at two positions of one list twice (never: positions differ).
        let mut unsorted = Vec::new();
        for (i, n) in g.live_nodes() {
            Self::note_reads(&mut readers, i, n, &mut unsorted);
            if count_ops {
                *counts.entry(n.op).or_default() += 1;
            }
        }
        Reads {
            readers,
            ops,
            op_counts: count_ops.then_some(counts),
        }
    }

    /// The editor of graph `gi` from its producers (those of its live nodes, as
    /// [`Producers::of`] finds them, which an order may have been built from already) and what
    /// [`Editor::reads_of`] found.
    pub fn from_parts(session: &Session, gi: usize, producer: Producers, reads: Reads) -> Editor {
        Editor {
            gi,
            generation: session.graphs[gi].generation,
            index: std::sync::OnceLock::from(Index {
                producer,
                readers: reads.readers,
                stale: SymMap::default(),
                unsorted: Vec::new(),
            }),
            outputs: session.graphs[gi].outputs.iter().copied().collect(),
            ops: reads.ops,
            op_counts: reads.op_counts,
            taken: None,
        }
    }

    /// The editor of graph `gi`, with no index until its first lookup: a pass that only edits
    /// (appends nodes, removes or rewires nodes it found itself) builds none, and its edits cost
    /// what writing them into the graph costs.
    pub fn lazy(session: &Session, gi: usize) -> Editor {
        Editor {
            gi,
            generation: session.graphs[gi].generation,
            index: std::sync::OnceLock::new(),
            outputs: session.graphs[gi].outputs.iter().copied().collect(),
            ops: Vec::new(),
            op_counts: None,
            taken: None,
        }
    }

    /// The index, built now from the graph if it has not been.
    fn index(&self, session: &Session) -> &Index {
        self.index.get_or_init(|| Index::of(session, self.gi))
    }

    /// The editor of graph `gi`, a new one: see [`Editor::open`] for one a pass kept.
    pub fn of(session: &Session, gi: usize) -> Editor {
        let reads = Self::reads_of(session, gi, false);
        Self::from_parts(session, gi, Producers::of(session, gi), reads)
    }

    /// The editor of graph `gi`: the one the last pass over the graph kept, where no edit was
    /// made to the graph since but through it ([`Editor::kept`]), else a new one.
    pub fn open(session: &mut Session, gi: usize) -> Editor {
        Self::kept(session, gi).unwrap_or_else(|| Self::of(session, gi))
    }

    /// The editor a pass kept for graph `gi` ([`Editor::keep`]), if every edit of the graph
    /// since went through it. Handed over as a fresh editor of the graph would be: the reads an
    /// edit appended out of order sorted, no names counted (the graph's initializers, which
    /// name generation reads, change outside the editors), the graph's outputs read again.
    pub fn kept(session: &mut Session, gi: usize) -> Option<Editor> {
        let mut ed = session.kept.editors.get_mut(gi)?.take()?;
        if ed.generation != session.graphs[gi].generation {
            return None;
        }
        let g = &session.graphs[gi];
        let ix = ed.index.get_mut()?;
        // Each list once, however many reads an edit appended to it out of order.
        let mut unsorted = std::mem::take(&mut ix.unsorted);
        unsorted.sort_unstable_by_key(|v| v.id());
        unsorted.dedup();
        for v in unsorted {
            if let Some(list) = ix.readers.get_mut(v) {
                list.retain(|r| r.holds(g, v));
                list.sort_unstable();
                list.dedup();
            }
            ix.stale.remove(&v);
        }
        ed.taken = None;
        ed.outputs = g.outputs.iter().copied().collect();
        ed.ops_of(session);
        if CHECK_HAND_OVERS.load(Ordering::Relaxed) {
            let agrees = ed.agrees_with(session);
            HAND_OVERS[usize::from(!agrees)].fetch_add(1, Ordering::Relaxed);
            debug_assert!(
                agrees,
                "the editor kept for graph {gi} does not index it as a fresh one would"
            );
        }
        Some(ed)
    }

    /// The editor kept for graph `gi`, to look values up in without taking it, where every edit
    /// of the graph since went through it.
    pub fn peek(session: &Session, gi: usize) -> Option<&Editor> {
        let ed = session.kept.editors.get(gi)?.as_ref()?;
        (ed.generation == session.graphs[gi].generation && ed.index.get().is_some()).then_some(ed)
    }

    /// Keeps the editor for the next pass over its graph ([`Editor::open`]), if it has an
    /// index and every edit of the graph since it was built went through it.
    pub fn keep(self, session: &mut Session) {
        let gi = self.gi;
        if self.index.get().is_none() || self.generation != session.graphs[gi].generation {
            return;
        }
        let kept = &mut session.kept.editors;
        if kept.len() <= gi {
            kept.resize_with(session.graphs.len().max(gi + 1), || None);
        }
        kept[gi] = Some(self);
    }

    /// The live nodes of graph `gi` per op (one walk of the nodes, which may run beside an
    /// order's), for [`Editor::set_op_counts`].
    pub fn op_counts_of(session: &Session, gi: usize) -> SymMap<Sym, usize> {
        let mut counts: SymMap<Sym, usize> = SymMap::default();
        for (_, n) in session.graphs[gi].live_nodes() {
            *counts.entry(n.op).or_default() += 1;
        }
        counts
    }

    /// The live nodes of the graph per op, as [`Editor::op_counts_of`] counted them, kept by the
    /// edits from here on.
    pub fn set_op_counts(&mut self, counts: SymMap<Sym, usize>) {
        self.op_counts = Some(counts);
    }

    /// Whether the editor answers every lookup as a fresh editor of the graph would: the same
    /// producer and the same reads, in the same order, of every value a live node reads or
    /// writes; its op array every node's op (a pass that starts from some ops reads it), and
    /// its op counts, where it keeps them, those of the graph. What [`Editor::kept`] checks in a
    /// debug build.
    pub fn agrees_with(&self, session: &Session) -> bool {
        let fresh = Editor::from_parts(
            session,
            self.gi,
            Producers::of(session, self.gi),
            Self::reads_of(session, self.gi, self.op_counts.is_some()),
        );
        let g = &session.graphs[self.gi];
        let reads_agree = g.live_nodes().all(|(_, n)| {
            n.inputs
                .iter()
                .chain(&n.implicit_inputs)
                .all(|&v| v.is_empty() || self.reads(session, v).eq(fresh.reads(session, v)))
                && n.outputs.iter().all(|&v| {
                    v.is_empty() || self.producer(session, v) == fresh.producer(session, v)
                })
        });
        let ops_agree = self.ops.len() == g.nodes.len()
            && self.ops.iter().zip(&g.nodes).all(|(&op, n)| op == n.op);
        let counts_agree = match (&self.op_counts, &fresh.op_counts) {
            (Some(a), Some(b)) => {
                a.iter()
                    .all(|(op, &k)| b.get(op).copied().unwrap_or(0) == k)
                    && b.iter()
                        .all(|(op, &k)| a.get(op).copied().unwrap_or(0) == k)
            }
            _ => true,
        };
        reads_agree && ops_agree && counts_agree && self.outputs == fresh.outputs
    }

    /// Records an edit of the graph: its [`SGraph::generation`] moves on, and this editor's
    /// with it while the editor is current.
    fn touch(&mut self, session: &mut Session) {
        self.generation = bump(&mut session.graphs[self.gi], self.generation);
    }

    /// Records that node `i` reads each of `n`'s inputs, one entry per position; the values
    /// whose lists that left out of order are added to `unsorted`.
    fn note_reads(readers: &mut ReadTable, i: usize, n: &SNode, unsorted: &mut Vec<Sym>) {
        let explicit = n.inputs.iter().enumerate().map(|(k, v)| (k, v, false));
        let implicit = n.implicit_inputs.iter().enumerate();
        for (k, &name, imp) in explicit.chain(implicit.map(|(k, v)| (k, v, true))) {
            if let (false, Some(r)) = (name.is_empty(), Read::new(i, k, imp))
                && !readers.push(name, r)
            {
                unsorted.push(name);
            }
        }
    }

    /// The reads of `v` that still hold, as recorded (a read an edit recorded twice comes
    /// twice).
    fn reads<'s>(&'s self, session: &'s Session, v: Sym) -> impl Iterator<Item = Read> + 's {
        let g = &session.graphs[self.gi];
        self.index(session)
            .readers
            .get(v)
            .map(|l| l.as_slice())
            .unwrap_or_default()
            .iter()
            .copied()
            .filter(move |r| r.holds(g, v))
    }

    /// Whether `v` is one of the graph's outputs.
    pub fn is_output(&self, v: Sym) -> bool {
        self.outputs.contains(&v)
    }

    /// The live node that produces `v` in this graph.
    pub fn producer(&self, session: &Session, v: Sym) -> Option<usize> {
        self.index(session).producer.get(v).filter(|&p| {
            let n = &session.graphs[self.gi].nodes[p];
            !n.removed && n.outputs.contains(&v)
        })
    }

    /// The live nodes that read `v` (explicitly or through a subgraph), without collecting them,
    /// in the order they started reading it: a node once for the positions it was built or
    /// added reading `v` at (recorded together), again for each position an edit made it read
    /// `v` at later.
    pub fn readers<'s>(&'s self, session: &'s Session, v: Sym) -> impl Iterator<Item = usize> + 's {
        let mut last = u32::MAX;
        self.reads(session, v).filter_map(move |r| {
            let new = r.node != last;
            last = r.node;
            new.then_some(r.node as usize)
        })
    }

    /// The live nodes that read `v`, ascending, each once.
    pub fn users(&self, session: &Session, v: Sym) -> Vec<usize> {
        let mut out: Vec<usize> = self.readers(session, v).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The edges out of `v`: each input position of a live node that reads it (an implicit
    /// read as position `usize::MAX`), in ORT's edge order (by node, then position).
    pub fn reader_slots(&self, session: &Session, v: Sym) -> Vec<EdgeEnd> {
        let mut out: Vec<EdgeEnd> = self.reads(session, v).map(Read::edge).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The edges out of `v` into explicit inputs ([`Editor::reader_slots`] less the reads by
    /// subgraphs), in ORT's edge order.
    pub fn consumers(&self, session: &Session, v: Sym) -> Vec<EdgeEnd> {
        let mut out = self.reader_slots(session, v);
        out.retain(|e| e.arg != usize::MAX);
        out
    }

    /// The live nodes whose subgraphs read `v`.
    pub fn implicit_readers(&self, session: &Session, v: Sym) -> usize {
        let mut nodes: Vec<u32> = self
            .reads(session, v)
            .filter(|r| r.implicit())
            .map(|r| r.node)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes.len()
    }

    /// The edge into `v`: its live producer and the position of `v` among that node's outputs.
    pub fn producer_slot(&self, session: &Session, v: Sym) -> Option<EdgeEnd> {
        let p = self.producer(session, v)?;
        let k = session.graphs[self.gi].nodes[p]
            .outputs
            .iter()
            .position(|&o| o == v)?;
        Some(EdgeEnd::new(p, k))
    }

    /// ORT's output edge count of `v` (the input positions of live nodes reading it, a read by a
    /// node's subgraphs counting one: [`Editor::reader_slots`]), counted up to `limit`: a
    /// larger count comes back as `limit + 1`. What the transformers ask is whether a value
    /// has one edge, or as many as they found; asked of a value a thousand nodes read, by each
    /// of them, an exact count would cost a thousand each time.
    pub fn edge_count(&self, session: &Session, v: Sym, limit: usize) -> usize {
        if limit >= SCAN_LIMIT {
            return self.reader_slots(session, v).len().min(limit + 1);
        }
        // The distinct edges met so far, at most `limit + 1`: a short list to scan.
        let mut seen: smallvec::SmallVec<[EdgeEnd; SCAN_LIMIT]> = smallvec::SmallVec::new();
        for e in self.reads(session, v).map(Read::edge) {
            if !seen.contains(&e) {
                seen.push(e);
                if seen.len() > limit {
                    return limit + 1;
                }
            }
        }
        seen.len()
    }

    /// `Node::GetOutputEdgesCount`: [`Editor::edge_count`] over node `n`'s outputs, counted up to
    /// `limit` (a larger count comes back as `limit + 1`).
    pub fn node_output_edges(&self, session: &Session, n: &SNode, limit: usize) -> usize {
        let mut count = 0usize;
        for &o in n.outputs.iter().filter(|o| !o.is_empty()) {
            count += self.edge_count(session, o, limit - count.min(limit));
            if count > limit {
                return limit + 1;
            }
        }
        count
    }

    /// `Node::GetInputEdgesCount`: node `n`'s inputs (explicit and implicit) that a live node of
    /// the graph produces.
    pub fn node_input_edges(&self, session: &Session, n: &SNode) -> usize {
        n.inputs
            .iter()
            .chain(&n.implicit_inputs)
            .filter(|&&i| !i.is_empty() && self.producer(session, i).is_some())
            .count()
    }

    /// `Graph::NodeProducesGraphOutput`.
    pub fn produces_graph_output(&self, n: &SNode) -> bool {
        n.outputs
            .iter()
            .any(|&o| !o.is_empty() && self.is_output(o))
    }

    /// Whether a live node reads `v`.
    pub fn has_users(&self, session: &Session, v: Sym) -> bool {
        self.readers(session, v).next().is_some()
    }

    /// The one live node that reads `v`, if exactly one does.
    pub fn sole_user(&self, session: &Session, v: Sym) -> Option<usize> {
        let mut users = self.readers(session, v);
        let first = users.next()?;
        users.all(|k| k == first).then_some(first)
    }

    /// One of `v`'s recorded reads no longer holds (its node was removed, or reads another
    /// value there): its list is compacted once more than half of it is stale, so that each
    /// stale read is passed over a bounded number of times, whatever the order of the edits.
    fn staled(&mut self, session: &Session, v: Sym) {
        let Some(ix) = self.index.get_mut() else {
            return;
        };
        let Some(list) = ix.readers.get_mut(v).filter(|l| l.len() > COMPACT_MIN) else {
            return;
        };
        let count = ix.stale.entry(v).or_default();
        *count += 1;
        if *count as usize * 2 > list.len() {
            let g = &session.graphs[self.gi];
            list.retain(|r| r.holds(g, v));
            *count = 0;
        }
    }

    /// Records that node `node` reads `v` at position `slot` (of its implicit inputs if
    /// `implicit`).
    fn add_use(&mut self, v: Sym, node: usize, slot: usize, implicit: bool) {
        if let (Some(ix), false, Some(r)) = (
            self.index.get_mut(),
            v.is_empty(),
            Read::new(node, slot, implicit),
        ) && !ix.readers.push(v, r)
        {
            ix.unsorted.push(v);
        }
    }

    /// Appends `node` to the graph and indexes it; its index.
    pub fn add(&mut self, session: &mut Session, node: SNode) -> usize {
        self.touch(session);
        let g = &mut session.graphs[self.gi];
        let ni = g.nodes.len();
        self.register(ni, &node);
        if let (Some(t), false) = (self.taken.as_mut(), node.removed) {
            t.node(&node, true);
        }
        g.nodes.push(node);
        ni
    }

    /// Indexes node `ni`, about to be appended by [`Editor::add`].
    fn register(&mut self, ni: usize, n: &SNode) {
        if let Some(ix) = self.index.get_mut() {
            for &o in n.outputs.iter().filter(|o| !o.is_empty()) {
                ix.producer.insert(o, ni);
            }
            Self::note_reads(&mut ix.readers, ni, n, &mut ix.unsorted);
        }
        if self.ops.len() == ni {
            self.ops.push(n.op);
        }
        if let Some(c) = self.op_counts.as_mut() {
            *c.entry(n.op).or_default() += 1;
        }
    }

    /// Marks node `ni` removed, and every node of its subgraphs: it produces nothing from
    /// here on.
    pub fn remove(&mut self, session: &mut Session, ni: usize) {
        let n = &mut session.graphs[self.gi].nodes[ni];
        let was_live = !n.removed;
        if let (Some(t), true) = (self.taken.as_mut(), was_live) {
            t.node(n, false);
        }
        n.removed = true;
        session.graphs[self.gi].edited |= was_live;
        if was_live {
            self.touch(session);
        }
        let n = &session.graphs[self.gi].nodes[ni];
        if let Some(ix) = self.index.get_mut() {
            for &o in &n.outputs {
                if ix.producer.get(o) == Some(ni) {
                    ix.producer.remove(o);
                }
            }
        }
        // Its reads went stale: counted only where there is an index to compact.
        if self.index.get().is_some() {
            let read: smallvec::SmallVec<[Sym; 4]> =
                n.inputs.iter().chain(&n.implicit_inputs).copied().collect();
            for v in read {
                self.staled(session, v);
            }
        }
        let n = &session.graphs[self.gi].nodes[ni];
        if let Some(k) = self.op_counts.as_mut().and_then(|c| c.get_mut(&n.op)) {
            *k = k.saturating_sub(1);
        }
        let mut subs: Vec<usize> = n.subgraphs.iter().map(|(_, s)| *s).collect();
        // The subgraphs below, each graph once (a graph has one parent node).
        while let Some(sg) = subs.pop() {
            let g = &mut session.graphs[sg];
            if g.nodes.iter().any(|n| !n.removed) {
                g.edited = true;
                g.touch();
            }
            for n in g.nodes.iter_mut().filter(|n| !n.removed) {
                n.removed = true;
                subs.extend(n.subgraphs.iter().map(|(_, s)| *s));
            }
        }
    }

    /// Marks node `ni` removed, its subgraphs left as they are: they went with a copy of it to
    /// another graph (an inlined `If` branch's nodes move into the `If`'s graph).
    pub fn move_out(&mut self, session: &mut Session, ni: usize) {
        session.graphs[self.gi].nodes[ni].subgraphs.clear();
        self.remove(session, ni);
    }

    /// Input `at.arg` of node `at.node` reads `v` from here on (empty inputs appended up to it,
    /// as ORT's optional inputs left out).
    pub fn set_input(&mut self, session: &mut Session, at: EdgeEnd, v: Sym) {
        let n = &mut session.graphs[self.gi].nodes[at.node];
        let grown = n.inputs.len() <= at.arg;
        if grown {
            n.inputs.resize(at.arg + 1, Sym::EMPTY);
        }
        let old = std::mem::replace(&mut n.inputs[at.arg], v);
        if grown || old != v {
            session.graphs[self.gi].edited = true;
            self.touch(session);
        }
        if old != v {
            let n = &session.graphs[self.gi].nodes[at.node];
            if let (Some(t), false) = (self.taken.as_mut(), n.removed) {
                t.value(old, false);
                t.value(v, true);
            }
            self.add_use(v, at.node, at.arg, false);
            self.staled(session, old);
        }
    }

    /// Output `at.arg` of node `at.node` is `v` from here on (empty outputs appended up to it,
    /// as ORT's optional outputs left out).
    pub fn set_output(&mut self, session: &mut Session, at: EdgeEnd, v: Sym) {
        let n = &mut session.graphs[self.gi].nodes[at.node];
        let live = !n.removed;
        let grown = n.outputs.len() <= at.arg;
        if grown {
            n.outputs.resize(at.arg + 1, Sym::EMPTY);
        }
        if let Some(o) = n.outputs.get_mut(at.arg) {
            let old = std::mem::replace(o, v);
            if grown || old != v {
                session.graphs[self.gi].edited = true;
                self.touch(session);
            }
            if let (Some(t), true) = (self.taken.as_mut(), live) {
                t.value(old, false);
                t.value(v, true);
            }
            if let Some(ix) = self.index.get_mut() {
                if ix.producer.get(old) == Some(at.node) {
                    ix.producer.remove(old);
                }
                ix.producer.insert(v, at.node);
            }
        }
    }

    /// Node `node`'s implicit input `old` is `new` from here on, in its list of implicit inputs
    /// only: the reads inside its subgraphs are left as they are (see [`Editor::replace_reads`]
    /// for a rename that follows them).
    pub fn set_implicit_input(&mut self, session: &mut Session, node: usize, old: Sym, new: Sym) {
        let n = &mut session.graphs[self.gi].nodes[node];
        let mut at: smallvec::SmallVec<[usize; 2]> = smallvec::SmallVec::new();
        for (k, i) in n.implicit_inputs.iter_mut().enumerate() {
            if *i == old && old != new {
                *i = new;
                at.push(k);
            }
        }
        if !at.is_empty() {
            self.touch(session);
        }
        for k in at {
            self.add_use(new, node, k, true);
        }
    }

    /// Every live node of this graph that reads `old` reads `new` instead, explicitly and in its
    /// subgraphs (down to a subgraph that defines `old` itself); the nodes changed, ascending.
    pub fn replace_reads(&mut self, session: &mut Session, old: Sym, new: Sym) -> Vec<usize> {
        if old == new {
            return self.users(session, old);
        }
        let mut reads: Vec<Read> = self.reads(session, old).collect();
        reads.sort_unstable();
        reads.dedup();
        let mut users: Vec<usize> = reads.iter().map(|r| r.node as usize).collect();
        users.dedup();
        if !reads.is_empty() {
            self.touch(session);
        }
        for r in reads {
            let k = r.node as usize;
            let slot = (r.slot & !Read::IMPLICIT) as usize;
            let n = &mut session.graphs[self.gi].nodes[k];
            if r.implicit() {
                n.implicit_inputs[slot] = new;
                // The subgraphs once per node: at the last of its implicit reads of `old`.
                if !n.implicit_inputs.contains(&old) {
                    let subs: Vec<usize> = n.subgraphs.iter().map(|(_, s)| *s).collect();
                    for sg in subs {
                        rename_in_subgraph(session, sg, old, new, 0);
                    }
                }
            } else {
                n.inputs[slot] = new;
                session.graphs[self.gi].edited = true;
                if let Some(t) = self.taken.as_mut() {
                    t.value(old, false);
                    t.value(new, true);
                }
            }
            self.add_use(new, k, slot, r.implicit());
        }
        // Every read of `old` that held now reads `new`: its list holds nothing.
        if let Some(ix) = self.index.get_mut() {
            ix.readers.clear(old);
            ix.stale.remove(&old);
        }
        users
    }

    /// Every explicit input of a live node that `renames` names reads its replacement instead:
    /// one walk of the graph, for many values at once.
    pub fn rename_inputs(&mut self, session: &mut Session, renames: &SymMap<Sym, Sym>) {
        let g = &mut session.graphs[self.gi];
        let mut renamed: Vec<(Sym, usize)> = Vec::new();
        let mut old: Vec<Sym> = Vec::new();
        for (k, n) in g.nodes.iter_mut().enumerate() {
            if n.removed {
                continue;
            }
            renamed.clear();
            for (slot, i) in n.inputs.iter_mut().enumerate() {
                if let Some(&rep) = renames.get(i).filter(|&&rep| rep != *i) {
                    if let Some(t) = self.taken.as_mut() {
                        t.value(*i, false);
                        t.value(rep, true);
                    }
                    old.push(*i);
                    *i = rep;
                    renamed.push((rep, slot));
                }
            }
            for &(rep, slot) in &renamed {
                self.add_use(rep, k, slot, false);
            }
        }
        if !old.is_empty() {
            session.graphs[self.gi].edited = true;
            self.touch(session);
        }
        for v in old {
            self.staled(session, v);
        }
    }

    /// Starts naming as ORT's name generation on the graph now (a fresh
    /// [`crate::session::names::NameGen`]): what [`Editor::node_name`] and
    /// [`Editor::value_name`] generated before is taken from here on only if the graph holds it
    /// (a node's name, a value a live node reads or writes, an initializer) or it was recorded
    /// as generated ([`SGraph::generated_names`]). The first call counts the graph's names (one
    /// walk); the edits keep the counts from then on, so that a pass that names something at
    /// each of many matches does not walk the graph at each.
    pub fn begin_names(&mut self, session: &Session) {
        match self.taken.as_mut() {
            Some(t) => t.begin(),
            None => self.taken = Some(Taken::of(&session.graphs[self.gi])),
        }
    }

    /// ORT's `Graph::GenerateNodeName` within a naming begun by [`Editor::begin_names`]: `base`
    /// if no live node has that name and none was generated, else `<base>_token_<k>` on the
    /// graph's counter.
    pub fn node_name(&mut self, session: &mut Session, base: &str) -> Sym {
        let g = &mut session.graphs[self.gi];
        self.taken
            .get_or_insert_with(|| Taken::of(g))
            .node_name(g, base)
    }

    /// ORT's `Graph::GenerateNodeArgName` within a naming begun by [`Editor::begin_names`].
    pub fn value_name(&mut self, session: &mut Session, base: &str) -> Sym {
        let g = &mut session.graphs[self.gi];
        self.taken
            .get_or_insert_with(|| Taken::of(g))
            .value_name(g, base)
    }

    /// ORT's `Graph::GenerateNodeName` for one name: `base` if no live node has that name and
    /// none was generated, else `<base>_token_<k>`; begun afresh and recorded as generated.
    pub fn generate_node_name(&mut self, session: &mut Session, base: &str) -> Sym {
        self.begin_names(session);
        let name = self.node_name(session, base);
        session.graphs[self.gi].generated_names.insert(name);
        name
    }

    /// Brings the op array up to the graph: the nodes appended since the last call (or edit)
    /// added.
    pub fn ops_of(&mut self, session: &Session) {
        let nodes = &session.graphs[self.gi].nodes;
        let known = self.ops.len().min(nodes.len());
        self.ops.truncate(known);
        self.ops.extend(nodes[known..].iter().map(|n| n.op));
    }

    /// Node `ni`'s op as the op array holds it (see [`Editor::ops_of`]).
    pub fn op_at(&self, ni: usize) -> Option<Sym> {
        self.ops.get(ni).copied()
    }

    /// Every value a node of op `op` reads (removed nodes included), found from the op array:
    /// only those nodes are read.
    pub fn read_by_op(&self, session: &Session, op: Sym) -> SymSet<Sym> {
        let g = &session.graphs[self.gi];
        self.ops
            .iter()
            .enumerate()
            .filter(|&(_, &o)| o == op)
            .filter_map(|(k, _)| g.nodes.get(k))
            .flat_map(|n| n.inputs.iter().chain(&n.implicit_inputs).copied())
            .collect()
    }

    /// The live nodes of op `op` (0 unless the editor was built counting them).
    pub fn op_count(&self, op: Sym) -> usize {
        self.op_counts
            .as_ref()
            .and_then(|c| c.get(&op))
            .copied()
            .unwrap_or(0)
    }
}

/// The generation of an editor some edit of its graph did not go through.
const STALE: u64 = u64::MAX;

/// The generation an editor at `generation` is at after an edit of `g` made through it: the
/// graph's next one if the editor was current, else [`STALE`].
fn bump(g: &mut SGraph, generation: u64) -> u64 {
    let current = generation == g.generation;
    g.touch();
    if current { g.generation } else { STALE }
}

/// The reads a value's list holds before [`Editor`] counts its stale ones (a shorter list is
/// read whole at little cost).
const COMPACT_MIN: usize = 16;

/// Up to this limit [`Editor::edge_count`] scans a short list of the edges it met; past it, it
/// sorts them.
const SCAN_LIMIT: usize = 8;

/// The deepest subgraph nesting a rename follows (the reader bounds nesting well below).
const MAX_RENAME_DEPTH: usize = 256;

/// Renames every read of `old` to `new` in subgraph `sg` and the subgraphs below it, unless `sg`
/// defines `old` itself (an input or an initializer of that name shadows the outer value).
pub fn rename_in_subgraph(session: &mut Session, sg: usize, old: Sym, new: Sym, depth: usize) {
    let g = &session.graphs[sg];
    if depth > MAX_RENAME_DEPTH || g.inputs.contains(&old) || g.initializers.contains_key(&old) {
        return;
    }
    let mut subs = Vec::new();
    let g: &mut SGraph = &mut session.graphs[sg];
    let mut renamed = false;
    for n in g.nodes.iter_mut() {
        for i in n.inputs.iter_mut() {
            if *i == old {
                *i = new;
                g.edited = true;
                renamed = true;
            }
        }
        for i in n.implicit_inputs.iter_mut() {
            if *i == old {
                *i = new;
                renamed = true;
            }
        }
        subs.extend(n.subgraphs.iter().map(|(_, s)| *s));
    }
    for o in g.outputs.iter_mut() {
        if *o == old {
            *o = new;
            renamed = true;
        }
    }
    if renamed {
        g.touch();
    }
    for s in subs {
        rename_in_subgraph(session, s, old, new, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str) -> Sym {
        Sym::new(name)
    }

    /// A `Relu` node `name` from `x` to `y`.
    fn relu(name: &str, x: &str, y: &str) -> SNode {
        SNode::plain(
            s(name),
            s("Relu"),
            Sym::AI_ONNX,
            Some(14),
            vec![s(x)],
            vec![s(y)],
        )
    }

    /// `a -> A -> b -> B -> c`, `b -> C -> d`: three nodes, `c` and `d` the graph's outputs.
    fn chain() -> Session {
        let node = |name: &str, op: &str, i: &[&str], o: &[&str]| {
            SNode::plain(
                s(name),
                s(op),
                Sym::AI_ONNX,
                Some(14),
                i.iter().map(|v| s(v)).collect(),
                o.iter().map(|v| s(v)).collect(),
            )
        };
        let mut session = Session::of_nodes(vec![
            node("A", "Relu", &["a"], &["b"]),
            node("B", "Neg", &["b", "b"], &["c"]),
            node("C", "Relu", &["b"], &["d"]),
        ]);
        session.graphs[0].outputs = vec![s("c"), s("d")];
        session
    }

    #[test]
    fn the_index_answers_as_the_graph_reads() {
        let session = chain();
        let ed = Editor::of(&session, 0);
        assert_eq!(ed.producer(&session, s("b")), Some(0));
        assert_eq!(ed.producer(&session, s("a")), None);
        // A node reading a value twice is one reader.
        assert_eq!(ed.users(&session, s("b")), vec![1, 2]);
        assert_eq!(ed.sole_user(&session, s("b")), None);
        assert_eq!(ed.sole_user(&session, s("a")), Some(0));
        assert!(ed.is_output(s("c")) && !ed.is_output(s("b")));
        let counted = Editor::from_parts(
            &session,
            0,
            Producers::of(&session, 0),
            Editor::reads_of(&session, 0, true),
        );
        assert_eq!(counted.op_count(s("Relu")), 2);
        assert_eq!(counted.op_at(1), Some(s("Neg")));
        assert_eq!(ed.op_count(s("Relu")), 0, "not counted unless asked");
    }

    #[test]
    fn edits_keep_the_index_current() {
        let mut session = chain();
        let mut ed = Editor::from_parts(
            &session,
            0,
            Producers::of(&session, 0),
            Editor::reads_of(&session, 0, true),
        );
        // C reads `a` instead of `b`; B alone reads `b`.
        ed.set_input(&mut session, EdgeEnd::new(2, 0), s("a"));
        assert_eq!(ed.users(&session, s("a")), vec![0, 2]);
        assert_eq!(ed.sole_user(&session, s("b")), Some(1));
        // A new node D produces `e` from `c`; B now writes `f`.
        let d = ed.add(&mut session, relu("D", "c", "e"));
        assert_eq!(d, 3);
        assert_eq!(ed.op_count(s("Relu")), 3);
        assert_eq!(ed.op_at(3), Some(s("Relu")));
        ed.set_output(&mut session, EdgeEnd::new(1, 0), s("f"));
        assert_eq!(ed.producer(&session, s("f")), Some(1));
        assert_eq!(ed.producer(&session, s("c")), None, "B no longer writes c");
        assert_eq!(ed.producer(&session, s("e")), Some(3));
        // Every reader of `a` reads `g` instead; a removed node neither produces nor reads.
        assert_eq!(ed.replace_reads(&mut session, s("a"), s("g")), vec![0, 2]);
        assert!(!ed.has_users(&session, s("a")));
        assert_eq!(ed.users(&session, s("g")), vec![0, 2]);
        ed.remove(&mut session, 0);
        assert_eq!(ed.producer(&session, s("b")), None);
        assert_eq!(ed.users(&session, s("g")), vec![2]);
        assert_eq!(ed.op_count(s("Relu")), 2);
        // Many values at once, each reading node once.
        let renames: SymMap<Sym, Sym> = [(s("g"), s("h")), (s("b"), s("h"))].into_iter().collect();
        ed.rename_inputs(&mut session, &renames);
        assert_eq!(ed.users(&session, s("h")), vec![1, 2]);
        assert_eq!(session.graphs[0].nodes[1].inputs, vec![s("h"), s("h")]);
    }

    #[test]
    fn edges_are_counted_as_ort_counts_them_up_to_the_limit_asked() {
        let mut session = chain();
        // B reads `b` twice, C once; C's subgraph would count once more.
        session.graphs[0].nodes[2].implicit_inputs = thin_vec::thin_vec![s("b")];
        let ed = Editor::of(&session, 0);
        assert_eq!(ed.edge_count(&session, s("b"), 10), 4);
        assert_eq!(ed.edge_count(&session, s("b"), 4), 4);
        assert_eq!(
            ed.edge_count(&session, s("b"), 1),
            2,
            "past the limit: limit + 1"
        );
        assert_eq!(ed.edge_count(&session, s("a"), 1), 1);
        let a = session.graphs[0].nodes[0].clone();
        assert_eq!(ed.node_output_edges(&session, &a, 9), 4);
        assert_eq!(ed.node_output_edges(&session, &a, 0), 1);
        let slots = ed.reader_slots(&session, s("b"));
        assert_eq!(
            slots,
            vec![
                EdgeEnd::new(1, 0),
                EdgeEnd::new(1, 1),
                EdgeEnd::new(2, 0),
                EdgeEnd::new(2, usize::MAX)
            ]
        );
        assert_eq!(ed.consumers(&session, s("b")).len(), 3);
        assert_eq!(ed.implicit_readers(&session, s("b")), 1);
        assert_eq!(ed.producer_slot(&session, s("c")), Some(EdgeEnd::new(1, 0)));
    }

    /// Whatever the edits since, the editor's counted names come out as a generator built on
    /// the graph at that moment would give them.
    #[test]
    fn names_come_out_as_a_fresh_generator_would_give_them() {
        use crate::session::names::NameGen;
        let mut session = chain();
        let mut ed = Editor::of(&session, 0);
        let bases = ["A", "B", "C", "a", "b", "c", "d", "b_token_0", "e"];
        let check = |ed: &mut Editor, session: &mut Session| {
            let before = session.graphs[0].clone();
            let mut fresh = NameGen::new(&before);
            ed.begin_names(session);
            for base in bases {
                assert_eq!(ed.node_name(session, base), fresh.node(base), "node {base}");
                assert_eq!(
                    ed.value_name(session, base),
                    fresh.value(base),
                    "value {base}"
                );
            }
            assert_eq!(session.graphs[0].name_counter, fresh.counter);
        };
        check(&mut ed, &mut session);
        // C leaves (its name and `d`'s read are free again, `d` stays a graph output); A reads
        // `e`; a node named `e` produces `f`.
        ed.remove(&mut session, 2);
        ed.set_input(&mut session, EdgeEnd::new(0, 0), s("e"));
        let mut n = session.graphs[0].nodes[0].clone();
        (n.name, n.inputs, n.outputs) = (s("e"), vec![s("b")], vec![s("f")]);
        ed.add(&mut session, n);
        check(&mut ed, &mut session);
        // A generated name is taken for good once recorded as generated.
        let g = ed.generate_node_name(&mut session, "C");
        assert!(session.graphs[0].generated_names.contains(&g));
        check(&mut ed, &mut session);
    }

    /// A value that many removed nodes read keeps a short list of reads: lookups do not pass
    /// over the removed ones again and again.
    #[test]
    fn stale_reads_are_compacted_away() {
        let node = |k: usize| {
            SNode::plain(
                Sym::new(&format!("R{k}")),
                s("Relu"),
                Sym::AI_ONNX,
                Some(14),
                vec![s("x")],
                vec![Sym::new(&format!("y{k}"))],
            )
        };
        let mut session = Session::of_nodes((0..40).map(node).collect());
        let mut ed = Editor::of(&session, 0);
        for k in 0..36 {
            ed.remove(&mut session, k);
        }
        assert_eq!(ed.users(&session, s("x")), vec![36, 37, 38, 39]);
        let held = ed
            .index(&session)
            .readers
            .get(s("x"))
            .map_or(0, |l| l.len());
        assert!(held <= COMPACT_MIN, "{held} of 40 reads kept");
        ed.replace_reads(&mut session, s("x"), s("z"));
        assert!(
            ed.index(&session)
                .readers
                .get(s("x"))
                .is_none_or(|l| l.is_empty()),
            "all of x's reads moved"
        );
        assert_eq!(ed.users(&session, s("z")), vec![36, 37, 38, 39]);
    }

    #[test]
    fn an_input_past_the_end_is_appended_with_empty_ones_before_it() {
        let mut session = chain();
        let mut ed = Editor::of(&session, 0);
        ed.set_input(&mut session, EdgeEnd::new(0, 2), s("z"));
        assert_eq!(
            session.graphs[0].nodes[0].inputs,
            vec![s("a"), Sym::EMPTY, s("z")]
        );
        assert_eq!(ed.sole_user(&session, s("z")), Some(0));
    }

    #[test]
    fn a_lazy_editor_indexes_the_graph_its_edits_left() {
        let mut session = chain();
        let mut ed = Editor::lazy(&session, 0);
        assert!(ed.index.get().is_none(), "no index before a lookup");
        // Edits before the first lookup: C reads `a`, a new node D reads `d`, A goes.
        ed.set_input(&mut session, EdgeEnd::new(2, 0), s("a"));
        let d = ed.add(&mut session, relu("D", "d", "e"));
        ed.remove(&mut session, 0);
        assert!(ed.index.get().is_none(), "edits alone build no index");
        // The first lookup indexes the graph as the edits left it ...
        assert_eq!(ed.users(&session, s("a")), vec![2]);
        assert_eq!(ed.producer(&session, s("e")), Some(d));
        assert_eq!(ed.producer(&session, s("b")), None);
        assert!(ed.is_output(s("d")));
        // ... and the edits after it keep the index.
        ed.set_output(&mut session, EdgeEnd::new(d, 0), s("f"));
        assert_eq!(ed.producer(&session, s("f")), Some(d));
        assert_eq!(ed.producer(&session, s("e")), None);
        // A node moved out leaves its subgraphs alone.
        let mut nested = chain();
        let sub = nested.graphs.len();
        nested.graphs.push(SGraph::default());
        nested.graphs[sub].nodes.push(relu("E", "x", "y"));
        nested.graphs[0].nodes[1].subgraphs.push((s("body"), sub));
        let mut ed = Editor::lazy(&nested, 0);
        ed.move_out(&mut nested, 1);
        assert!(nested.graphs[0].nodes[1].removed);
        assert!(nested.graphs[0].nodes[1].subgraphs.is_empty());
        assert!(
            !nested.graphs[sub].nodes[0].removed,
            "the subgraph went elsewhere"
        );
    }

    #[test]
    fn the_dense_and_the_sparse_tables_of_reads_answer_alike() {
        let names: Vec<Sym> = (0..50)
            .map(|k| Sym::new(&format!("read_table_{k}")))
            .collect();
        let mut dense = ReadTable::Dense(Vec::new());
        let mut sparse = ReadTable::Sparse(SymMap::default());
        for (k, &v) in names.iter().enumerate() {
            for t in [&mut dense, &mut sparse] {
                for r in 0..k % 4 {
                    t.push(
                        v,
                        Read::new(r, k, r == 3).unwrap_or(Read { node: 0, slot: 0 }),
                    );
                }
                if k % 7 == 0 {
                    t.clear(v);
                }
            }
        }
        for &v in &names {
            let list = |t: &ReadTable| t.get(v).map(|l| l.to_vec()).unwrap_or_default();
            assert_eq!(list(&dense), list(&sparse), "{v}");
        }
        let v = names[5];
        if let Some(l) = dense.get_mut(v) {
            l.clear();
        }
        assert!(dense.get(v).is_some_and(|l| l.is_empty()));
    }

    #[test]
    fn an_edit_in_place_marks_the_graph_changed_since_its_load() {
        let mut session = chain();
        session.graphs[0].record_loaded();
        let mut ed = Editor::lazy(&session, 0);
        ed.set_input(&mut session, EdgeEnd::new(2, 0), s("b"));
        assert!(
            !session.changed_since_load(),
            "the same value: nothing changed"
        );
        ed.set_input(&mut session, EdgeEnd::new(2, 0), s("a"));
        assert!(session.changed_since_load());
        let mut session = chain();
        session.graphs[0].record_loaded();
        let mut ed = Editor::lazy(&session, 0);
        ed.remove(&mut session, 2);
        assert!(session.graphs[0].edited && session.changed_since_load());
        let mut session = chain();
        session.graphs[0].record_loaded();
        let mut ed = Editor::lazy(&session, 0);
        ed.set_output(&mut session, EdgeEnd::new(0, 0), s("b2"));
        assert!(session.changed_since_load());
    }

    /// The reads of `v` a lookup walks, as (node, position) pairs, in the order it walks them.
    fn walked(ed: &Editor, session: &Session, v: &str) -> Vec<(u32, u32)> {
        ed.reads(session, s(v)).map(|r| (r.node, r.slot)).collect()
    }

    #[test]
    fn a_kept_editor_is_handed_over_as_a_fresh_one_would_index_the_graph() {
        let mut session = chain();
        let mut ed = Editor::open(&mut session, 0);
        // C reads `a`, then `b` again: its read of `b` now comes after B's, twice recorded.
        ed.set_input(&mut session, EdgeEnd::new(2, 0), s("a"));
        ed.set_input(&mut session, EdgeEnd::new(2, 0), s("b"));
        // A reads `b` (ahead of B and C), and a new node reads `b` too.
        ed.set_input(&mut session, EdgeEnd::new(0, 0), s("b"));
        ed.add(&mut session, relu("D", "b", "e"));
        assert_eq!(
            walked(&ed, &session, "b"),
            [(1, 0), (1, 1), (2, 0), (2, 0), (0, 0), (3, 0)]
        );
        ed.keep(&mut session);
        let kept = Editor::kept(&mut session, 0);
        assert!(kept.is_some(), "no edit since but through it: handed over");
        let Some(mut kept) = kept else {
            return;
        };
        assert!(kept.agrees_with(&session));
        assert_eq!(
            walked(&kept, &session, "b"),
            [(0, 0), (1, 0), (1, 1), (2, 0), (3, 0)]
        );
        assert_eq!(
            walked(&kept, &session, "b"),
            walked(&Editor::of(&session, 0), &session, "b")
        );
        assert!(Editor::kept(&mut session, 0).is_none(), "taken once");
        // Ops counted afterwards are the graph's live nodes per op.
        kept.set_op_counts(Editor::op_counts_of(&session, 0));
        assert_eq!(kept.op_count(s("Relu")), 3);
        assert!(kept.agrees_with(&session));
    }

    #[test]
    fn an_edit_not_made_through_the_kept_editor_withdraws_it() {
        // Through another editor.
        let mut session = chain();
        Editor::open(&mut session, 0).keep(&mut session);
        let mut other = Editor::lazy(&session, 0);
        other.remove(&mut session, 2);
        assert!(Editor::kept(&mut session, 0).is_none());
        // In place, outside any editor.
        let mut session = chain();
        Editor::open(&mut session, 0).keep(&mut session);
        session.graphs[0].touch();
        assert!(Editor::kept(&mut session, 0).is_none());
        // An editor that fell behind is not kept, even after an edit of its own.
        let mut session = chain();
        let mut behind = Editor::open(&mut session, 0);
        session.graphs[0].touch();
        behind.remove(&mut session, 1);
        behind.keep(&mut session);
        assert!(Editor::kept(&mut session, 0).is_none());
        // An editor that never indexed the graph is not kept; one that only looked is.
        let mut session = chain();
        Editor::lazy(&session, 0).keep(&mut session);
        assert!(Editor::kept(&mut session, 0).is_none());
        let looked = Editor::lazy(&session, 0);
        assert_eq!(looked.producer(&session, s("b")), Some(0));
        looked.keep(&mut session);
        assert!(Editor::kept(&mut session, 0).is_some());
        // A clone of the session keeps none.
        Editor::open(&mut session, 0).keep(&mut session);
        assert!(Editor::kept(&mut session.clone(), 0).is_none());
        assert!(Editor::kept(&mut session, 0).is_some());
    }
}
