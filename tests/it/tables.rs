//! The embedded kernel tables stay honest: they parse, are canonical, match what ORT enumerated,
//! and a new release shows its delta in the summary snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use onnx_lint::tables::{self, Ep, KernelDef, KernelTable};

fn all() -> impl Iterator<Item = (&'static tables::Bundled, &'static KernelTable)> {
    tables::bundled().iter().map(|b| (b, b.table()))
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_table_parses_and_names_its_release() {
    for (b, t) in all() {
        assert_eq!(t.release().ort, b.version, "{}", b.file_name);
        assert_eq!(b.file_name, format!("ort-{}.toml", b.version));
        assert!(
            t.release()
                .wheel
                .starts_with(&format!("onnxruntime_gpu-{}-", b.version))
        );
        assert_eq!(t.release().sha256.len(), 64);
        assert!(t.iter_kernels().any(|k| k.ep == Ep::Cuda));
        assert!(t.iter_kernels().any(|k| k.ep == Ep::Cpu));
    }
}

/// A bundled release's TOML source (`kernel-tables/<file_name>`; the binary embeds only its
/// compact form).
fn toml_of(b: &tables::Bundled) -> String {
    std::fs::read_to_string(repo().join("kernel-tables").join(b.file_name)).expect("readable")
}

#[test]
fn tables_are_canonical() {
    for (b, t) in all() {
        let written = tables::write(t);
        let text = toml_of(b);
        if written != text {
            let line = written
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .map_or(written.lines().count().min(text.lines().count()), |i| i);
            panic!(
                "{} is not canonical; first difference at line {}:\n  file:    {:?}\n  written: {:?}",
                b.file_name,
                line + 1,
                text.lines().nth(line),
                written.lines().nth(line)
            );
        }
    }
}

#[test]
fn bundled_list_matches_the_directory_and_is_sorted() {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("kernel-tables"))
        .expect("kernel-tables/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    files.sort();
    let mut bundled: Vec<String> = tables::all().map(|b| b.file_name.to_string()).collect();
    bundled.sort();
    assert_eq!(
        files, bundled,
        "embedded.rs must list every kernel-tables/*.toml"
    );
    let versions: Vec<Vec<u64>> = tables::bundled()
        .iter()
        .map(|b| {
            b.version
                .split('.')
                .map(|c| c.parse().expect("numeric"))
                .collect()
        })
        .collect();
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "bundled() is sorted by version"
    );
    assert_eq!(
        tables::newest().version,
        tables::bundled().last().expect("some").version
    );
    for (b, _) in all() {
        let on_disk = std::fs::read(repo().join(format!("kernel-tables/ort-{}.bin", b.version)))
            .expect("readable");
        assert!(
            on_disk == b.compact,
            "ort-{}.bin is the embedded one",
            b.version
        );
    }
}

/// ONNX type strings as ORT spells them.
fn known_type(t: &str) -> bool {
    const ELEMENTS: &[&str] = &[
        "float",
        "double",
        "float16",
        "bfloat16",
        "int2",
        "int4",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint2",
        "uint4",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "string",
        "complex64",
        "complex128",
        "float8e4m3fn",
        "float8e4m3fnuz",
        "float8e5m2",
        "float8e5m2fnuz",
        "float8e8m0",
        "float4e2m1",
    ];
    let inner = |prefix: &str| t.strip_prefix(prefix).and_then(|r| r.strip_suffix(')'));
    if let Some(e) = inner("tensor(").or_else(|| inner("sparse_tensor(")) {
        return ELEMENTS.contains(&e);
    }
    if let Some(x) = inner("seq(").or_else(|| inner("optional(")) {
        return known_type(x);
    }
    if let Some(kv) = inner("map(")
        && let Some((k, v)) = kv.split_once(',')
    {
        // ORT spells maps both `map(int64, float)` (schemas) and `map(int64,tensor(float))`.
        let v = v.trim_start();
        return ELEMENTS.contains(&k) && (ELEMENTS.contains(&v) || known_type(v));
    }
    false
}

