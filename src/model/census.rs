//! What decoding a model would cost, measured on the wire before decoding: protobuf lets a
//! 2-byte field become a 200-byte struct (a 20 MB file of empty nodes decodes to ~4 GB), so the
//! loader estimates the memory of the decoded model and counts its nodes first, and refuses a
//! model past its [`Budget`] as too large to analyse. The budget grows with the file: a big
//! model is a legitimate input that its size justifies (a million-node decoder is a 355 MB
//! file), a small file that decodes to gigabytes is not.
//!
//! The walk knows the ONNX messages that hold repeated fields (model, graph, node, attribute,
//! function, tensor, value info and types); every element is charged the size of its decoded
//! struct, every string its bytes plus a `String`, every packed number array the size of its
//! decoded vector. Bytes fields (`raw_data`) are slices of the mapped file and cost nothing.
//! The walk uses an explicit stack: nesting cannot overflow it.

use std::mem::size_of;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    SparseTensorProto, StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};

/// The decoded memory any model may take, whatever its size (a 20 MB file of empty nodes decodes
/// to gigabytes: refused).
pub const MIN_DECODED_BYTES: u64 = 1 << 30;
/// Decoded memory allowed per byte of file past [`MIN_DECODED_BYTES`]: real models decode to
/// 1–4 times their size (the bench's million-node decoder: 355 MB on disk, about 1.1 GB decoded).
pub const DECODED_BYTES_PER_FILE_BYTE: u64 = 8;
/// The absolute ceiling on the decoded memory, whatever the file.
pub const MAX_DECODED_BYTES: u64 = 16 << 30;
/// The nodes (all graphs and functions) any model may have: real models stay below a few
/// hundred thousand.
pub const MIN_NODES: u64 = 1 << 19;
/// File bytes per node past [`MIN_NODES`]: a real node (op type, name, an input and an output)
/// takes 20–100 bytes on the wire, an empty one 2 (a million-node decoder holds 355 bytes per
/// node, its weights included).
pub const FILE_BYTES_PER_NODE: u64 = 48;
/// The absolute ceiling on the node count, whatever the file.
pub const MAX_NODES: u64 = 1 << 24;

/// What a model of `file_len` bytes may cost to analyse: nodes and decoded memory proportional to
/// its size, with a floor every model gets and an absolute ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub nodes: u64,
    pub decoded_bytes: u64,
}

impl Budget {
    pub fn for_file(file_len: u64) -> Budget {
        Budget {
            nodes: (file_len / FILE_BYTES_PER_NODE).clamp(MIN_NODES, MAX_NODES),
            decoded_bytes: file_len
                .saturating_mul(DECODED_BYTES_PER_FILE_BYTE)
                .clamp(MIN_DECODED_BYTES, MAX_DECODED_BYTES),
        }
    }
}

/// What the walk found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Census {
    pub decoded_bytes: u64,
    pub nodes: u64,
}

#[derive(Clone, Copy)]
enum Kind {
    Model,
    Graph,
    Node,
    Attribute,
    Function,
    Tensor,
    ValueInfo,
    Type,
    /// `TypeProto.Tensor` / `SparseTensor`: elem type and shape.
    TensorType,
    Shape,
    /// `Sequence`/`Optional` (field 1) and `Map` (field 2): a nested `TypeProto`.
    TypeHolder,
    Sparse,
    /// A message whose repeated fields are not walked (small messages: opset ids, entries).
    Leaf,
}

/// What a field of a message is.
enum Field {
    Message(Kind, usize),
    /// A string (`String`, or `Bytes` copied into one).
    Str,
    /// Packed or single numbers, decoded `width` bytes each; a varint may be a single byte.
    Numbers {
        width: u64,
        varint: bool,
    },
    /// `raw_data`: a slice of the mapped file, never copied.
    Raw,
    /// Anything else: a scalar, or (length-delimited) a string or message copied whole.
    Other,
}

