//! The session-creation pipeline on models built for one behaviour each: load checks that need
//! shapes, and transformers whose cost used to grow with the square of the model.

use std::path::Path;

use onnx_lint::placer::{self, OptLevel, Options, Outcome};

fn place(text: &str, ort: &str, level: OptLevel) -> placer::Placement {
    let proto = onnx_lint::model::text::parse_model(text).unwrap();
    let model = onnx_lint::model::Model::from_proto(Path::new("m.onnx"), 0, proto).unwrap();
    let table = onnx_lint::tables::resolve(ort).unwrap().table();
    placer::place(
        &model,
        table,
        &Options {
            level,
            ..Options::default()
        },
    )
}

/// The shape chain of the old `speed` bench decoder: `Gather` with a 1-D index keeps rank 1,
/// `Unsqueeze` makes it 2-D, and `Concat` joins it with 1-D tensors. onnxruntime 1.31.1 (CPU)
/// refuses it at every level with exactly this message.
const CONCAT_RANKS: &str = r#"<
  ir_version: 8,
  opset_import: ["" : 17]
>
g (float[batch, seq, 16] x) => (float[batch, 2, 8] y)
<
  int64[1] idx0 = {0},
  int64[1] axes0 = {0},
  int64[1] idx1 = {1},
  int64[2] heads = {2, 8}
>
{
  [shp] s = Shape (x)
  [g] b = Gather (s, idx0)
  [u] bu = Unsqueeze (b, axes0)
  [cat] shape = Concat <axis = 0> (bu, idx1, heads)
  [r] y = Reshape (x, shape)
}
"#;

#[test]
fn concat_inputs_of_different_rank_fail_the_load() {
    for level in [OptLevel::Disable, OptLevel::All] {
        let p = place(CONCAT_RANKS, "1.31.1", level);
        assert_eq!(
            p.outcome,
            Outcome::LoadFail(
                "load: Node (cat) Op (Concat) [ShapeInferenceError] All inputs to Concat must \
                 have same rank. Input 1 has rank 1 != 2"
                    .into()
            ),
            "level {level:?}"
        );
        let at = p.failed_node.unwrap();
        assert_eq!(p.session.graphs[at.graph()].nodes[at.node()].name, "cat");
    }
    // With a scalar index the ranks agree and the session is created.
    let fixed = CONCAT_RANKS.replace("int64[1] idx0 = {0}", "int64 idx0 = {0}");
    assert_eq!(place(&fixed, "1.31.1", OptLevel::All).outcome, Outcome::Ok);
}

/// A `Sum` of many equal tiny initializers: `ConstantSharing` merges them all into the one ORT
/// keeps (the last registered), in one pass over the graph.
#[test]
fn constant_sharing_merges_many_equal_initializers() {
    const N: usize = 3000;
    let inits: Vec<String> = (0..N).map(|i| format!("  float c{i} = {{1.5}}")).collect();
    let args: Vec<String> = (0..N).map(|i| format!("c{i}")).collect();
    let text = format!(
        "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\ng (float[4] x) => (float[4] y)\n<\n{}\n>\n{{\n  [sum] s = Sum (x, {})\n  [relu] y = Relu (s)\n}}\n",
        inits.join(",\n"),
        args.join(", ")
    );
    let p = place(&text, "1.31.1", OptLevel::All);
    assert_eq!(p.outcome, Outcome::Ok);
    let g = &p.session.graphs[0];
    let sum = g
        .nodes
        .iter()
        .find(|n| n.name == "sum" && !n.removed)
        .unwrap();
    assert_eq!(sum.inputs.len(), N + 1);
    let last = format!("c{}", N - 1);
    assert!(
        sum.inputs[1..].iter().all(|i| *i == last),
        "{:?}",
        &sum.inputs[..4]
    );
    assert_eq!(g.initializers.len(), 1, "one shared initializer is left");
}

/// `Session::from_model_owned` (the `place` command's path: the model taken apart, not copied)
/// builds the very session `Session::from_model` builds, on every fixture model of up to 300 kB
/// that loads: subgraphs, model-local functions, `Constant` nodes, overridable initializers.
#[test]
fn owned_session_is_the_copied_one() {
    let mut dirs = vec![crate::support::repo().join("tests/fixtures")];
    let (mut checked, mut with_subgraphs) = (0usize, 0usize);
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= 300_000);
            if !small || path.extension().is_none_or(|e| e != "onnx") {
                continue;
            }
            // Fixtures that are meant not to load (hostile or broken models) have no session.
            let (Ok(a), Ok(b)) = (onnx_lint::model::load(&path), onnx_lint::model::load(&path))
            else {
                continue;
            };
            let copied = onnx_lint::session::Session::from_model(&a);
            let owned = onnx_lint::session::Session::from_model_owned(b);
            assert_eq!(
                format!("{copied:?}"),
                format!("{owned:?}"),
                "{}: the owned session differs",
                path.display()
            );
            checked += 1;
            with_subgraphs += usize::from(copied.graphs.len() > 1);
        }
    }
    assert!(checked >= 100, "only {checked} fixture models compared");
    assert!(
        with_subgraphs >= 1,
        "no fixture model with a subgraph compared"
    );
}