#[test]
fn every_type_name_is_known() {
    for (b, t) in all() {
        for (name, list) in t.typesets() {
            assert!(
                list.len() >= 2,
                "{}: type set {name} has fewer than two types",
                b.file_name
            );
            for ty in list {
                assert!(
                    known_type(ty),
                    "{}: type set {name}: unknown type {ty}",
                    b.file_name
                );
            }
        }
        for k in t.iter_kernels() {
            for (_, list) in k.types.iter() {
                for ty in list {
                    assert!(known_type(ty), "{}: {} {}: {ty}", b.file_name, k.ep, k.op);
                }
            }
        }
        for s in t.iter_schemas() {
            for (_, list) in s.type_constraints.iter() {
                for ty in list {
                    assert!(known_type(ty), "{}: schema {}: {ty}", b.file_name, s.name);
                }
            }
            for p in s.inputs.iter().chain(&s.outputs) {
                assert!(
                    s.allowed(&p.type_str).is_some() || known_type(&p.type_str),
                    "{}: schema {}-{} parameter {}: {}",
                    b.file_name,
                    s.name,
                    s.since,
                    p.name,
                    p.type_str
                );
            }
        }
    }
}

#[test]
fn every_type_set_is_used() {
    for (b, t) in all() {
        let mut used = BTreeSet::new();
        let lists = t
            .iter_kernels()
            .flat_map(|k| k.types.iter())
            .chain(t.iter_schemas().flat_map(|s| s.type_constraints.iter()));
        for (_, list) in lists {
            used.insert(list.clone());
        }
        for (name, list) in t.typesets() {
            assert!(
                used.contains(list),
                "{}: type set {name} is unused",
                b.file_name
            );
        }
    }
}

/// Two registrations of one (provider, domain, op) that can match the same since-version must
/// differ in some type constraint they share (typed registrations), or ORT's choice between them
/// would depend on registration order.
#[test]
fn no_overlapping_registrations() {
    for (b, t) in all() {
        let mut groups: BTreeMap<(Ep, &str, &str), Vec<&KernelDef>> = BTreeMap::new();
        for k in t.iter_kernels() {
            groups.entry((k.ep, &k.domain, &k.op)).or_default().push(k);
        }
        for ((ep, domain, op), rows) in groups {
            for (i, a) in rows.iter().enumerate() {
                for c in &rows[i + 1..] {
                    let a_hi = a.until.unwrap_or(a.since);
                    let c_hi = c.until.unwrap_or(c.since);
                    let common = (a.since.max(c.since)..=a_hi.min(c_hi))
                        .any(|s| a.matches_since(s) && c.matches_since(s));
                    if !common {
                        continue;
                    }
                    let disjoint = a.types.iter().any(|(n, la)| {
                        c.allowed(n)
                            .is_some_and(|lc| la.iter().all(|x| !lc.contains(x)))
                    });
                    assert!(
                        disjoint,
                        "{}: {ep} {domain} {op}: {} and {} overlap",
                        b.file_name,
                        a.range_label(),
                        c.range_label()
                    );
                }
            }
        }
    }
}

type KernelKey = (
    String,
    String,
    String,
    i64,
    Option<i64>,
    Vec<(String, Vec<String>)>,
);

fn key_of(k: &KernelDef) -> KernelKey {
    (
        k.ep.name().to_string(),
        k.domain.clone(),
        k.op.clone(),
        k.since,
        k.until,
        k.types.to_vec(),
    )
}

/// The tables list exactly the kernels ORT enumerated (recorded by the generator).
#[test]
fn kernels_equal_the_recorded_enumeration() {
    for (b, t) in all() {
        let path = repo()
            .join("tests/fixtures/kernel-enum")
            .join(format!("ort-{}.json.gz", b.version));
        let file = std::fs::File::open(&path).expect("enumeration fixture exists");
        let mut text = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .expect("gzip");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(doc["ort"], b.version);
        let mut recorded: Vec<KernelKey> = doc["kernels"]
            .as_array()
            .expect("kernels")
            .iter()
            .map(|k| {
                let s = |f: &str| k[f].as_str().expect("string").to_string();
                let domain = s("domain");
                let until = k["until"].as_i64().expect("until");
                let types = k["types"]
                    .as_object()
                    .expect("types")
                    .iter()
                    .map(|(n, l)| {
                        let mut l: Vec<String> = l
                            .as_array()
                            .expect("list")
                            .iter()
                            .map(|x| x.as_str().expect("type").to_string())
                            .collect();
                        l.sort();
                        (n.clone(), l)
                    })
                    .collect();
                (
                    s("provider"),
                    tables::normalize_domain(&domain).to_string(),
                    s("op"),
                    k["since"].as_i64().expect("since"),
                    (until != i64::from(i32::MAX)).then_some(until),
                    types,
                )
            })
            .collect();
        let mut ours: Vec<KernelKey> = t.iter_kernels().map(key_of).collect();
        recorded.sort();
        ours.sort();
        assert_eq!(
            ours.len(),
            recorded.len(),
            "{}: number of kernels",
            b.file_name
        );
        for (a, r) in ours.iter().zip(&recorded) {
            assert_eq!(a, r, "{}: first kernel that differs", b.file_name);
        }
        let opsets: BTreeMap<String, i64> = doc["opsets"]
            .as_object()
            .expect("opsets")
            .iter()
            .map(|(d, v)| {
                (
                    tables::normalize_domain(d).to_string(),
                    v.as_i64().expect("int"),
                )
            })
            .collect();
        assert_eq!(&opsets, t.opsets(), "{}: opsets", b.file_name);
    }
}

