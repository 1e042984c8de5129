//! The two node orders ORT uses, computed in one place: Kahn's algorithm by name
//! (`Graph::Resolve`, what inference and the rewrite rules walk) and the reverse DFS from the
//! leaves (`GraphViewer`, what CSE, MatMulAddFusion and the TransposeOptimizer walk).

use crate::sym::SymMap as HashMap;

use super::Session;
use crate::sym::Sym;

/// Which node of one graph produces each value. A graph large against the interner (most of
/// its names are its values) gets a table indexed by symbol id, a lookup without hashing;
/// a small graph in a model of many names (a `Loop` body, one of thousands of `If` branches)
/// gets a hash map, so that no graph pays for a table the size of the whole model. The table
/// holds at most [`DENSE_PER_NODE`] entries per node of its graph.
#[derive(Debug, Clone)]
pub enum Producers {
    Dense(Vec<usize>),
    Sparse(HashMap<Sym, usize>),
}

/// The most table entries a graph's node may account for (see [`Producers`]).
pub const DENSE_PER_NODE: usize = 16;

/// Whether a graph of `nodes` nodes gets a table indexed by symbol id, holding at most
/// `per_node` entries per node (a graph large against the interner, most of whose names are its
/// own): the table's length now (every id so far) and the capacity to reserve (room for the names
/// the graph's edits will add, as far as its size allows).
pub fn dense_table(nodes: usize, per_node: usize) -> Option<(usize, usize)> {
    let ids = crate::sym::ids();
    let most = nodes.saturating_mul(per_node);
    (nodes >= 64 && ids <= most).then(|| (ids, (ids + ids / 4).min(most)))
}

impl Producers {
    /// An empty index for a graph of `nodes` nodes.
    pub fn for_nodes(nodes: usize) -> Producers {
        if let Some((ids, room)) = dense_table(nodes, DENSE_PER_NODE) {
            let mut t = Vec::with_capacity(room);
            t.resize(ids, usize::MAX);
            Producers::Dense(t)
        } else {
            Producers::Sparse(HashMap::with_capacity_and_hasher(
                nodes * 2,
                Default::default(),
            ))
        }
    }

    /// The producers of the live nodes of graph `gi`.
    pub fn of(session: &Session, gi: usize) -> Producers {
        let g = &session.graphs[gi];
        let mut p = Producers::for_nodes(g.nodes.len());
        for (i, n) in g.live_nodes() {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                p.insert(*o, i);
            }
        }
        p
    }

    pub fn get(&self, v: Sym) -> Option<usize> {
        match self {
            Producers::Dense(t) => t.get(v.id() as usize).copied().filter(|&i| i != usize::MAX),
            Producers::Sparse(m) => m.get(&v).copied(),
        }
    }

    pub fn insert(&mut self, v: Sym, node: usize) {
        match self {
            Producers::Dense(t) => {
                let k = v.id() as usize;
                if k >= t.len() {
                    t.resize(k + 1, usize::MAX);
                }
                t[k] = node;
            }
            Producers::Sparse(m) => {
                m.insert(v, node);
            }
        }
    }

    pub fn remove(&mut self, v: Sym) {
        match self {
            Producers::Dense(t) => {
                if let Some(e) = t.get_mut(v.id() as usize) {
                    *e = usize::MAX;
                }
            }
            Producers::Sparse(m) => {
                m.remove(&v);
            }
        }
    }
}

/// The graphs from which [`beside`] builds an order on a thread of its own: an order is a walk
/// of every node; under this many, the thread's start-up is not repaid.
pub const PARALLEL_ORDER_NODES: usize = 8192;

/// Builds `order` (one of the orders below) on a thread of its own while this thread does
/// `work`, for a graph of at least [`PARALLEL_ORDER_NODES`] nodes; both here for a smaller one,
/// or where no thread can be had. Both only read the session.
pub fn beside<T>(
    nodes: usize,
    order: impl Fn() -> Vec<usize> + Sync,
    work: impl FnOnce() -> T,
) -> (T, Vec<usize>) {
    if nodes < PARALLEL_ORDER_NODES {
        return (work(), order());
    }
    std::thread::scope(|scope| {
        let built = std::thread::Builder::new()
            .name("order".into())
            .spawn_scoped(scope, &order)
            .ok();
        let done = work();
        // A thread that could not start leaves the order to this one.
        let order = built.and_then(|h| h.join().ok()).unwrap_or_else(&order);
        (done, order)
    })
}

/// Nodes of graph `gi` (not removed) in a topological order: Kahn's algorithm by name, taking
/// the lowest index first. Nodes left over by a cycle are appended in index order.
pub fn topological_order(session: &Session, gi: usize) -> Vec<usize> {
    let producer = Producers::of(session, gi);
    topological_order_by(session, gi, &|v| producer.get(v))
}