/// The session `place` builds straight from the file's bytes (`session::build::from_file`) is
/// the very session `Session::from_model` builds from the decoded model, on every fixture model
/// that loads; on every fixture that does not load, the fast path declines (and `place` then
/// reports the loader's error). The header (opsets, local functions, size) agrees too.
#[test]
fn session_from_the_file_is_the_decoded_one() {
    use onnx_lint::session::build::{Header, from_file};
    let mut dirs = vec![crate::support::repo().join("tests/fixtures")];
    let (mut checked, mut refused, mut declined) = (0usize, 0usize, 0usize);
    let (mut sorted, mut unsorted) = (0usize, 0usize);
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "onnx") {
                continue;
            }
            let fast = from_file(&path);
            let Ok(model) = onnx_lint::model::load(&path) else {
                refused += 1;
                assert!(
                    matches!(fast, Ok(None) | Err(_)),
                    "{}: the loader refuses it, the fast path read it",
                    path.display()
                );
                continue;
            };
            let Some(built) = fast.unwrap() else {
                if declined < 5 {
                    eprintln!("declined: {}", path.display());
                }
                declined += 1;
                continue;
            };
            let decoded = onnx_lint::session::Session::from_model(&model);
            assert_eq!(
                format!("{decoded:?}"),
                format!("{:?}", built.session),
                "{}: the session built from the file differs",
                path.display()
            );
            // What only the build knows: whether the main graph is in order, and then its Kahn
            // order is its live nodes in index order.
            let main_sorted = built.header.main_sorted;
            if !built.session.graphs.is_empty() {
                let kahn = onnx_lint::session::order::topological_order(&built.session, 0);
                let index: Vec<usize> = built.session.graphs[0]
                    .live_nodes()
                    .map(|(i, _)| i)
                    .collect();
                if main_sorted {
                    assert_eq!(kahn, index, "{}: sorted, another order", path.display());
                    sorted += 1;
                } else if kahn != index {
                    unsorted += 1;
                }
            }
            assert_eq!(
                format!("{:?}", Header::of_model(&model)),
                format!(
                    "{:?}",
                    Header {
                        main_sorted: false,
                        ..built.header
                    }
                ),
                "{}: the header differs",
                path.display()
            );
            checked += 1;
        }
    }
    eprintln!(
        "fast path: {checked} identical, {declined} declined, {refused} refused by the loader; \
         {sorted} main graphs in order, {unsorted} out of order"
    );
    assert!(sorted >= 100, "only {sorted} main graphs in order");
    assert!(
        unsorted >= 1,
        "no main graph out of order: the order's other case is not met"
    );
    assert!(checked >= 300, "only {checked} fixture models compared");
    assert!(declined <= checked / 50, "{declined} declined of {checked}");
}