#[test]
fn host_memory_arguments_are_cuda_only_and_in_range() {
    for (b, t) in all() {
        for k in t.iter_kernels() {
            if k.ep == Ep::Cpu {
                assert!(k.cpu_inputs.is_empty() && k.cpu_outputs.is_empty());
            }
            if !k.cpu_inputs.is_empty() || !k.cpu_outputs.is_empty() {
                let src = k
                    .mem_source
                    .as_deref()
                    .expect("host-memory facts name their source");
                for key in src.split('+') {
                    assert!(
                        t.memory_sources().contains_key(key),
                        "{}: source {key}",
                        b.file_name
                    );
                }
            }
        }
    }
}

#[test]
fn resolve_and_lookups() {
    let newest = tables::newest();
    assert_eq!(
        tables::resolve(newest.version).expect("exact").version,
        newest.version
    );
    assert_eq!(tables::resolve("1.24").expect("prefix").version, "1.24.4");
    assert_eq!(
        tables::resolve("v1.24.4").expect("v prefix").version,
        "1.24.4"
    );
    assert_eq!(tables::resolve("1").expect("major").version, newest.version);
    for bad in ["1.18", "1.24.3", "", "latest", "1.24.4.1", "1..2"] {
        let err = tables::resolve(bad).expect_err(bad);
        let text = err.to_string();
        assert!(text.contains("unknown ORT release"), "{text}");
        let help = miette::Diagnostic::help(&err).expect("help").to_string();
        assert!(
            help.contains("1.23.2") && help.contains(newest.version),
            "{help}"
        );
    }

    let t = tables::resolve("1.24.4").expect("bundled").table();
    assert_eq!(t.max_opset(""), t.max_opset("ai.onnx"));
    assert_eq!(t.max_opset("ai.onnx"), Some(25));
    assert_eq!(t.max_opset("no.such.domain"), None);
    let reshape = t.kernels(Ep::Cuda, "", "Reshape");
    assert_eq!(reshape, t.kernels(Ep::Cuda, "ai.onnx", "Reshape"));
    // The "opset 24 false positive": 1.24.4's CUDA Reshape stops at 23+.
    assert_eq!(reshape[0].range_label(), "23+");
    assert!(!reshape.iter().any(|k| k.matches_since(24)));
    assert_eq!(reshape[0].cpu_inputs, vec![1]);
    assert!(t.kernels(Ep::Cuda, "ai.onnx", "NoSuchOp").is_empty());
    let history: Vec<i64> = t.schemas("", "Reshape").iter().map(|s| s.since).collect();
    assert!(history.windows(2).all(|w| w[0] < w[1]), "{history:?}");
    assert_eq!(t.schema("", "Reshape", 24).expect("schema").since, 24);
    assert_eq!(t.schema("", "Reshape", 22).expect("schema").since, 21);
    assert!(t.schema("", "Reshape", 0).is_none());
    let upsample = t.schema("", "Upsample", 20).expect("schema");
    assert!(upsample.deprecated);
    let concat = t.schema("", "Concat", 13).expect("schema");
    assert_eq!(
        (concat.min_inputs, concat.max_inputs),
        (1, tables::UNBOUNDED)
    );
    assert_eq!(concat.inputs[0].option, tables::ParamOption::Variadic);
    assert_eq!(concat.inputs[0].min_arity, 1);
    assert_eq!(t.schema("", "Loop", 11).expect("schema").min_inputs, 2);
    assert_eq!(format!("{}", Ep::Cuda), "CUDAExecutionProvider");
    assert_eq!(format!("{}", Ep::Cpu), "CPUExecutionProvider");
}