fn field(kind: Kind, number: u64) -> Field {
    use Field::{Message as M, Numbers as N, Other, Str};
    use Kind::*;
    let ints = N {
        width: 8,
        varint: true,
    };
    match (kind, number) {
        (Model, 7) => M(Graph, size_of::<GraphProto>()),
        (Model, 25) => M(Function, size_of::<FunctionProto>()),
        (Model, 8) => M(Leaf, size_of::<OperatorSetIdProto>()),
        (Model, 14) => M(Leaf, size_of::<StringStringEntryProto>()),
        (Graph, 1) | (Function, 7) => M(Node, size_of::<NodeProto>()),
        (Graph, 5) | (Attribute, 5) | (Attribute, 10) => M(Tensor, size_of::<TensorProto>()),
        (Graph, 15) | (Attribute, 22) | (Attribute, 23) => {
            M(Sparse, size_of::<SparseTensorProto>())
        }
        (Graph, 11..=13) | (Function, 14) => M(ValueInfo, size_of::<ValueInfoProto>()),
        (Graph, 14) | (Graph, 16) | (Node, 9) | (Function, 15) | (Tensor, 13) | (Tensor, 16) => {
            M(Leaf, size_of::<StringStringEntryProto>())
        }
        (Function, 9) => M(Leaf, size_of::<OperatorSetIdProto>()),
        (Node, 5) | (Function, 11) => M(Attribute, size_of::<AttributeProto>()),
        (Attribute, 6) | (Attribute, 11) => M(Graph, size_of::<GraphProto>()),
        (Attribute, 14) | (Attribute, 15) | (ValueInfo, 2) => M(Type, size_of::<TypeProto>()),
        (Node, 1 | 2) | (Attribute, 9) | (Function, 4..=6) | (Tensor, 6) => Str,
        (Attribute, 7) | (Tensor, 4) => N {
            width: 4,
            varint: false,
        },
        (Tensor, 10) => N {
            width: 8,
            varint: false,
        },
        (Tensor, 5) => N {
            width: 4,
            varint: true,
        },
        (Attribute, 8) | (Tensor, 1) | (Tensor, 7) | (Tensor, 11) => ints,
        (Type, 1) | (Type, 8) => M(TensorType, 0),
        (Type, 4) | (Type, 9) => M(TypeHolder, 0),
        (Type, 5) => M(TypeHolder, 0),
        (TypeHolder, 1) | (TypeHolder, 2) => M(Type, size_of::<TypeProto>()),
        (TensorType, 2) => M(Shape, size_of::<TensorShapeProto>()),
        (Shape, 1) => M(
            Leaf,
            size_of::<super::proto::tensor_shape_proto::Dimension>(),
        ),
        (Sparse, 1) | (Sparse, 2) => M(Tensor, size_of::<TensorProto>()),
        (Sparse, 3) => ints,
        (Tensor, 9) => Field::Raw,
        _ => Other,
    }
}

/// Reads a protobuf varint at `*pos` (the one reader of the crate's wire-level walks: here, the
/// decode-failure explanation in `load.rs`, and `fix/wire.rs`).
pub(crate) fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Walks `bytes` as a `ModelProto`. Malformed input ends the walk early with what was counted
/// (the decoder then reports it).
pub fn census(bytes: &[u8]) -> Census {
    census_within(bytes, Budget::for_file(bytes.len() as u64))
}

/// [`census`], stopping as soon as `budget` is exceeded (the answer is then known). A large
/// model's main graph is walked on several threads ([`PARALLEL_CENSUS_NODES`]): the census of a
/// message is the sum of its fields' (each field's subtree charged on its own), so the graph's
/// fields are walked in chunks anywhere and the sums added; the answer is the serial walk's,
/// unless the budget is exceeded, which it then shows too.
pub fn census_within(bytes: &[u8], budget: Budget) -> Census {
    census_on(bytes, budget, crate::threads::threads())
}

/// Graphs of at least this many nodes are walked on several threads (below it a thread costs
/// more than it saves: a million-node graph takes 100 ms on one).
pub const PARALLEL_CENSUS_NODES: u64 = 8192;

