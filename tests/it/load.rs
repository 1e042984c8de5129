//! Loading: real models load; every kind of bad input gets its own error code and exit code 2,
//! never a panic; external data is validated and never read.

use std::fs::File;
use std::path::Path;

use onnx_lint::model::{self, LoadError};
use prost::Message;

use crate::support::{self, FLOAT, Run, node, value};

fn assert_clean_error(run: &Run, code: &str) {
    assert_eq!(run.code, 2, "exit code; stderr:\n{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "panic:\n{}", run.stderr);
    assert!(
        run.stderr.contains(code),
        "expected `{code}` in:\n{}",
        run.stderr
    );
}

fn error_code(e: &LoadError) -> String {
    miette::Diagnostic::code(e)
        .map(|c| c.to_string())
        .unwrap_or_default()
}

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = support::run_in(dir.path(), &["no-such-model.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::io");
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn garbage_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // Wire type 7 does not exist: no protobuf starts like this.
    std::fs::write(
        dir.path().join("garbage.onnx"),
        b"\xff\xff\xff\xff this is not a model",
    )
    .unwrap();
    let run = support::run_in(dir.path(), &["garbage.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::not_protobuf");
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.onnx"), b"").unwrap();
    assert_clean_error(
        &support::run_in(dir.path(), &["empty.onnx"]),
        "onnx_lint::load::empty",
    );
}

#[test]
fn truncated_model() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(support::repo().join("examples/gemma4-decoder.op24.onnx")).unwrap();
    std::fs::write(dir.path().join("cut.onnx"), &bytes[..bytes.len() / 2]).unwrap();
    let run = support::run_in(dir.path(), &["cut.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::truncated");
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn every_prefix_of_a_model_is_an_error_not_a_panic() {
    let bytes = std::fs::read(support::repo().join("examples/bert.torchscript.op17.onnx")).unwrap();
    let path = Path::new("prefix.onnx");
    for cut in (1..bytes.len()).step_by(bytes.len() / 97) {
        let slice = bytes::Bytes::copy_from_slice(&bytes[..cut]);
        if let Ok(proto) = model::decode_model(path, slice) {
            // A cut at a field boundary can decode; indexing it must still not panic.
            let _ = model::Model::from_proto(path, cut as u64, proto);
        }
    }
}

#[test]
fn another_message_is_not_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let tensor = onnx_lint::model::proto::TensorProto {
        dims: vec![2, 3],
        data_type: Some(FLOAT),
        float_data: vec![0.0; 6],
        name: Some("w".into()),
        ..Default::default()
    };
    std::fs::write(dir.path().join("tensor.onnx"), tensor.encode_to_vec()).unwrap();
    let run = support::run_in(dir.path(), &["tensor.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::not_a_model");
    insta::assert_snapshot!(run.stderr);

    // A well-formed message whose fields happen to decode as ModelProto, but without a graph.
    let id = onnx_lint::model::proto::OperatorSetIdProto {
        domain: Some("x".into()),
        version: Some(3),
    };
    std::fs::write(dir.path().join("opset.onnx"), id.encode_to_vec()).unwrap();
    assert_clean_error(
        &support::run_in(dir.path(), &["opset.onnx"]),
        "onnx_lint::load::not_a_model",
    );
}

#[test]
fn cyclic_graph() {
    let dir = tempfile::tempdir().unwrap();
    let m = support::model(
        vec![
            node("Add", "a", &["x", "c"], &["b"]),
            node("Relu", "r", &["b"], &["c"]),
        ],
        vec![value("x", FLOAT, &[2])],
        vec![value("c", FLOAT, &[2])],
    );
    support::write(dir.path(), "cycle.onnx", &m);
    let run = support::run_in(dir.path(), &["cycle.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::invalid_model");
    assert!(run.stderr.contains("cycle"), "{}", run.stderr);
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn dangling_input() {
    let dir = tempfile::tempdir().unwrap();
    let m = support::model(
        vec![node("Add", "add", &["x", "nowhere"], &["y"])],
        vec![value("x", FLOAT, &[2])],
        vec![value("y", FLOAT, &[2])],
    );
    support::write(dir.path(), "dangling.onnx", &m);
    let run = support::run_in(dir.path(), &["dangling.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::invalid_model");
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn duplicate_value_names() {
    let dir = tempfile::tempdir().unwrap();
    let m = support::model(
        vec![
            node("Relu", "r1", &["x"], &["y"]),
            node("Relu", "r2", &["x"], &["y"]),
        ],
        vec![value("x", FLOAT, &[2])],
        vec![value("y", FLOAT, &[2])],
    );
    support::write(dir.path(), "dup.onnx", &m);
    let run = support::run_in(dir.path(), &["dup.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::invalid_model");
    assert!(run.stderr.contains("defined twice"), "{}", run.stderr);
}

#[test]
fn absurd_tensor_size() {
    let dir = tempfile::tempdir().unwrap();
    let w = support::external_tensor("w", &[1 << 40, 1 << 40], "w.bin", 0, None);
    support::write(
        dir.path(),
        "absurd.onnx",
        &support::model_with_initializer(w),
    );
    let run = support::run_in(dir.path(), &["absurd.onnx"]);
    assert_clean_error(&run, "onnx_lint::load::invalid_model");
    assert!(run.stderr.contains("absurd size"), "{}", run.stderr);
}

#[test]
fn external_data_escaping_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    for (name, location) in [
        ("up.onnx", "../secret.bin"),
        ("abs.onnx", "/etc/passwd"),
        ("deep.onnx", "a/../../x.bin"),
    ] {
        let w = support::external_tensor("w", &[4], location, 0, Some(16));
        support::write(dir.path(), name, &support::model_with_initializer(w));
        let run = support::run_in(dir.path(), &[name]);
        assert_clean_error(&run, "onnx_lint::load::external_data_escape");
        if name == "up.onnx" {
            insta::assert_snapshot!(run.stderr);
        }
    }
}

#[cfg(unix)]
#[test]
fn external_data_symlink_out_of_the_folder() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("w.bin"), [0u8; 16]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path().join("w.bin"), dir.path().join("w.bin")).unwrap();
    let w = support::external_tensor("w", &[4], "w.bin", 0, Some(16));
    support::write(dir.path(), "link.onnx", &support::model_with_initializer(w));
    assert_clean_error(
        &support::run_in(dir.path(), &["link.onnx"]),
        "onnx_lint::load::external_data_escape",
    );
}

/// A 2 GiB external-data file, made sparse so the test costs no disk: the model loads, its data
/// is counted from the declared length, and the file is never read.
#[test]
fn two_gib_external_data_loads_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 2 << 30;
    File::create(dir.path().join("weights.bin"))
        .unwrap()
        .set_len(size)
        .unwrap();
    let elements = (size / 4) as i64;
    let w = support::external_tensor("w", &[elements], "weights.bin", 0, Some(size));
    let path = support::write(dir.path(), "big.onnx", &support::model_with_initializer(w));
    let m = model::load(&path).expect("loads");
    let stats = m.stats();
    assert_eq!(stats.external_bytes, size);
    assert_eq!(m.external.len(), 1);
    assert_eq!(m.external[0].file_size, Some(size));
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    let run = support::run_in(dir.path(), &["big.onnx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("external data: 2.0 GiB in 1 file (weights.bin)"),
        "{}",
        run.stdout
    );
}

#[test]
fn external_data_shorter_than_declared_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.bin"), [0u8; 8]).unwrap();
    let w = support::external_tensor("w", &[4], "w.bin", 0, Some(16));
    let path = support::write(
        dir.path(),
        "short.onnx",
        &support::model_with_initializer(w),
    );
    let m = model::load(&path).expect("loads");
    assert_eq!(m.problems.len(), 1);
    assert_eq!(m.problems[0].code, "model::external-data-short");
    assert_eq!(support::run_in(dir.path(), &["short.onnx"]).code, 1);
}

#[test]
fn model_file_over_two_gib_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    File::create(dir.path().join("huge.onnx"))
        .unwrap()
        .set_len((2 << 30) + 1)
        .unwrap();
    let err = model::load(&dir.path().join("huge.onnx")).unwrap_err();
    assert_eq!(error_code(&err), "onnx_lint::load::too_large");
}

/// An `If` node `name` of condition `cond` and output `out` whose two branches (named, with
/// their op) are one node each, reading the outer value `outer`.
fn if_reading(
    name: &str,
    cond: &str,
    out: &str,
    outer: &str,
    branches: [(&str, &str); 2],
) -> onnx_lint::model::proto::NodeProto {
    use onnx_lint::model::proto::{AttributeProto, GraphProto, attribute_proto::AttributeType};
    let mut if_node = node("If", name, &[cond], &[out]);
    for (attr, (branch, op)) in ["then_branch", "else_branch"].into_iter().zip(branches) {
        let g = GraphProto {
            name: Some(branch.into()),
            node: vec![node(
                op,
                &format!("{branch}_node"),
                &[outer],
                &[&format!("{branch}_out")],
            )],
            output: vec![value(&format!("{branch}_out"), FLOAT, &[2])],
            ..Default::default()
        };
        if_node.attribute.push(AttributeProto {
            name: Some(attr.into()),
            r#type: Some(AttributeType::Graph as i32),
            g: Some(Box::new(g)),
            ..Default::default()
        });
    }
    if_node
}

#[test]
fn view_of_a_subgraph_model() {
    // If with a then-branch reading an outer value: implicit inputs and outer scope resolved.
    let if_node = if_reading(
        "if",
        "cond",
        "y",
        "outer",
        [("then", "Relu"), ("else", "Neg")],
    );
    let m = support::model(
        vec![node("Relu", "pre", &["x"], &["outer"]), if_node],
        vec![value("x", FLOAT, &[2]), value("cond", support::FLOAT, &[])],
        vec![value("y", FLOAT, &[2])],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = support::write(dir.path(), "if.onnx", &m);
    let m = model::load(&path).expect("loads");
    assert_eq!(m.graphs.len(), 3);
    let main = m.main_graph();
    let outer = main.lookup("outer").unwrap();
    let if_id = main.nodes[1];
    assert_eq!(m.node(if_id).implicit_inputs, vec![outer]);
    assert_eq!(m.node(if_id).subgraphs.len(), 2);
    for &g in &m.node(if_id).subgraphs {
        assert_eq!(m.graph(g).outer_inputs, vec![outer]);
        assert_eq!(m.resolve(g, "outer"), Some(outer));
        assert_eq!(m.graph(g).lookup("outer"), None);
    }
    assert_eq!(m.value(outer).consumers.len(), 2);
    assert_eq!(m.value(outer).producer(), Some(main.nodes[0]));
    assert_eq!(m.graph_proto(m.node(if_id).subgraphs[1]).name(), "else");
    assert_eq!(main.topo_order, main.nodes);
}

#[test]
fn topological_order_fixes_file_order() {
    let m = support::model(
        vec![
            node("Relu", "second", &["a"], &["y"]),
            node("Relu", "first", &["x"], &["a"]),
        ],
        vec![value("x", FLOAT, &[2])],
        vec![value("y", FLOAT, &[2])],
    );
    let dir = tempfile::tempdir().unwrap();
    let m = model::load(&support::write(dir.path(), "order.onnx", &m)).unwrap();
    let names: Vec<&str> = m
        .main_graph()
        .topo_order
        .iter()
        .map(|&n| m.node(n).name.as_str())
        .collect();
    assert_eq!(names, ["first", "second"]);
}

/// Every model of the public corpus loads with no error-level problem.
#[test]
fn public_corpus_loads() {
    let files = onnx_lint::cli::expand_paths(&[support::corpus_models()]).unwrap();
    assert!(files.len() >= 150, "corpus has {} models", files.len());
    for f in files {
        let m = model::load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(
            m.problems
                .iter()
                .all(|p| p.level != model::ProblemLevel::Error),
            "{}: {:?}",
            f.display(),
            m.problems
        );
    }
}

/// The 1884 ONNX backend node-test models ([`support::node_corpus`]: written from the pinned
/// `onnx` package, or the folder `ONNX_LINT_NODE_CORPUS` names).
#[test]
fn node_test_corpus_loads() {
    let dir = match support::node_corpus() {
        Ok(dir) => dir,
        Err(why) => return support::not_run("node-test corpus loads", &why),
    };
    let files = onnx_lint::cli::expand_paths(&[dir]).unwrap();
    assert!(files.len() >= 1800, "{} models", files.len());
    for f in files {
        let m = model::load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(
            m.problems
                .iter()
                .all(|p| p.level != model::ProblemLevel::Error),
            "{}",
            f.display()
        );
    }
}

/// `place` builds its session straight from the file (`session::build`); every input the loader
/// refuses is refused by `place` with the same error, and every prefix of a real model is read
/// alike (refused alike, or placed alike).
#[test]
fn place_refuses_what_loading_refuses() {
    use onnx_lint::placer::{Options, place, place_file};
    let dir = tempfile::tempdir().unwrap();
    let table = onnx_lint::tables::newest().table();
    let mut cases: Vec<std::path::PathBuf> = Vec::new();
    let graph = |nodes, name: &str| {
        let m = support::model(
            nodes,
            vec![value("x", FLOAT, &[2])],
            vec![value("y", FLOAT, &[2])],
        );
        support::write(dir.path(), name, &m)
    };
    cases.push(graph(
        vec![
            node("Add", "a", &["x", "c"], &["b"]),
            node("Relu", "r", &["b"], &["y"]),
            node("Relu", "q", &["y"], &["c"]),
        ],
        "cycle.onnx",
    ));
    cases.push(graph(
        vec![node("Add", "add", &["x", "nowhere"], &["y"])],
        "dangling.onnx",
    ));
    // A cycle closed by what a subgraph reads: the If's branch reads `z`, which a node after
    // the If computes from the If's output.
    let cond = if_reading(
        "if",
        "c",
        "t",
        "z",
        [("then", "Identity"), ("else", "Identity")],
    );
    let m = support::model(
        vec![
            cond,
            node("Add", "after", &["t", "x"], &["z"]),
            node("Relu", "r", &["z"], &["y"]),
        ],
        vec![value("x", FLOAT, &[2]), value("c", 9, &[])],
        vec![value("y", FLOAT, &[2])],
    );
    let path = support::write(dir.path(), "subgraph_cycle.onnx", &m);
    assert!(
        model::load(&path).is_err(),
        "a cycle through a subgraph loads"
    );
    cases.push(path);
    cases.push(graph(
        vec![
            node("Relu", "r1", &["x"], &["y"]),
            node("Relu", "r2", &["x"], &["y"]),
        ],
        "dup.onnx",
    ));
    cases.push(graph(
        vec![node("Relu", "r", &["x"], &["z"])],
        "output.onnx",
    ));
    let w = support::external_tensor("w", &[1 << 40, 1 << 40], "w.bin", 0, None);
    cases.push(support::write(
        dir.path(),
        "absurd.onnx",
        &support::model_with_initializer(w),
    ));
    for (name, location) in [("up.onnx", "../secret.bin"), ("abs.onnx", "/etc/passwd")] {
        let w = support::external_tensor("w", &[4], location, 0, Some(16));
        cases.push(support::write(
            dir.path(),
            name,
            &support::model_with_initializer(w),
        ));
    }
    std::fs::write(
        dir.path().join("garbage.onnx"),
        b"\xff\xfe not a model at all",
    )
    .unwrap();
    cases.push(dir.path().join("garbage.onnx"));
    std::fs::write(dir.path().join("empty.onnx"), b"").unwrap();
    cases.push(dir.path().join("empty.onnx"));
    let bytes = std::fs::read(support::repo().join("examples/bert.torchscript.op17.onnx")).unwrap();
    for cut in (1..bytes.len()).step_by(bytes.len() / 37) {
        let name = format!("cut{cut}.onnx");
        std::fs::write(dir.path().join(&name), &bytes[..cut]).unwrap();
        cases.push(dir.path().join(name));
    }
    let options = Options::default();
    let mut refused = 0;
    for path in &cases {
        match (model::load(path), place_file(path, table, &options)) {
            (Err(a), Err(b)) => {
                assert_eq!(error_code(&a), error_code(&b), "{}", path.display());
                assert_eq!(a.to_string(), b.to_string(), "{}", path.display());
                refused += 1;
            }
            (Ok(m), Ok(p)) => {
                let q = place(&m, table, &options);
                assert_eq!(
                    format!("{:?}", q.session),
                    format!("{:?}", p.session),
                    "{}",
                    path.display()
                );
                assert_eq!(q.outcome, p.outcome, "{}", path.display());
            }
            (a, b) => panic!(
                "{}: loading {} but place {}",
                path.display(),
                if a.is_ok() { "reads it" } else { "refuses it" },
                if b.is_ok() { "reads it" } else { "refuses it" }
            ),
        }
    }
    assert!(refused >= 13, "only {refused} refusals compared");
}