#[test]
fn show_json_has_the_design_shape() {
    let t = tables::resolve("1.24").expect("bundled").table();
    let v = tables::show_json(t);
    assert_eq!(v["ort"], "1.24.4");
    assert_eq!(v["onnx_opset"]["ai.onnx"], 25);
    assert!(v["source"].as_str().expect("source").contains(" sha256:"));
    let kernels = v["kernels"].as_array().expect("kernels");
    assert_eq!(kernels.len(), t.iter_kernels().count());
    let reshape = kernels
        .iter()
        .find(|k| k["ep"] == "CUDAExecutionProvider" && k["op"] == "Reshape" && k["since"] == 23)
        .expect("CUDA Reshape 23+");
    assert_eq!(reshape["until"], serde_json::Value::Null);
    assert_eq!(
        reshape["types"]["shape"],
        serde_json::json!(["tensor(int64)"])
    );
    assert_eq!(reshape["cpu_inputs"], serde_json::json!([1]));
    let pretty: serde_json::Value =
        serde_json::from_str(&tables::show_json_pretty(t)).expect("pretty JSON parses");
    assert_eq!(pretty, v);
}

/// Per release: registrations and ops per provider, and what changed against the previous
/// release (ops gained or lost, ops whose version ranges changed). Review its diff when adding a
/// release.
#[test]
fn release_summary() {
    let mut out = String::new();
    type OpRanges = BTreeMap<(Ep, String, String), Vec<String>>;
    let mut prev: Option<(&str, OpRanges)> = None;
    for (b, t) in all() {
        let mut ops = OpRanges::new();
        for k in t.iter_kernels() {
            let ranges = ops
                .entry((k.ep, k.domain.clone(), k.op.clone()))
                .or_default();
            let label = k.range_label();
            if !ranges.contains(&label) {
                ranges.push(label);
            }
        }
        let opsets: Vec<String> = t.opsets().iter().map(|(d, v)| format!("{d} {v}")).collect();
        out.push_str(&format!(
            "## {}\nopsets: {}\n",
            b.version,
            opsets.join(", ")
        ));
        for ep in [Ep::Cuda, Ep::Cpu] {
            let n = t.iter_kernels().filter(|k| k.ep == ep).count();
            let n_ops = ops.keys().filter(|(e, _, _)| *e == ep).count();
            let host = t
                .iter_kernels()
                .filter(|k| k.ep == ep && (!k.cpu_inputs.is_empty() || !k.cpu_outputs.is_empty()))
                .count();
            out.push_str(&format!(
                "{ep}: {n} registrations, {n_ops} ops, {host} with host-memory arguments\n"
            ));
        }
        out.push_str(&format!("schemas: {}\n", t.iter_schemas().count()));
        if let Some((pv, before)) = &prev {
            out.push_str(&format!("changes since {pv}:\n"));
            for (key, ranges) in &ops {
                match before.get(key) {
                    None => out.push_str(&format!(
                        "  + {} {} {}: {}\n",
                        key.0,
                        key.1,
                        key.2,
                        ranges.join(" ")
                    )),
                    Some(old) if old != ranges => out.push_str(&format!(
                        "  ~ {} {} {}: {} -> {}\n",
                        key.0,
                        key.1,
                        key.2,
                        old.join(" "),
                        ranges.join(" ")
                    )),
                    Some(_) => {}
                }
            }
            for key in before.keys().filter(|k| !ops.contains_key(*k)) {
                out.push_str(&format!("  - {} {} {}\n", key.0, key.1, key.2));
            }
        }
        out.push('\n');
        prev = Some((b.version, ops));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn cli_list_and_show() {
    use onnx_lint::cli::{Format, tables as cli_tables};
    insta::assert_snapshot!(cli_tables::list(Format::Human));
    let list: serde_json::Value =
        serde_json::from_str(&cli_tables::list(Format::Json)).expect("list JSON");
    assert_eq!(list["newest"], tables::newest().version);
    assert_eq!(
        list["releases"].as_array().expect("releases").len(),
        tables::bundled().len()
    );
    let shown: serde_json::Value =
        serde_json::from_str(&cli_tables::show("1.24", Format::Json).expect("bundled"))
            .expect("show JSON");
    assert_eq!(shown["ort"], "1.24.4");
    let human = cli_tables::show("1.24.4", Format::Human).expect("bundled");
    assert!(human.starts_with("ORT 1.24.4\n"), "{human}");
    assert!(human.contains("Reshape"));
    let err = cli_tables::show("2.0", Format::Json).expect_err("not bundled");
    assert_eq!(
        miette::Diagnostic::code(&err).map(|c| c.to_string()),
        Some("onnx_lint::tables::unknown_release".to_string())
    );
}

/// `kernel-tables/ort-<v>.bin` is the compact form of `ort-<v>.toml`, byte for byte, and decodes
/// to a table that writes the TOML back exactly. `ONNX_LINT_BLESS=1` rewrites the `.bin` files.
#[test]
fn compact_tables_match_their_toml() {
    let bless = std::env::var_os("ONNX_LINT_BLESS").is_some();
    for b in tables::bundled() {
        let text = toml_of(b);
        let parsed = tables::format::parse(b.file_name, &text).expect("table parses");
        let bytes = tables::compact::encode(&parsed);
        let bin = format!("ort-{}.bin", b.version);
        if bless {
            std::fs::write(repo().join("kernel-tables").join(&bin), &bytes).expect("write .bin");
            continue;
        }
        assert!(
            bytes == b.compact,
            "kernel-tables/{bin} is stale: regenerate it with `ONNX_LINT_BLESS=1 cargo test --test it tables`"
        );
        let decoded = tables::compact::decode(b.compact).expect("compact table decodes");
        assert!(
            tables::write(&decoded) == text,
            "kernel-tables/{bin} does not decode to {}",
            b.file_name
        );
    }
}

#[test]
fn attribute_lists_cover_every_schema_and_drive_the_load_check() {
    use onnx_lint::tables::attributes::AttributeError;
    for (b, t) in all() {
        let attrs = b.attributes();
        assert_eq!(
            Some(attrs as *const _),
            tables::attributes_of(b.version).map(|a| a as *const _)
        );
        // One line per schema version ORT bundles: the same set as the kernel table's schemas.
        let mut missing = Vec::new();
        for s in t.iter_schemas() {
            if attrs.get(&s.domain, &s.name, s.since).is_none() {
                missing.push(format!("{} {} {}", s.domain, s.name, s.since));
            }
        }
        assert!(missing.is_empty(), "{}: {missing:?}", b.version);
        assert_eq!(attrs.len(), t.iter_schemas().count(), "{}", b.version);
        // Cast always requires `to`; Cast-1 has no `saturate`.
        assert_eq!(
            attrs.verify("ai.onnx", "Cast", 1, ["to"]),
            None,
            "{}",
            b.version
        );
        assert_eq!(
            attrs.verify("ai.onnx", "Cast", 1, ["to", "saturate"]),
            Some(AttributeError::Unrecognized("saturate".into()))
        );
        assert_eq!(
            attrs.verify("ai.onnx", "Cast", 13, []),
            Some(AttributeError::MissingRequired("to".into()))
        );
        assert_eq!(
            attrs.verify("ai.onnx", "Cast", 13, ["to", "__internal"]),
            None
        );
    }
    // Attention's `left_window_size` (newer ONNX node tests use it) is unknown to 1.31.1's schema.
    let a = tables::attributes_of("1.31.1").expect("bundled");
    assert!(matches!(
        a.verify("ai.onnx", "Attention", 23, ["left_window_size"]),
        Some(AttributeError::Unrecognized(_))
    ));
}

/// Tables are keyed by ORT release and package: a release resolves among the packages a
/// provider list names (the first preferred), a package's table by its own key, and a table
/// that names its package round-trips that key through the TOML and the compact form.
#[test]
fn tables_are_keyed_by_release_and_package() {
    let gpu = tables::DEFAULT_PACKAGE;
    assert_eq!(
        tables::resolve_in("1.24", &[gpu]).expect("1.24").version,
        "1.24.4"
    );
    assert_eq!(
        tables::resolve_in(&format!("{gpu}-1.24.4"), &[gpu])
            .expect("by key")
            .key(),
        format!("{gpu}-1.24.4")
    );
    assert_eq!(
        tables::resolve_in(&format!("{gpu}@1.23"), &[gpu])
            .expect("by key, a prefix")
            .version,
        "1.23.2"
    );
    assert!(tables::resolve_in("1.24", &["onnxruntime-no-such-package"]).is_err());
    assert_eq!(
        tables::newest_in(&[gpu]).map(|b| b.version),
        Some(tables::newest().version)
    );
    for b in tables::all() {
        let (package, version) = b.table().package();
        assert_eq!((package, version), (b.package, b.package_version));
        assert!(std::ptr::eq(
            tables::bundled_of(b.table()).expect("found"),
            b
        ));
    }
    // A table that names its package keeps it through both forms.
    let text = toml_of(tables::bundled().first().expect("one")).replacen(
        "\nwheel = ",
        "\npackage = \"onnxruntime-ep-example\"\nversion = \"0.4.0\"\nwheel = ",
        1,
    );
    let parsed = tables::format::parse("example.toml", &text).expect("parses");
    assert_eq!(parsed.package(), ("onnxruntime-ep-example", "0.4.0"));
    assert_eq!(
        tables::write(&parsed),
        text,
        "writes the keys back in place"
    );
    let decoded =
        tables::compact::decode(&tables::compact::encode(&parsed)).expect("compact round trip");
    assert_eq!(decoded.package(), ("onnxruntime-ep-example", "0.4.0"));
}