/// Fields of a graph a thread walks at a time (a thousand nodes or initializers: some
/// microseconds each, against one shared counter's increment).
const CHUNK_FIELDS: usize = 1024;

/// [`census_within`] on up to `threads` threads.
fn census_on(bytes: &[u8], budget: Budget, threads: usize) -> Census {
    let mut c = Census {
        decoded_bytes: size_of::<ModelProto>() as u64,
        nodes: 0,
    };
    let mut stack: Vec<(Kind, usize, usize)> = vec![(Kind::Model, 0, bytes.len())];
    if threads < 2 {
        walk(bytes, &mut stack, &mut c, budget, None);
        return c;
    }
    // The model without its graphs first, then each graph (a model has one; more are merged).
    let mut graphs = Vec::new();
    if walk(bytes, &mut stack, &mut c, budget, Some(&mut graphs)) {
        return c;
    }
    for (start, end) in graphs {
        if graph_census(bytes, (start, end), &mut c, budget, threads) {
            break;
        }
    }
    c
}

/// Whether `c` is past `budget`.
fn exceeds(c: &Census, budget: Budget) -> bool {
    c.nodes > budget.nodes || c.decoded_bytes > budget.decoded_bytes
}

/// Adds the census of graph message `bytes[start..end]` to `c` (a graph that does not parse to
/// its end, or a small one, walked here, as the serial walk does), and says whether `c` now
/// exceeds `budget`.
fn graph_census(
    bytes: &[u8],
    (start, end): (usize, usize),
    c: &mut Census,
    budget: Budget,
    threads: usize,
) -> bool {
    let chunks = bytes
        .get(start..end)
        .filter(|g| g.len() as u64 >= 2 * PARALLEL_CENSUS_NODES)
        .and_then(graph_chunks)
        .filter(|(_, nodes)| *nodes >= PARALLEL_CENSUS_NODES);
    let Some((bounds, _)) = chunks else {
        return walk(bytes, &mut vec![(Kind::Graph, start, end)], c, budget, None);
    };
    // Each thread counts from zero against what is left of the budget: a thread past it has
    // the whole past it, and the others stop at their next chunk.
    let left = Budget {
        nodes: budget.nodes.saturating_sub(c.nodes),
        decoded_bytes: budget.decoded_bytes.saturating_sub(c.decoded_bytes),
    };
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let parts = crate::threads::on_threads(threads, "census", || {
        let mut mine = Census::default();
        let mut stack = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&[from, to]) = bounds.get(k..k + 2) else {
                break;
            };
            stack.push((Kind::Graph, start + from, start + to));
            if walk(bytes, &mut stack, &mut mine, left, None) {
                stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        mine
    });
    for p in parts {
        c.nodes = c.nodes.saturating_add(p.nodes);
        c.decoded_bytes = c.decoded_bytes.saturating_add(p.decoded_bytes);
    }
    exceeds(c, budget)
}

/// The field boundaries of graph message `msg` every [`CHUNK_FIELDS`] fields (its start and end
/// included) and the nodes it holds, skipping over each field; `None` where the message does not
/// parse to its end exactly as [`walk`] reads it.
fn graph_chunks(msg: &[u8]) -> Option<(Vec<usize>, u64)> {
    let mut bounds = vec![0];
    let (mut pos, mut fields, mut nodes) = (0usize, 0usize, 0u64);
    while pos < msg.len() {
        let tag = varint(msg, &mut pos)?;
        match tag & 7 {
            0 => {
                varint(msg, &mut pos)?;
            }
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let len = usize::try_from(varint(msg, &mut pos)?).ok()?;
                pos = pos.checked_add(len)?;
                nodes += u64::from(tag >> 3 == 1);
            }
            _ => return None,
        }
        if pos > msg.len() {
            return None;
        }
        fields += 1;
        if fields.is_multiple_of(CHUNK_FIELDS) && pos < msg.len() {
            bounds.push(pos);
        }
    }
    bounds.push(msg.len());
    Some((bounds, nodes))
}