/// A graph large enough to have its initializers decoded on threads beside the reading of its
/// nodes, and its nodes' inputs checked on several threads (`session::build`), is built as the
/// decoded model builds it: in order, with two nodes out of order, and refused alike with a bad
/// initializer or an input nothing defines.
#[test]
fn a_large_session_is_built_as_the_decoded_one() {
    use onnx_lint::session::build::from_file;
    use prost::Message;
    const NODES: usize = 17_000;
    let mut inits = Vec::new();
    let mut body = String::new();
    for k in 0..NODES {
        inits.push(format!("  float[2] w{k} = {{{k}.0, 1.5}}"));
        let from = if k == 0 {
            "x".to_string()
        } else {
            format!("a{k}")
        };
        body += &format!("  [n{k}] a{} = Add ({from}, w{k})\n", k + 1);
    }
    let text = format!(
        "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\ng (float[2] x) => (float[2] a{NODES})\n<\n{}\n>\n{{\n{body}}}\n",
        inits.join(",\n")
    );
    let proto = onnx_lint::model::text::parse_model(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, p: &onnx_lint::model::proto::ModelProto| {
        let path = dir.path().join(name);
        std::fs::write(&path, p.encode_to_vec()).unwrap();
        path
    };
    let mut swapped = proto.clone();
    if let Some(g) = swapped.graph.as_mut() {
        g.node.swap(NODES / 2, NODES / 2 + 1);
    }
    for (name, model) in [("sorted.onnx", &proto), ("swapped.onnx", &swapped)] {
        let path = write(name, model);
        let built = from_file(&path).unwrap().expect("the fast path reads it");
        let model = onnx_lint::model::load(&path).unwrap();
        assert_eq!(
            format!("{:?}", onnx_lint::session::Session::from_model(&model)),
            format!("{:?}", built.session),
            "{name}"
        );
        assert_eq!(built.session.graphs[0].initializers.len(), NODES);
    }
    // An initializer with a negative dim: both paths refuse the model.
    let mut bad = proto.clone();
    if let Some(g) = bad.graph.as_mut() {
        g.initializer[NODES / 2].dims = vec![-1];
    }
    let path = write("bad.onnx", &bad);
    assert!(onnx_lint::model::load(&path).is_err());
    assert!(matches!(from_file(&path), Ok(None) | Err(_)));
    // An input nothing defines: the fast path declines it (the loader says why).
    let mut undefined = proto.clone();
    if let Some(g) = undefined.graph.as_mut() {
        g.node[NODES - 3].input[0] = "nowhere".into();
    }
    let path = write("undefined.onnx", &undefined);
    assert!(matches!(from_file(&path), Ok(None)));
}

/// CSE sets aside a node that alone reads its first input (in the first chain, each node is the
/// only reader of the one before when it is met) and records it when a merge gives that input
/// more readers (the second chain's `Relu` merged into the first's, then each of its nodes in
/// turn): the whole second chain is merged in one step, as recording every node does. Without
/// that, each step would merge one more level and 12 levels would outlast ORT's 10 steps.
/// Written in both orders of the chains.
#[test]
fn cse_records_a_node_set_aside_when_its_input_gains_readers() {
    const LEVELS: usize = 12;
    let ops = ["Neg", "Abs", "Sin", "Cos"];
    let chain = |p: &str| {
        let mut text = format!("  [{p}0] {p}0 = Relu (x)\n");
        for k in 1..=LEVELS {
            let op = ops[k % ops.len()];
            text += &format!("  [{p}{k}] {p}{k} = {op} ({p}{})\n", k - 1);
        }
        text
    };
    for (first, second) in [("a", "b"), ("b", "a")] {
        let text = format!(
            "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\ng (float[4] x) => (float[4] y1, float[4] y2)\n{{\n{}{}  [o1] y1 = Identity (a{LEVELS})\n  [o2] y2 = Identity (b{LEVELS})\n}}\n",
            chain(first),
            chain(second)
        );
        let p = place(&text, "1.31.1", OptLevel::All);
        assert_eq!(p.outcome, Outcome::Ok);
        let live: Vec<&str> = p.session.graphs[0]
            .nodes
            .iter()
            .filter(|n| !n.removed)
            .map(|n| n.name.as_str())
            .collect();
        // One chain is left, and the other's last node: once `EliminateIdentity` removed the
        // Identity, its output is a graph output, which CSE never merges. (Recording a node only
        // when met, each step would merge one more level: 16 nodes left after 10 steps.)
        assert_eq!(live.len(), LEVELS + 2, "{live:?}");
    }
}

/// After `ReshapeFusion` gives a Reshape a constant shape, the next `ConstantFolding` infers
/// shapes again, and only the nodes that edits touched or whose inputs' shapes changed
/// (`SGraph::inferred`): the new dims must still reach the end of a long chain, and what is
/// recorded must be what a full inference of the final graph gives. Folding, which looks again
/// only at nodes changed since it declined them, folds the `Shape` whose input's dims the new
/// shape made known, and the `Cast` of it.
#[test]
fn inference_after_a_fusion_reaches_every_node_it_changes() {
    const CHAIN: usize = 40;
    let mut body = String::from(
        "  [shp] s = Shape (x)\n  [g] b = Gather <axis = 0> (s, idx0)\n  [u] bu = Unsqueeze (b, axes0)\n  [cat] shape = Concat <axis = 0> (bu, width)\n  [r] r0 = Reshape (x, shape)\n",
    );
    // A chain below the Reshape, and a branch beside it the fusion does not touch.
    let ops = ["Relu", "Neg", "Abs"];
    for k in 1..=CHAIN {
        body += &format!("  [c{k}] r{k} = {} (r{})\n", ops[k % 3], k - 1);
    }
    body += "  [sh] s2 = Shape <start = 1> (r0)\n  [cs] f2 = Cast <to = 1> (s2)\n";
    for k in 1..=CHAIN {
        let from = if k == 1 {
            "x".to_string()
        } else {
            format!("z{}", k - 1)
        };
        body += &format!("  [d{k}] z{k} = {} ({from})\n", ops[k % 3]);
    }
    let text = format!(
        "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\ng (float[batch, 4, 8] x) => (float y, float z)\n<\n  int64 idx0 = {{0}},\n  int64[1] axes0 = {{0}},\n  int64[1] width = {{32}}\n>\n{{\n{body}  [oy] y = Add (r{CHAIN}, f2)\n  [oz] z = Identity (z{CHAIN})\n}}\n"
    );
    let mut p = place(&text, "1.31.1", OptLevel::All);
    assert_eq!(p.outcome, Outcome::Ok);
    let g = &p.session.graphs[0];
    // The Shape/Gather/Unsqueeze/Concat became one constant.
    let live: Vec<&str> = g.live_nodes().map(|(_, n)| n.op.as_str()).collect();
    assert!(!live.contains(&"Concat"), "{live:?}");
    // The Shape of the Reshape's output and its Cast were folded, once the dim they read was
    // known.
    assert!(
        !live.contains(&"Shape") && !live.contains(&"Cast"),
        "{live:?}"
    );
    let last = onnx_lint::sym::Sym::new(&format!("r{CHAIN}"));
    for name in [last, g.outputs[0]] {
        let shape = p.session.shape_of(0, name).cloned();
        assert_eq!(shape, Some(vec![None, Some(32)]), "{name}");
    }
    // What is recorded is a fixpoint: inferring every node again changes nothing.
    let order = onnx_lint::infer::topological_order(&p.session, 0);
    let mut values = onnx_lint::infer::shapes::Values::default();
    for ni in order {
        let node = &p.session.graphs[0].nodes[ni];
        if node.removed || !node.subgraphs.is_empty() {
            continue;
        }
        let name = node.name;
        assert!(
            !onnx_lint::infer::shapes::infer_and_record(&mut p.session, 0, ni, &mut values),
            "{name} changed"
        );
    }
}

/// The ONNX files under `dir`, at any depth, sorted.
fn onnx_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "onnx") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every fixture model at level `all`, on CUDA with the CPU and on the CPU alone, at the oldest,
/// a middle and the newest bundled release: each editor a pass kept and the next pass took
/// (`session::edit::Editor::kept`) indexes its graph as a fresh editor would, its reads in the
/// order a fresh index lists them (`Editor::agrees_with`), and the fixtures make many such
/// hand-overs (the QDQ transformers, the fusions, the cast passes take the optimiser's editor);
/// likewise each node order the session held for a pass (`session::edit::order_of`) is the order
/// computed afresh.
#[test]
fn every_kept_editor_indexes_its_graph_as_a_fresh_one() {
    use onnx_lint::session::edit::{check_hand_overs, hand_overs, orders_reused};
    use onnx_lint::tables::Ep;
    let models = onnx_files(&crate::support::repo().join("tests/fixtures"));
    assert!(models.len() > 500, "{} fixture models", models.len());
    check_hand_overs(true);
    let (agreed, disagreed) = hand_overs();
    let (same, other) = orders_reused();
    let mut placed = 0usize;
    for release in ["1.23.2", "1.24.4", "1.31.1"] {
        let table = onnx_lint::tables::resolve(release).unwrap().table();
        for eps in [vec![Ep::Cuda, Ep::Cpu], vec![Ep::Cpu]] {
            let options = Options {
                level: OptLevel::All,
                eps: eps.clone(),
                ..Options::default()
            };
            for m in &models {
                // A fixture the reader refuses (the robustness fixtures) is not placed.
                placed += usize::from(placer::place_file(m, table, &options).is_ok());
            }
        }
    }
    let (agreed, disagreed) = (hand_overs().0 - agreed, hand_overs().1 - disagreed);
    let (same, other) = (orders_reused().0 - same, orders_reused().1 - other);
    crate::support::report(&format!(
        "kept editors: {agreed} hand-overs checked in {placed} sessions, {disagreed} disagreed; \
         held orders: {same} reused as computed afresh, {other} not"
    ));
    assert_eq!(
        other, 0,
        "{other} orders held by the session were not the graph's"
    );
    assert!(same > 0, "no order held by the session was reused");
    assert_eq!(
        disagreed, 0,
        "{disagreed} hand-overs of {placed} sessions disagreed"
    );
    assert!(
        agreed > placed,
        "{agreed} hand-overs checked in {placed} sessions: the passes no longer hand their editors on"
    );
}
