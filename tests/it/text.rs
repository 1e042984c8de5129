//! The ONNX text view: printer and parser kept honest against each other.
//!
//! - every model of the public corpus (`tests/fixtures/corpus/models/`) and of the ONNX backend
//!   node-test corpus (`support::node_corpus`) prints, parses back to the same model after
//!   `text::normalize`, and prints again to the same text;
//! - the fixtures of `fixtures/text/` parse, and their listings (with node spans) are snapshots;
//! - truncated and mangled listings give errors, never panics; hostile nesting is refused.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use onnx_lint::model::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto};
use onnx_lint::model::text::{
    GraphPath, Listing, ParseErrorKind, normalize, parse_model, print_model,
};
use prost::Message;

use crate::support;

fn onnx_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            onnx_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "onnx") {
            out.push(p);
        }
    }
}

fn load(path: &Path) -> Result<ModelProto, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    ModelProto::decode(Bytes::from(bytes)).map_err(|e| e.to_string())
}

/// Print → parse → same model (after normalisation) and the same text again.
fn round_trip(model: &ModelProto) -> Result<(), String> {
    let listing = print_model(model);
    let parsed = parse_model(&listing.text).map_err(|e| {
        let report = miette::Report::new(e).with_source_code(listing.text.clone());
        format!("{report:?}")
    })?;
    let mut expected = model.clone();
    normalize(&mut expected);
    let mut got = parsed.clone();
    normalize(&mut got);
    if expected.encode_to_vec() != got.encode_to_vec() {
        return Err(first_difference(
            &format!("{expected:#?}"),
            &format!("{got:#?}"),
        ));
    }
    let again = print_model(&parsed);
    if again.text != listing.text {
        return Err(first_difference(&listing.text, &again.text));
    }
    Ok(())
}

fn first_difference(a: &str, b: &str) -> String {
    let (al, bl): (Vec<_>, Vec<_>) = (a.lines().collect(), b.lines().collect());
    let i = al
        .iter()
        .zip(&bl)
        .position(|(x, y)| x != y)
        .unwrap_or(al.len().min(bl.len()));
    let from = i.saturating_sub(8);
    format!(
        "first difference at line {i}:\n--- expected\n{}\n--- got\n{}",
        al[from..(i + 3).min(al.len())].join("\n"),
        bl[from..(i + 3).min(bl.len())].join("\n"),
    )
}

fn round_trip_dir(dir: &Path) -> (usize, Vec<String>) {
    let mut files = Vec::new();
    onnx_files(dir, &mut files);
    files.sort();
    let mut failures = Vec::new();
    for f in &files {
        let result = load(f).and_then(|m| round_trip(&m));
        if let Err(e) = result {
            failures.push(format!("{}: {e}", f.display()));
        }
    }
    (files.len(), failures)
}