/// [`topological_order`] with the producer of each value given (a caller that keeps an index
/// of the graph's producers saves building another).
pub fn topological_order_by(
    session: &Session,
    gi: usize,
    producer: &dyn Fn(Sym) -> Option<usize>,
) -> Vec<usize> {
    let g = &session.graphs[gi];
    // Where every node's producers come before it, the lowest-index-first order is the index
    // order (exporters write sorted graphs; most graphs are until a fusion appends): asked first,
    // stopping at the first node that reads ahead, before any edge is listed. (A removed
    // producer, which a stale index may give, holds its reader back: not sorted.)
    let sorted = g.live_nodes().all(|(i, n)| {
        n.inputs
            .iter()
            .chain(&n.implicit_inputs)
            .filter_map(|v| producer(*v))
            .all(|p| p == i || (p < i && !g.nodes[p].removed))
    });
    if sorted {
        return g.live_nodes().map(|(i, _)| i).collect();
    }
    // Edges producer -> user, deduplicated per user, as a flat adjacency list (CSR): users of
    // `d` are `users[start[d]..start[d + 1]]`, in ascending order (the order the users were met).
    let mut indegree = vec![0u32; g.nodes.len()];
    let mut edges: Vec<(usize, usize)> = Vec::with_capacity(g.nodes.len() * 2);
    let mut deps: Vec<usize> = Vec::new();
    for (i, n) in g.live_nodes() {
        deps.clear();
        deps.extend(
            n.inputs
                .iter()
                .chain(&n.implicit_inputs)
                .filter_map(|v| producer(*v))
                .filter(|&p| p != i),
        );
        deps.sort_unstable();
        deps.dedup();
        for &d in &deps {
            indegree[i] += 1;
            edges.push((d, i));
        }
    }
    let mut start = vec![0usize; g.nodes.len() + 1];
    for &(d, _) in &edges {
        start[d + 1] += 1;
    }
    for k in 0..g.nodes.len() {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut users = vec![0usize; edges.len()];
    for &(d, i) in &edges {
        users[fill[d]] = i;
        fill[d] += 1;
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = g
        .live_nodes()
        .filter(|(i, _)| indegree[*i] == 0)
        .map(|(i, _)| std::cmp::Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(g.nodes.len());
    let mut placed = vec![false; g.nodes.len()];
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        placed[i] = true;
        for &u in &users[start[i]..start[i + 1]] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(std::cmp::Reverse(u));
            }
        }
    }
    for (i, _) in g.live_nodes() {
        if !placed[i] {
            order.push(i);
        }
    }
    order
}

/// ORT's `GraphViewer` order: a reverse DFS from the leaf nodes (nodes whose outputs no node
/// reads), inputs visited in index order from the top of a stack, nodes emitted on leaving.
pub fn ort_topological_order(session: &Session, gi: usize) -> Vec<usize> {
    let producer = Producers::of(session, gi);
    ort_topological_order_by(session, gi, &|v| producer.get(v))
}

/// [`ort_topological_order`] with the producer of each value given.
pub fn ort_topological_order_by(
    session: &Session,
    gi: usize,
    producer: &dyn Fn(Sym) -> Option<usize>,
) -> Vec<usize> {
    let g = &session.graphs[gi];
    // Each node's producers, deduplicated and ascending, as one flat list (CSR): those of
    // node `i` are `deps[start[i]..start[i + 1]]`.
    let mut start: Vec<usize> = Vec::with_capacity(g.nodes.len() + 1);
    let mut deps: Vec<usize> = Vec::with_capacity(g.nodes.len() * 2);
    let mut has_output_node = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        start.push(deps.len());
        if n.removed {
            continue;
        }
        let from = deps.len();
        deps.extend(
            n.inputs
                .iter()
                .chain(&n.implicit_inputs)
                .filter_map(|v| producer(*v))
                .filter(|&p| p != i),
        );
        deps[from..].sort_unstable();
        let mut w = from;
        for r in from..deps.len() {
            if w == from || deps[w - 1] != deps[r] {
                deps[w] = deps[r];
                w += 1;
            }
        }
        deps.truncate(w);
        for &d in &deps[from..] {
            has_output_node[d] = true;
        }
    }
    start.push(deps.len());
    let mut stack: Vec<(usize, bool)> = g
        .live_nodes()
        .filter(|(i, _)| !has_output_node[*i])
        .map(|(i, _)| (i, false))
        .collect();
    let mut visited = vec![false; g.nodes.len()];
    let mut order = Vec::with_capacity(g.nodes.len());
    while let Some((n, leaving)) = stack.pop() {
        if leaving {
            order.push(n);
            continue;
        }
        if visited[n] {
            continue;
        }
        visited[n] = true;
        stack.push((n, true));
        for &d in &deps[start[n]..start[n + 1]] {
            if !visited[d] {
                stack.push((d, false));
            }
        }
    }
    // Cycles leave nodes unvisited: append them in index order.
    for (i, _) in g.live_nodes() {
        if !visited[i] {
            order.push(i);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Above the threshold the order is built on another thread, below it here: either way the
    /// caller gets both results, and the order is built once.
    #[test]
    fn beside_gives_both_results_on_either_path() {
        for nodes in [10, PARALLEL_ORDER_NODES] {
            let calls = std::sync::atomic::AtomicUsize::new(0);
            let here = std::thread::current().id();
            let (work, order) = beside(
                nodes,
                || {
                    calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let away = std::thread::current().id() != here;
                    vec![nodes, usize::from(away)]
                },
                || nodes * 2,
            );
            assert_eq!(work, nodes * 2);
            assert_eq!(order[0], nodes);
            // The large graph's order was built away from the caller.
            assert_eq!(order[1], usize::from(nodes >= PARALLEL_ORDER_NODES));
            assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
        }
    }
}