/// Walks the messages on `stack` and all they hold onto `c`; says whether `c` exceeded `budget`
/// (the walk then stopped: the answer is known, and the stack stays small). With `graphs`, the
/// model's graphs are not walked but their ranges pushed there.
fn walk(
    bytes: &[u8],
    stack: &mut Vec<(Kind, usize, usize)>,
    c: &mut Census,
    budget: Budget,
    mut graphs: Option<&mut Vec<(usize, usize)>>,
) -> bool {
    while let Some((kind, start, end)) = stack.pop() {
        let Some(msg) = bytes.get(start..end) else {
            continue;
        };
        let mut pos = 0usize;
        while pos < msg.len() {
            let Some(tag) = varint(msg, &mut pos) else {
                break;
            };
            let (number, wire) = (tag >> 3, tag & 7);
            let f = field(kind, number);
            match wire {
                0 => {
                    if varint(msg, &mut pos).is_none() {
                        break;
                    }
                    if let Field::Numbers { width, .. } = f {
                        c.decoded_bytes = c.decoded_bytes.saturating_add(width);
                    }
                }
                1 => pos += 8,
                5 => pos += 4,
                2 => {
                    let Some(len) = varint(msg, &mut pos).and_then(|l| usize::try_from(l).ok())
                    else {
                        break;
                    };
                    let Some(stop) = pos.checked_add(len).filter(|&s| s <= msg.len()) else {
                        break;
                    };
                    let len64 = len as u64;
                    let cost = match f {
                        Field::Message(child, size) => {
                            if matches!(child, Kind::Node) {
                                c.nodes += 1;
                            }
                            if !matches!(child, Kind::Leaf) && len > 0 {
                                let range = (start + pos, start + stop);
                                match (kind, graphs.as_deref_mut()) {
                                    (Kind::Model, Some(graphs)) if matches!(child, Kind::Graph) => {
                                        graphs.push(range)
                                    }
                                    _ => stack.push((child, range.0, range.1)),
                                }
                            }
                            size as u64
                        }
                        Field::Str => size_of::<String>() as u64 + len64,
                        Field::Numbers { width, varint } => {
                            if varint {
                                len64.saturating_mul(width)
                            } else {
                                len64
                            }
                        }
                        Field::Raw => 0,
                        Field::Other => len64,
                    };
                    c.decoded_bytes = c.decoded_bytes.saturating_add(cost);
                    pos = stop;
                    if exceeds(c, budget) {
                        return true;
                    }
                }
                _ => break,
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// `prefix` (a tag, and whatever comes before it), then `body` as a length-delimited field.
    fn delimited(prefix: &[u8], body: &[u8]) -> Vec<u8> {
        let mut out = prefix.to_vec();
        let mut len = body.len();
        while len >= 0x80 {
            out.push((len as u8) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn counts_nodes_and_charges_their_structs() {
        let node = NodeProto {
            op_type: Some("Relu".into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            ..Default::default()
        };
        let m = ModelProto {
            ir_version: Some(8),
            graph: Some(GraphProto {
                node: vec![node; 1000],
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = census(&m.encode_to_vec());
        assert_eq!(c.nodes, 1000);
        assert!(c.decoded_bytes >= 1000 * size_of::<NodeProto>() as u64);
    }

    #[test]
    fn the_budget_grows_with_the_file_between_a_floor_and_a_ceiling() {
        let small = Budget::for_file(20 << 20);
        assert_eq!(small.nodes, MIN_NODES);
        assert_eq!(small.decoded_bytes, MIN_DECODED_BYTES);
        // The bench's million-node decoder (355 MB) fits.
        let decoder = Budget::for_file(355_000_000);
        assert!(decoder.nodes >= 1_045_442);
        assert!(decoder.decoded_bytes >= 2 << 30);
        let huge = Budget::for_file(u64::MAX);
        assert_eq!(huge.nodes, MAX_NODES);
        assert_eq!(huge.decoded_bytes, MAX_DECODED_BYTES);
    }

    #[test]
    fn empty_nodes_are_charged_what_they_decode_to() {
        // issue 15's kind: 2 bytes on the wire per node.
        let mut graph = Vec::new();
        for _ in 0..10_000 {
            graph.extend_from_slice(&[0x0a, 0x00]);
        }
        let m = delimited(&[0x08, 0x08, 0x3a], &graph);
        let c = census(&m);
        assert_eq!(c.nodes, 10_000);
        assert!(c.decoded_bytes >= 10_000 * size_of::<NodeProto>() as u64);
    }

    /// A model whose main graph has `nodes` nodes (every tenth holding a subgraph of three),
    /// as many initializers and value infos.
    fn large_model(nodes: usize) -> ModelProto {
        let node = |k: usize| NodeProto {
            name: Some(format!("n{k}")),
            op_type: Some("Add".into()),
            input: vec![format!("v{k}"), format!("w{k}")],
            output: vec![format!("v{}", k + 1)],
            attribute: if k.is_multiple_of(10) {
                vec![AttributeProto {
                    name: Some("body".into()),
                    r#type: Some(5),
                    g: Some(Box::new(GraphProto {
                        node: vec![NodeProto::default(); 3],
                        ..Default::default()
                    })),
                    ints: vec![1, 2, 3],
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        let init = |k: usize| TensorProto {
            name: Some(format!("w{k}")),
            dims: vec![4],
            data_type: Some(1),
            float_data: vec![1.0; k % 5],
            raw_data: Some(vec![0u8; 16].into()),
            ..Default::default()
        };
        ModelProto {
            ir_version: Some(8),
            graph: Some(GraphProto {
                node: (0..nodes).map(node).collect(),
                initializer: (0..nodes).map(init).collect(),
                value_info: (0..nodes / 4)
                    .map(|k| ValueInfoProto {
                        name: Some(format!("v{k}")),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn threads_count_what_one_thread_counts() {
        let n = PARALLEL_CENSUS_NODES as usize * 2 + 77;
        let bytes = large_model(n).encode_to_vec();
        let budget = Budget::for_file(bytes.len() as u64);
        let serial = census_on(&bytes, budget, 1);
        assert_eq!(serial.nodes, (n + n.div_ceil(10) * 3) as u64);
        for threads in [2, 3, 8] {
            assert_eq!(
                census_on(&bytes, budget, threads),
                serial,
                "{threads} threads"
            );
        }
        // A node that does not parse inside (its walk stops there), and a graph that does not
        // parse to its end (walked on one thread): still the serial walk's answer.
        let mut broken = bytes.clone();
        let at = bytes.len() / 3;
        broken[at] = 0x0f;
        assert_eq!(census_on(&broken, budget, 4), census_on(&broken, budget, 1));
        let mut graph = large_model(n).graph.unwrap_or_default().encode_to_vec();
        graph.extend_from_slice(&[0x0f, 0x01]);
        let broken = delimited(&[0x3a], &graph);
        let serial = census_on(&broken, budget, 1);
        assert_eq!(serial.nodes, (n + n.div_ceil(10) * 3) as u64);
        assert_eq!(census_on(&broken, budget, 4), serial);
    }

    #[test]
    fn threads_see_the_budget_exceeded_where_one_thread_does() {
        let bytes = large_model(PARALLEL_CENSUS_NODES as usize * 2).encode_to_vec();
        let full = census_on(&bytes, Budget::for_file(bytes.len() as u64), 1);
        for budget in [
            Budget {
                nodes: full.nodes - 1,
                decoded_bytes: u64::MAX,
            },
            Budget {
                nodes: u64::MAX,
                decoded_bytes: full.decoded_bytes - 1,
            },
            Budget {
                nodes: 10,
                decoded_bytes: u64::MAX,
            },
        ] {
            for threads in [1, 4] {
                assert!(exceeds(&census_on(&bytes, budget, threads), budget));
            }
        }
        let exact = Budget {
            nodes: full.nodes,
            decoded_bytes: full.decoded_bytes,
        };
        assert_eq!(census_on(&bytes, exact, 4), full);
    }
}