#[test]
fn corpus_round_trip() {
    let (n, failures) = round_trip_dir(&support::corpus_models());
    println!("{n} corpus models, {} failures", failures.len());
    assert!(
        n >= 179,
        "{n} models found under tests/fixtures/corpus/models"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn node_corpus_round_trip() {
    let dir = match support::node_corpus() {
        Ok(dir) => dir,
        Err(why) => return support::not_run("node-test corpus text round trip", &why),
    };
    let (n, failures) = round_trip_dir(&dir);
    println!("{n} node-test models, {} failures", failures.len());
    assert!(n >= 1800, "{n} models found in {}", dir.display());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/text");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.retain(|p| p.extension().is_some_and(|x| x == "onnxtxt"));
    out.sort();
    out
}

/// The listing, then each node's span as `path#index: text`.
fn render(listing: &Listing, model: &ModelProto) -> String {
    let mut s = listing.text.clone();
    s.push_str("\n# Node spans\n");
    let mut paths: Vec<(GraphPath, &GraphProto)> = Vec::new();
    if let Some(g) = &model.graph {
        collect(GraphPath::main(), g, &mut paths);
    }
    for (path, g) in &paths {
        for i in 0..g.node.len() {
            let span = listing.node_span(path, i).expect("every node has a span");
            let text = &listing.text[span.offset()..span.offset() + span.len()];
            s.push_str(&format!("{}#{i}: {text}\n", show(path)));
        }
    }
    for (path, g) in &paths {
        for vi in &g.input {
            let span = listing
                .value_span(path, vi.name())
                .expect("inputs have spans");
            let text = &listing.text[span.offset()..span.offset() + span.len()];
            s.push_str(&format!("{} value {}: {text}\n", show(path), vi.name()));
        }
    }
    s
}

fn collect<'a>(path: GraphPath, g: &'a GraphProto, out: &mut Vec<(GraphPath, &'a GraphProto)>) {
    out.push((path.clone(), g));
    for (i, n) in g.node.iter().enumerate() {
        for a in &n.attribute {
            if let Some(sub) = &a.g {
                collect(path.child(i, a.name(), 0), sub, out);
            }
            for (k, sub) in a.graphs.iter().enumerate() {
                collect(path.child(i, a.name(), k), sub, out);
            }
        }
    }
}

fn show(p: &GraphPath) -> String {
    let mut s = String::from("main");
    for step in &p.steps {
        s.push_str(&format!(
            "/{}.{}[{}]",
            step.node, step.attribute, step.graph
        ));
    }
    s
}

#[test]
fn fixtures_print_as_snapshots() {
    let files = fixtures();
    assert!(
        !files.is_empty(),
        "no fixtures under tests/it/fixtures/text"
    );
    for f in files {
        let text = std::fs::read_to_string(&f).expect("fixture is readable");
        let model = match parse_model(&text) {
            Ok(m) => m,
            Err(e) => {
                let report = miette::Report::new(e).with_source_code(text.clone());
                panic!("{}: {report:?}", f.display());
            }
        };
        round_trip(&model).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let listing = print_model(&model);
        let name = f.file_stem().and_then(|s| s.to_str()).unwrap_or("fixture");
        insta::assert_snapshot!(format!("text_{name}"), render(&listing, &model));
    }
}

#[test]
fn node_span_points_at_the_node() {
    let text = "<ir_version: 9, opset_import: [\"\" : 19]>\n\
                g (float[N] x) => (float[N] z) {\n\
                  [first] y = Relu (x)\n\
                  [second] z = Neg (y)\n\
                }\n";
    let model = parse_model(text).expect("parses");
    let listing = print_model(&model);
    let span = listing
        .node_span(&GraphPath::main(), 1)
        .expect("second node");
    let at = &listing.text[span.offset()..span.offset() + span.len()];
    assert_eq!(at, "[second] z = Neg (y)");
    let y = listing
        .value_span(&GraphPath::main(), "y")
        .expect("y is defined");
    assert_eq!(&listing.text[y.offset()..y.offset() + y.len()], "y");
    // `y` is defined by the first node: the span points into its line.
    let first = listing
        .node_span(&GraphPath::main(), 0)
        .expect("first node");
    assert!(y.offset() >= first.offset() && y.offset() < first.offset() + first.len());
}

#[test]
fn errors_carry_a_code_and_a_span() {
    let text = "g (float[N] x) => (float[N] y) {\n  y = Relu <alpha = > (x)\n}\n";
    let err = parse_model(text).expect_err("a missing value is an error");
    assert_eq!(err.kind, ParseErrorKind::Unexpected);
    assert_eq!(&text[err.span.offset()..err.span.offset() + 1], ">");
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("onnx_lint::text::unexpected_token"));

    let text = "g () => () { y = Relu (x) } trailing";
    let err = parse_model(text).expect_err("garbage after the graph");
    // `trailing` starts a function, which then lacks its `(`.
    assert_eq!(err.span.offset(), text.len());
}

#[test]
fn hostile_nesting_is_refused() {
    let depth = 10_000;
    let mut text = String::new();
    for _ in 0..depth {
        text.push_str("g () => () { y = If (c) <then_branch: graph = ");
    }
    let err = parse_model(&text).expect_err("too deep");
    assert_eq!(err.kind, ParseErrorKind::TooDeep);

    let mut ty = String::from("g (");
    for _ in 0..depth {
        ty.push_str("seq(");
    }
    let err = parse_model(&ty).expect_err("too deep");
    assert_eq!(err.kind, ParseErrorKind::TooDeep);
}

/// Every prefix of real listings, and byte-mangled copies, parse or fail cleanly.
#[test]
fn truncated_and_mangled_listings_never_panic() {
    let mut texts: Vec<String> = fixtures()
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    let mut files = Vec::new();
    onnx_files(&support::corpus_models(), &mut files);
    files.sort();
    assert!(
        files.len() >= 179,
        "the public corpus is in tests/fixtures/corpus"
    );
    for f in files.iter().step_by(40) {
        if let Ok(m) = load(f) {
            texts.push(print_model(&m).text);
        }
    }
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut runs = 0;
    for text in &texts {
        // Up to ~600 prefixes per text, ending on character boundaries.
        let step = (text.len() / 600).max(1);
        let mut cut = 0;
        while cut <= text.len() {
            if text.is_char_boundary(cut) {
                let _ = parse_model(&text[..cut]);
                runs += 1;
            }
            cut += step;
        }
        for _ in 0..200 {
            let mut bytes = text.clone().into_bytes();
            for _ in 0..3 {
                if bytes.is_empty() {
                    break;
                }
                let i = (next() as usize) % bytes.len();
                bytes[i] = b"<>()[]{},=:.\"#@-0a \n"[(next() as usize) % 20];
            }
            if let Ok(s) = String::from_utf8(bytes) {
                let _ = parse_model(&s);
                runs += 1;
            }
        }
    }
    println!("{runs} parses of truncated or mangled listings");
}

/// Not a timed test: prints how long a 100k-node model takes to print and parse.
#[test]
fn large_model_speed() {
    let n = 100_000;
    let mut g = GraphProto {
        name: Some("big".into()),
        ..GraphProto::default()
    };
    g.input.push(ValueInfoProto {
        name: Some("v0".into()),
        ..ValueInfoProto::default()
    });
    for i in 0..n {
        g.node.push(NodeProto {
            name: Some(format!("relu_{i}")),
            op_type: Some("Relu".into()),
            input: vec![format!("v{i}")],
            output: vec![format!("v{}", i + 1)],
            ..NodeProto::default()
        });
    }
    let model = ModelProto {
        ir_version: Some(9),
        graph: Some(g),
        ..ModelProto::default()
    };
    let t = Instant::now();
    let listing = print_model(&model);
    let printed = t.elapsed();
    let t = Instant::now();
    let parsed = parse_model(&listing.text).expect("parses");
    let parse = t.elapsed();
    println!(
        "100k nodes: print {printed:?}, parse {parse:?}, {} bytes",
        listing.text.len()
    );
    assert_eq!(parsed.graph.map(|g| g.node.len()), Some(n));
}

/// A tool, not a check: with `ONNX_LINT_DUMP_LISTINGS=DIR`, writes the listing of every corpus
/// model to `DIR/<stem>.onnxtxt`, for `tests/it/text_crosscheck.py parse DIR`.
/// `ONNX_LINT_DUMP_LISTINGS=DIR cargo test --test it dump_listings -- --ignored`
#[test]
#[ignore = "a tool: writes listings to $ONNX_LINT_DUMP_LISTINGS"]
fn dump_listings() {
    let out = std::env::var_os("ONNX_LINT_DUMP_LISTINGS")
        .map(PathBuf::from)
        .expect("set ONNX_LINT_DUMP_LISTINGS to a folder to write listings into");
    std::fs::create_dir_all(&out).expect("the dump folder can be made");
    let mut files = Vec::new();
    onnx_files(&support::corpus_models(), &mut files);
    if let Ok(node) = support::node_corpus() {
        onnx_files(&node, &mut files);
    }
    for f in &files {
        let model = load(f).expect("corpus models load");
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
        std::fs::write(
            out.join(format!("{stem}.onnxtxt")),
            print_model(&model).text,
        )
        .expect("the listing is written");
    }
    println!("{} listings written to {}", files.len(), out.display());
}

/// With `ONNX_LINT_ONNX_TEXT=DIR[:DIR...]` (made by `tests/it/text_crosscheck.py onnx-text`),
/// parses what `onnx.printer.to_text` printed and compares the graph structure with the model
/// named in the file's `# model:` line.
/// `ONNX_LINT_ONNX_TEXT=DIR cargo test --test it onnx_printer_text_parses -- --ignored`
#[test]
#[ignore = "needs $ONNX_LINT_ONNX_TEXT, made by tests/it/text_crosscheck.py"]
fn onnx_printer_text_parses() {
    let dirs = std::env::var_os("ONNX_LINT_ONNX_TEXT")
        .expect("set ONNX_LINT_ONNX_TEXT (see tests/it/text_crosscheck.py)");
    let mut n = 0;
    let mut failures = Vec::new();
    for dir in std::env::split_paths(&dirs) {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|x| x == "txt"));
        files.sort();
        for f in files {
            n += 1;
            let text = std::fs::read_to_string(&f).expect("readable");
            let parsed = match parse_model(&text) {
                Ok(m) => m,
                Err(e) => {
                    let line = text[..e.span.offset().min(text.len())].lines().count();
                    failures.push(format!("{}:{line}: {e}", f.display()));
                    continue;
                }
            };
            let source = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("# model: "))
                .map(PathBuf::from);
            if let Some(model) = source.and_then(|p| load(&p).ok())
                && structure(&model) != structure(&parsed)
            {
                failures.push(format!(
                    "{}: {}",
                    f.display(),
                    first_difference(&structure(&model), &structure(&parsed))
                ));
            }
        }
    }
    println!(
        "{n} listings from onnx.printer, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Graph structure only: what ONNX's printer carries for sure.
fn structure(m: &ModelProto) -> String {
    fn graph(g: &GraphProto, out: &mut String) {
        let names =
            |v: &[ValueInfoProto]| v.iter().map(|x| x.name().to_owned()).collect::<Vec<_>>();
        out.push_str(&format!(
            "graph {:?} {:?} -> {:?}\n",
            g.name(),
            names(&g.input),
            names(&g.output)
        ));
        for n in &g.node {
            let attrs: Vec<_> = n.attribute.iter().map(|a| (a.name(), a.r#type)).collect();
            out.push_str(&format!(
                "  {:?} {:?}.{:?} {:?} -> {:?} {attrs:?}\n",
                n.name.as_deref().unwrap_or(""),
                n.domain(),
                n.op_type(),
                n.input,
                n.output
            ));
            for a in &n.attribute {
                a.g.as_deref()
                    .into_iter()
                    .chain(&a.graphs)
                    .for_each(|g| graph(g, out));
            }
        }
    }
    let mut out = String::new();
    if let Some(g) = &m.graph {
        graph(g, &mut out);
    }
    out
}
