//! Cargo integration: a throwaway workspace (`tests/fixtures/cargo-workspace`, copied to a
//! temporary folder with models put into it) linted by the real binary the way cargo runs it;
//! the ort-crate mapping; the dev-loop cache; the pre-commit hook; the GitHub Action's steps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{self, Run};

const GEMMA: &str = "examples/gemma4-decoder.op24.onnx";
const BERT: &str = "examples/bert.torchscript.op17.onnx";

/// The fixture workspace in a temporary folder, with models:
/// - `models/bert.onnx`: declared by the workspace (`models/*.onnx`);
/// - `crates/vision/models/gemma.onnx`: declared by package `vision` (registration-gap = deny);
/// - `crates/text/assets/relu.onnx`: declared by package `text` (ort 1.28, ep cpu).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &support::repo().join("tests/fixtures/cargo-workspace"),
        dir.path(),
    );
    let root = dir.path();
    for d in ["models", "crates/vision/models", "crates/text/assets"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(support::repo().join(BERT), root.join("models/bert.onnx")).unwrap();
    std::fs::copy(
        support::repo().join(GEMMA),
        root.join("crates/vision/models/gemma.onnx"),
    )
    .unwrap();
    support::write(
        &root.join("crates/text/assets"),
        "relu.onnx",
        &support::relu_model(),
    );
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// `cargo onnx-lint ARGS` in `dir`: the binary as cargo runs it, with `CARGO` set to the cargo
/// that built the tests, no colour, a fixed width, and the target directory of the workspace.
fn cargo_lint(dir: &Path, args: &[&str]) -> Run {
    cargo_lint_env(dir, args, &[])
}

fn cargo_lint_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"));
    cmd.arg("onnx-lint")
        .args(args)
        .current_dir(dir)
        .env("CARGO", env!("CARGO"))
        .env("NO_COLOR", "1")
        .env("ONNX_LINT_WIDTH", "100")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `--format json` records by model path.
fn records(run: &Run) -> BTreeMap<String, Value> {
    let v: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}\nstdout: {}\nstderr: {}", run.stdout, run.stderr));
    let list = match v {
        Value::Array(a) => a,
        one => vec![one],
    };
    list.into_iter()
        .map(|r| (r["model"].as_str().unwrap().to_string(), r))
        .collect()
}

fn codes(record: &Value, severity: &str) -> Vec<String> {
    let mut c: Vec<String> = record["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == severity)
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect();
    c.dedup();
    c
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn workspace_root_lints_every_declared_model_with_its_release_and_severities() {
    let ws = workspace();
    let run = cargo_lint(ws.path(), &["--format", "json"]);
    assert_eq!(run.code, 1, "deny-level findings in vision\n{}", run.stderr);
    let r = records(&run);
    assert_eq!(
        r.keys().collect::<Vec<_>>(),
        [
            "crates/text/assets/relu.onnx",
            "crates/vision/models/gemma.onnx",
            "models/bert.onnx"
        ]
    );

    // vision: the release from Cargo.lock (ort 2.0.0-rc.12 → ORT 1.24), its own deny.
    let vision = &r["crates/vision/models/gemma.onnx"];
    assert_eq!(vision["ort"], "1.24.4");
    let reason = vision["ort_reason"].as_str().unwrap();
    assert!(
        reason.contains("Cargo.lock has ort 2.0.0-rc.12") && reason.contains("ONNX Runtime 1.24.2"),
        "{reason}"
    );
    assert_eq!(vision["ep"], "cuda");
    assert_eq!(codes(vision, "deny"), ["OL101"]);
    // The workspace allows memcpy; the package inherits it.
    assert!(!codes(vision, "warn").contains(&"OL201".to_string()));

    // text: its own ort and ep override Cargo.lock and the defaults.
    let text = &r["crates/text/assets/relu.onnx"];
    assert_eq!(text["ort"], "1.28.0");
    assert_eq!(
        text["ort_reason"],
        "ort = \"1.28\" in [package.metadata.onnx-lint] of crates/text/Cargo.toml"
    );
    assert_eq!(text["ep"], "cpu");

    // The workspace's own model: the workspace's rules (memcpy allowed), Cargo.lock's release.
    let bert = &r["models/bert.onnx"];
    assert_eq!(bert["ort"], "1.24.4");
    assert!(bert["summary"]["copies"].as_u64().unwrap() > 0);
    assert!(codes(bert, "warn").contains(&"OL301".to_string()));
    assert!(!codes(bert, "warn").contains(&"OL201".to_string()));
    assert_eq!(bert["summary"]["deny"], 0);
}

#[test]
fn human_output_says_which_release_and_why() {
    let ws = workspace();
    let run = cargo_lint(ws.path(), &["-p", "vision"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.starts_with(
            "note: package `vision`: ORT 1.24.4: Cargo.lock has ort 2.0.0-rc.12 (ort-sys \
             2.0.0-rc.12), which links ONNX Runtime 1.24.2 by default"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("crates/vision/models/gemma.onnx: ir 11, opsets ai.onnx 24")
            && run.stdout.contains("\n  ORT 1.24.4 (all)")
    );
}

#[test]
fn selection_follows_other_cargo_subcommands() {
    let ws = workspace();
    let root = ws.path();
    let models = |run: &Run| -> Vec<String> {
        assert_ne!(run.code, 2, "{}", run.stderr);
        records(run).into_keys().collect()
    };
    let only_text = cargo_lint(root, &["-p", "text", "--format", "json"]);
    assert_eq!(models(&only_text), ["crates/text/assets/relu.onnx"]);
    assert_eq!(only_text.code, 0);

    let both = cargo_lint(
        root,
        &["--package", "text", "-p", "vision", "--format", "json"],
    );
    assert_eq!(models(&both).len(), 2, "no workspace-level model with -p");

    // In a member's folder: that package, as `cargo build` would.
    let vision_dir = root.join("crates/vision");
    let here = cargo_lint(&vision_dir, &["--format", "json"]);
    assert_eq!(models(&here), ["models/gemma.onnx"]);
    let all = models(&cargo_lint(
        &vision_dir,
        &["--workspace", "--format", "json"],
    ));
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.contains(&"models/gemma.onnx".to_string()), "{all:?}");
    // Paths outside the current folder are shown absolute.
    for suffix in ["crates/text/assets/relu.onnx", "/models/bert.onnx"] {
        assert!(
            all.iter()
                .any(|p| p.ends_with(suffix) && Path::new(p).is_absolute()),
            "{suffix}: {all:?}"
        );
    }

    let manifest = cargo_lint(
        root,
        &[
            "--manifest-path",
            "crates/text/Cargo.toml",
            "--format",
            "json",
        ],
    );
    assert_eq!(models(&manifest), ["crates/text/assets/relu.onnx"]);

    let unknown = cargo_lint(root, &["-p", "nope"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("package `nope` is not a member")
            && unknown.stderr.contains("text, vision"),
        "{}",
        unknown.stderr
    );
    let conflict = cargo_lint(root, &["-p", "text", "models/bert.onnx"]);
    assert_eq!(conflict.code, 2, "-p takes no PATH: {}", conflict.stderr);
}

#[test]
fn workspace_globs_inside_a_package_take_that_package_configuration() {
    let ws = workspace();
    let root = ws.path();
    edit(
        &root.join("Cargo.toml"),
        "models = [\"models/*.onnx\"]",
        "models = [\"models/*.onnx\", \"crates/text/extra/*.onnx\"]",
    );
    std::fs::create_dir_all(root.join("crates/text/extra")).unwrap();
    support::write(
        &root.join("crates/text/extra"),
        "x.onnx",
        &support::relu_model(),
    );
    let run = cargo_lint(root, &["-p", "text", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = records(&run);
    assert_eq!(
        r.keys().collect::<Vec<_>>(),
        ["crates/text/assets/relu.onnx", "crates/text/extra/x.onnx"]
    );
    assert_eq!(r["crates/text/extra/x.onnx"]["ort"], "1.28.0");
    assert_eq!(r["crates/text/extra/x.onnx"]["ep"], "cpu");
}

#[test]
fn the_command_line_overrides_the_configuration() {
    let ws = workspace();
    let run = cargo_lint(
        ws.path(),
        &[
            "-p",
            "vision",
            "--ort",
            "1.31",
            "--allow",
            "registration-gap",
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = records(&run);
    let vision = &r["crates/vision/models/gemma.onnx"];
    assert_eq!(vision["ort"], "1.31.1");
    assert_eq!(vision["ort_reason"], "--ort 1.31");
    assert!(codes(vision, "deny").is_empty());
}

/// Writes `text` over `old` in the workspace's file `file`, lints, and checks the error: exit 2,
/// the file named with the line of the offending text, and `message`.
fn misconfigured(file: &str, old: &str, new: &str, needle: &str, message: &str) {
    let ws = workspace();
    let path = ws.path().join(file);
    edit(&path, old, new);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text[..text.find(needle).unwrap()].lines().count().max(1);
    let line = if text[..text.find(needle).unwrap()].ends_with('\n') {
        line + 1
    } else {
        line
    };
    let run = cargo_lint(ws.path(), &[]);
    assert_eq!(run.code, 2, "{file}: {new}\n{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(message), "{message}\n{}", run.stderr);
    let at = format!("{file}:{line}:");
    assert!(
        run.stderr.contains(&at),
        "the error points at {at}\n{}",
        run.stderr
    );
    assert!(run.stderr.contains(needle), "{}", run.stderr);
}

#[test]
fn misconfiguration_points_into_cargo_toml() {
    misconfigured(
        "crates/vision/Cargo.toml",
        "models = [\"models/*.onnx\"]",
        "modles = [\"models/*.onnx\"]",
        "modles",
        "unknown field `modles`",
    );
    misconfigured(
        "crates/vision/Cargo.toml",
        "registration-gap = \"deny\"",
        "no-such-rule = \"deny\"",
        "no-such-rule",
        "unknown rule `no-such-rule`",
    );
    misconfigured(
        "crates/vision/Cargo.toml",
        "registration-gap = \"deny\"",
        "registration-gap = \"error\"",
        "\"error\"",
        "unknown level `error`",
    );
    misconfigured(
        "crates/text/Cargo.toml",
        "models = [\"assets/*.onnx\"]",
        "models = [\"assets/[.onnx\"]",
        "\"assets/[.onnx\"",
        "bad glob `assets/[.onnx`",
    );
    misconfigured(
        "crates/text/Cargo.toml",
        "models = [\"assets/*.onnx\"]",
        "models = [\"assets/*.onnx\", \"nothing/*.onnx\"]",
        "\"nothing/*.onnx\"",
        "matches no file",
    );
    misconfigured(
        "Cargo.toml",
        "opt-level = \"all\"",
        "opt-level = \"most\"",
        "\"most\"",
        "unknown opt-level `most`",
    );
    misconfigured(
        "Cargo.toml",
        "models = [\"models/*.onnx\"]",
        "models = [\"model/*.onnx\"]",
        "\"model/*.onnx\"",
        "matches no file",
    );
}

#[test]
fn cargo_failures_and_missing_models_are_clear_errors() {
    let ws = workspace();
    let run = cargo_lint_env(ws.path(), &[], &[("CARGO", "/nonexistent/cargo")]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("`cargo metadata` failed")
            && run.stderr.contains("cannot run `/nonexistent/cargo`"),
        "{}",
        run.stderr
    );
    // Given files, a failing cargo is only a warning: the files are linted without Cargo.
    let files = cargo_lint_env(
        ws.path(),
        &["crates/text/assets/relu.onnx"],
        &[("CARGO", "/nonexistent/cargo")],
    );
    assert_eq!(files.code, 0, "{}", files.stderr);
    assert!(files.stderr.contains("warning:"), "{}", files.stderr);

    edit(&ws.path().join("Cargo.toml"), "[workspace]", "[workspace");
    let broken = cargo_lint(ws.path(), &[]);
    assert_eq!(broken.code, 2);
    assert!(
        broken.stderr.contains("`cargo metadata` failed"),
        "{}",
        broken.stderr
    );

    let ws = workspace();
    for f in [
        "Cargo.toml",
        "crates/vision/Cargo.toml",
        "crates/text/Cargo.toml",
    ] {
        let p = ws.path().join(f);
        let text = std::fs::read_to_string(&p).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("models = "))
            .collect();
        std::fs::write(&p, kept.join("\n")).unwrap();
    }
    let none = cargo_lint(ws.path(), &[]);
    assert_eq!(none.code, 2);
    assert!(none.stderr.contains("no models to lint"), "{}", none.stderr);
}

#[test]
fn ort_mapping_is_data_with_provenance_and_covers_the_issue() {
    use onnx_lint::cargo::ort_version::{Locked, infer, mapping};
    let map = mapping().unwrap();
    assert!(map.ort.len() >= 20, "alpha.1 .. rc.15");
    for e in &map.ort_sys {
        assert!(!e.source.is_empty(), "{} has no provenance", e.version);
        let minor: Vec<&str> = e.onnxruntime.split('.').take(2).collect();
        assert!(
            onnx_lint::tables::resolve(&minor.join(".")).is_ok()
                || minor[1].parse::<u32>().unwrap() < 23,
            "{} → {}: every bundled minor release resolves",
            e.version,
            e.onnxruntime
        );
    }
    for e in &map.ort {
        let sys = e.ort_sys.trim_start_matches(['=', '^']);
        assert!(
            map.ort_sys.iter().any(|s| s.version == sys),
            "ort {} names ort-sys {sys}, which is not listed",
            e.version
        );
        assert!(!e.described.is_empty());
    }
    let release = |ort: &str| {
        let locked = Locked {
            ort: vec![semver::Version::parse(ort).unwrap()],
            ort_sys: Vec::new(),
            ort_dynamic: false,
        };
        infer(&locked, None).unwrap()
    };
    for (ort, want) in [
        ("2.0.0-rc.11", "1.23"),
        ("2.0.0-rc.12", "1.24"),
        ("2.0.0-rc.13", "1.28"),
        ("2.0.0-rc.14", "1.31"),
        ("2.0.0-rc.15", "1.31"),
    ] {
        let got = release(ort);
        assert!(
            got.release.version.starts_with(&format!("{want}.")),
            "{ort} → {}",
            got.release.version
        );
        assert!(got.warning.is_none());
        assert!(got.reason.contains(ort), "{}", got.reason);
    }
    // Older than every bundled table: the nearest one, with a warning.
    let old = release("2.0.0-rc.4");
    assert_eq!(old.release.version, onnx_lint::tables::bundled()[0].version);
    assert!(
        old.warning
            .as_deref()
            .unwrap()
            .contains("ONNX Runtime 1.18.1")
    );
    // Not in the mapping: the newest bundled, with a warning.
    let new = release("2.0.0");
    assert_eq!(new.release.version, onnx_lint::tables::newest().version);
    assert!(new.warning.is_some());
    // A locked ort-sys decides (ort 2.0.0-rc.5 may resolve a newer ort-sys).
    let locked = Locked {
        ort: vec![semver::Version::parse("2.0.0-rc.12").unwrap()],
        ort_sys: vec![semver::Version::parse("2.0.0-rc.13").unwrap()],
        ort_dynamic: false,
    };
    assert!(
        infer(&locked, None)
            .unwrap()
            .release
            .version
            .starts_with("1.28.")
    );
    // Several ort versions: the one the package requires.
    let two = Locked {
        ort: vec![
            semver::Version::parse("2.0.0-rc.12").unwrap(),
            semver::Version::parse("2.0.0-rc.13").unwrap(),
        ],
        ort_sys: Vec::new(),
        ort_dynamic: false,
    };
    let req = semver::VersionReq::parse("=2.0.0-rc.12").unwrap();
    assert!(
        infer(&two, Some(&req))
            .unwrap()
            .release
            .version
            .starts_with("1.24.")
    );
    assert!(
        infer(&two, None)
            .unwrap()
            .release
            .version
            .starts_with("1.28.")
    );
    assert!(infer(&Locked::default(), None).is_none());
}

#[test]
fn an_unbundled_release_in_cargo_lock_warns_and_takes_the_nearest() {
    let ws = workspace();
    let lock = ws.path().join("Cargo.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    std::fs::write(&lock, text.replace("2.0.0-rc.12", "2.0.0-rc.4")).unwrap();
    let run = cargo_lint(ws.path(), &["-p", "vision", "--format", "json"]);
    let r = records(&run);
    let oldest = onnx_lint::tables::bundled()[0].version;
    assert_eq!(r["crates/vision/models/gemma.onnx"]["ort"], oldest);
    assert!(
        run.stderr.contains("warning:") && run.stderr.contains("ONNX Runtime 1.18.1"),
        "{}",
        run.stderr
    );
}

/// The cache entries written so far.
fn entries(target: &Path) -> Vec<PathBuf> {
    let dir = target.join("onnx-lint/cache-v2");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "json"));
    v.sort();
    v
}

#[test]
fn the_cache_answers_like_a_fresh_run_and_never_serves_a_stale_answer() {
    let ws = workspace();
    let root = ws.path();
    let target = root.join("target");
    let summary = root.join("summary.md");
    let summary_env = summary.to_str().unwrap().to_string();
    for format in ["human", "json", "github", "sarif"] {
        let env = [("GITHUB_STEP_SUMMARY", summary_env.as_str())];
        let _ = std::fs::remove_file(&summary);
        let fresh = cargo_lint_env(root, &["--format", format, "--no-cache"], &env);
        let fresh_summary = std::fs::read_to_string(&summary).unwrap_or_default();
        let _ = std::fs::remove_file(&summary);
        let first = cargo_lint_env(root, &["--format", format], &env);
        let first_summary = std::fs::read_to_string(&summary).unwrap_or_default();
        let _ = std::fs::remove_file(&summary);
        let second = cargo_lint_env(root, &["--format", format], &env);
        let second_summary = std::fs::read_to_string(&summary).unwrap_or_default();
        for run in [&first, &second] {
            assert_eq!(run.code, fresh.code, "{format}");
            assert_eq!(run.stdout, fresh.stdout, "{format}");
        }
        assert_eq!(first_summary, fresh_summary, "{format}");
        assert_eq!(second_summary, fresh_summary, "{format}");
        if format == "github" {
            assert!(fresh_summary.starts_with("## cargo onnx-lint"));
            let rows = fresh_summary.find("| `crates/text").unwrap();
            let sections = fresh_summary.find("\n### ").unwrap();
            assert!(rows < sections, "every row before the first section");
        }
    }
    let n = entries(&target).len();
    assert_eq!(n, 3 * 4, "one entry per model and format");
    assert!(target.join("onnx-lint/CACHEDIR.TAG").is_file());

    // A hit is served from the entry: doctor one, with its checksum line recomputed the way
    // `src/cache.rs` writes it, and see it come back.
    let json = cargo_lint(root, &["--format", "json", "-p", "text"]);
    let entry = entries(&target)
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains("crates/text/assets/relu.onnx\"")
        })
        .unwrap();
    let text = std::fs::read_to_string(&entry).unwrap();
    let (_, body) = text.split_once('\n').unwrap();
    let doctored = body.replace("\"ort\":\"1.28.0\"", "\"ort\":\"cached\"");
    assert_ne!(doctored, body);
    let key = entry.file_stem().unwrap().to_str().unwrap();
    let sum = {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(b"onnx-lint cache entry\0");
        h.update(key.as_bytes());
        h.update(b"\0");
        h.update(doctored.as_bytes());
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    // Edited by hand, checksum untouched: a miss, never the edited answer (issue 15).
    std::fs::write(&entry, format!("{}\n{doctored}", &text[..64])).unwrap();
    assert_eq!(
        cargo_lint(root, &["--format", "json", "-p", "text"]).stdout,
        json.stdout
    );
    std::fs::write(&entry, format!("{sum}\n{doctored}")).unwrap();
    let served = cargo_lint(root, &["--format", "json", "-p", "text"]);
    assert_eq!(
        records(&served)["crates/text/assets/relu.onnx"]["ort"],
        "cached"
    );
    std::fs::write(&entry, text).unwrap();
    assert_eq!(
        cargo_lint(root, &["--format", "json", "-p", "text"]).stdout,
        json.stdout
    );

    // One byte of the model: opset 17 → 18.
    let relu = root.join("crates/text/assets/relu.onnx");
    let mut bytes = std::fs::read(&relu).unwrap();
    let mut m18 = support::relu_model();
    m18.opset_import[0].version = Some(18);
    let b18 = prost::Message::encode_to_vec(&m18);
    assert_eq!(bytes.len(), b18.len());
    assert_eq!(bytes.iter().zip(&b18).filter(|(a, b)| a != b).count(), 1);
    bytes.copy_from_slice(&b18);
    std::fs::write(&relu, &bytes).unwrap();
    let changed = cargo_lint(root, &["--format", "json", "-p", "text"]);
    assert_eq!(
        records(&changed)["crates/text/assets/relu.onnx"]["summary"]["opsets"]["ai.onnx"],
        18
    );
    assert_eq!(
        changed.stdout,
        cargo_lint(root, &["--format", "json", "-p", "text", "--no-cache"]).stdout
    );

    // The configuration: the workspace stops allowing memcpy.
    edit(
        &root.join("Cargo.toml"),
        "memcpy = \"allow\"",
        "memcpy = \"warn\"",
    );
    let config = cargo_lint(root, &["--format", "json"]);
    assert!(codes(&records(&config)["models/bert.onnx"], "warn").contains(&"OL201".to_string()));
    assert_eq!(
        config.stdout,
        cargo_lint(root, &["--format", "json", "--no-cache"]).stdout
    );

    // The release: Cargo.lock moves to ort 2.0.0-rc.13.
    let lock = root.join("Cargo.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    std::fs::write(&lock, text.replace("2.0.0-rc.12", "2.0.0-rc.13")).unwrap();
    let release = cargo_lint(root, &["--format", "json", "-p", "vision"]);
    assert_eq!(
        records(&release)["crates/vision/models/gemma.onnx"]["ort"],
        "1.28.0"
    );
    assert_eq!(
        release.stdout,
        cargo_lint(root, &["--format", "json", "-p", "vision", "--no-cache"]).stdout
    );
}

#[test]
fn external_data_files_are_part_of_the_answer() {
    let ws = workspace();
    let root = ws.path();
    let dir = root.join("models");
    std::fs::remove_file(dir.join("bert.onnx")).unwrap();
    let w = support::external_tensor("w", &[2, 3], "w.bin", 0, Some(24));
    support::write(&dir, "ext.onnx", &support::model_with_initializer(w));
    let lint = || cargo_lint(root, &["models/ext.onnx", "--format", "json"]);
    let missing = lint();
    assert!(
        missing.stdout.contains("external-data-missing"),
        "{}",
        missing.stdout
    );
    std::fs::write(dir.join("w.bin"), [0u8; 8]).unwrap();
    let short = lint();
    assert!(
        short.stdout.contains("external-data-short"),
        "{}",
        short.stdout
    );
    assert_eq!(short.code, 1);
    std::fs::write(dir.join("w.bin"), [0u8; 24]).unwrap();
    let ok = lint();
    assert_eq!(ok.code, 0, "{}", ok.stdout);
    assert!(!ok.stdout.contains("external-data"), "{}", ok.stdout);
}

#[test]
fn the_cache_lives_in_the_cargo_target_dir() {
    let ws = workspace();
    let target = tempfile::tempdir().unwrap();
    let run = cargo_lint_env(
        ws.path(),
        &["-p", "text"],
        &[("CARGO_TARGET_DIR", target.path().to_str().unwrap())],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(entries(target.path()).len(), 1);
    assert!(!ws.path().join("target").exists());
    cargo_lint(ws.path(), &["-p", "text", "--no-cache"]);
    assert!(
        !ws.path().join("target").exists(),
        "--no-cache writes nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// pre-commit

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// `PATH` with the directory of the built binary first (where pre-commit puts a hook's tools).
fn path_with_binary() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_cargo-onnx-lint"))
        .parent()
        .unwrap()
        .to_path_buf();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap().into_string().unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs hook `id` as pre-commit does: the staged files that match `files` (and are files),
/// appended to `entry` and `args`.
fn run_hook(id: &str, repo: &Path) -> (Vec<String>, Run) {
    let hooks = yaml(&support::repo().join(".pre-commit-hooks.yaml"));
    let hook = hooks
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id)
        .unwrap_or_else(|| panic!("no hook {id}"));
    assert_ne!(hook["pass_filenames"], false);
    let files = regex::Regex::new(hook["files"].as_str().unwrap()).unwrap();
    assert_eq!(hook["types"], serde_json::json!(["file"]));
    let staged: Vec<String> = git(
        repo,
        &["diff", "--cached", "--name-only", "--diff-filter=ACMR"],
    )
    .lines()
    .filter(|f| files.is_match(f))
    .map(str::to_string)
    .collect();
    let mut words = hook["entry"].as_str().unwrap().split_whitespace();
    let program = words.next().unwrap();
    let mut cmd = Command::new(program);
    cmd.args(words)
        .args(
            hook["args"]
                .as_array()
                .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                .unwrap_or_else(Vec::new),
        )
        .args(&staged)
        .current_dir(repo)
        .env("PATH", path_with_binary())
        .env("CARGO", env!("CARGO"))
        .env("NO_COLOR", "1")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("GITHUB_STEP_SUMMARY");
    let out = cmd.output().unwrap();
    (
        staged,
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
    )
}

#[test]
fn pre_commit_hook_lints_only_the_staged_models_under_their_package_configuration() {
    let ws = workspace();
    let repo = ws.path();
    git(repo, &["init", "-q"]);
    git(
        repo,
        &[
            "add",
            "Cargo.toml",
            "Cargo.lock",
            "crates/vision/Cargo.toml",
            "crates/vision/src",
            "crates/text/Cargo.toml",
            "crates/text/src",
        ],
    );
    git(repo, &["commit", "-qm", "init"]);
    std::fs::write(repo.join("notes.md"), "a note").unwrap();
    git(repo, &["add", "notes.md", "crates/text/assets/relu.onnx"]);
    for id in ["onnx-lint", "onnx-lint-system", "onnx-lint-pip"] {
        let (staged, run) = run_hook(id, repo);
        assert_eq!(staged, ["crates/text/assets/relu.onnx"]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("\n  ORT 1.28.0 (all)"),
            "package text's ort: {}",
            run.stdout
        );
        assert!(!run.stdout.contains("gemma"), "only staged files");
    }
    // A staged model with deny-level findings under its package's rules fails the commit.
    std::fs::write(
        repo.join("crates/vision/models/gemma.onnx"),
        std::fs::read(support::repo().join(GEMMA)).unwrap(),
    )
    .unwrap();
    git(repo, &["add", "crates/vision/models/gemma.onnx"]);
    let (staged, run) = run_hook("onnx-lint", repo);
    assert_eq!(staged.len(), 2);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("note: package `vision`: ORT 1.24.4: Cargo.lock has ort")
    );
    assert!(run.stdout.contains("OL101(registration-gap)"));
}

// ---------------------------------------------------------------------------------------------
// GitHub Action

/// Replaces `${{ inputs.NAME }}` and `${{ steps.ID.outputs.NAME }}` as the runner would.
fn expand(
    text: &str,
    inputs: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, String>,
) -> String {
    let re = regex::Regex::new(r"\$\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}").unwrap();
    re.replace_all(text, |c: &regex::Captures| {
        let expr = &c[1];
        if let Some(name) = expr.strip_prefix("inputs.") {
            inputs.get(name).cloned().unwrap_or_default()
        } else {
            outputs.get(expr).cloned().unwrap_or_default()
        }
    })
    .into_owned()
}

/// Runs one `run:` step of action.yml with bash, its `env` expanded, and returns its outputs
/// (`$GITHUB_OUTPUT`), prefixed `steps.ID.outputs.`.
fn run_step(
    step: &Value,
    dir: &Path,
    inputs: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, String>,
    gh: &Path,
) -> (Run, BTreeMap<String, String>) {
    let script = step["run"].as_str().unwrap();
    assert!(
        !script.contains("${{"),
        "inputs reach scripts through env only: {script}"
    );
    let output_file = gh.join(format!("output-{}", step["id"].as_str().unwrap()));
    std::fs::write(&output_file, "").unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-e").arg("-c").arg(script);
    let wd = step["working-directory"]
        .as_str()
        .map(|w| dir.join(expand(w, inputs, outputs)))
        .unwrap_or_else(|| dir.to_path_buf());
    cmd.current_dir(wd)
        .env("GITHUB_ACTION_PATH", support::repo())
        .env("GITHUB_OUTPUT", &output_file)
        .env("GITHUB_STEP_SUMMARY", gh.join("summary.md"))
        .env("RUNNER_TOOL_CACHE", gh.join("tool-cache"))
        .env("RUNNER_OS", "Linux")
        .env("RUNNER_ARCH", "X64")
        .env("CARGO", env!("CARGO"))
        .env("NO_COLOR", "1")
        .env_remove("CARGO_TARGET_DIR");
    if let Some(env) = step["env"].as_object() {
        for (k, v) in env {
            cmd.env(k, expand(v.as_str().unwrap_or_default(), inputs, outputs));
        }
    }
    let out = cmd.output().unwrap();
    let id = step["id"].as_str().unwrap();
    let produced = std::fs::read_to_string(&output_file)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (format!("steps.{id}.outputs.{k}"), v.to_string()))
        .collect();
    (
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        produced,
    )
}

#[test]
fn action_steps_install_once_and_lint_with_annotations_summary_and_sarif() {
    let action = yaml(&support::repo().join("action.yml"));
    assert_eq!(action["runs"]["using"], "composite");
    let steps = action["runs"]["steps"].as_array().unwrap();
    let step = |id: &str| steps.iter().find(|s| s["id"] == id).unwrap().clone();
    // The install runs only on a cache miss of a cache keyed by the setup step.
    assert!(
        step("cache")["uses"]
            .as_str()
            .unwrap()
            .starts_with("actions/cache@")
    );
    assert_eq!(
        step("cache")["with"]["key"],
        "${{ steps.setup.outputs.key }}"
    );
    assert_eq!(
        step("install")["if"],
        "steps.cache.outputs.cache-hit != 'true'"
    );
    assert!(
        step("install")["run"]
            .as_str()
            .unwrap()
            .contains("cargo install --locked")
    );
    let mut inputs: BTreeMap<String, String> = action["inputs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v["default"].as_str().unwrap_or("").to_string()))
        .collect();

    let ws = workspace();
    let gh = tempfile::tempdir().unwrap();
    let mut outputs = BTreeMap::new();
    let (setup, produced) = run_step(&step("setup"), ws.path(), &inputs, &outputs, gh.path());
    assert_eq!(setup.code, 0, "{}", setup.stderr);
    outputs.extend(produced);
    let key = outputs["steps.setup.outputs.key"].clone();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        key.starts_with(&format!("cargo-onnx-lint-Linux-X64-{version}-")),
        "keyed on the version: {key}"
    );
    // Same sources, same key: a second job hits the cache.
    let (_, again) = run_step(
        &step("setup"),
        ws.path(),
        &inputs,
        &BTreeMap::new(),
        gh.path(),
    );
    assert_eq!(again["steps.setup.outputs.key"], key);

    // The install step (cargo install) is what a cache miss runs; put the built binary there.
    let bin = PathBuf::from(&outputs["steps.setup.outputs.bin"]);
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_cargo-onnx-lint"), &bin).unwrap();

    inputs.insert("sarif".into(), "out/onnx-lint.sarif".into());
    let (lint, produced) = run_step(&step("lint"), ws.path(), &inputs, &outputs, gh.path());
    assert_eq!(
        lint.code, 1,
        "deny-level findings fail the step\n{}",
        lint.stderr
    );
    assert!(
        lint.stdout
            .lines()
            .any(|l| l.starts_with("::error file=crates/vision/models/gemma.onnx")),
        "{}",
        lint.stdout
    );
    let summary = std::fs::read_to_string(gh.path().join("summary.md")).unwrap();
    assert!(summary.starts_with("## cargo onnx-lint"), "{summary}");
    assert!(summary.contains("crates/text/assets/relu.onnx"));
    assert_eq!(produced["steps.lint.outputs.exit-code"], "1");
    let sarif_path = &produced["steps.lint.outputs.sarif"];
    assert_eq!(Path::new(sarif_path), ws.path().join("out/onnx-lint.sarif"));
    let sarif: Value = serde_json::from_str(&std::fs::read_to_string(sarif_path).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert!(!sarif["runs"][0]["results"].as_array().unwrap().is_empty());

    // fail-on-findings off: the step passes, the exit code is still reported.
    inputs.insert("fail-on-findings".into(), "false".into());
    inputs.insert("sarif".into(), String::new());
    inputs.insert("args".into(), "-p vision".into());
    let (soft, produced) = run_step(&step("lint"), ws.path(), &inputs, &outputs, gh.path());
    assert_eq!(soft.code, 0, "{}", soft.stderr);
    assert_eq!(produced["steps.lint.outputs.exit-code"], "1");
    assert!(!produced.contains_key("steps.lint.outputs.sarif"));
    assert!(!soft.stdout.contains("relu.onnx"), "args reach the linter");

    // A usage error always fails.
    inputs.insert("args".into(), "-p nope".into());
    let (bad, _) = run_step(&step("lint"), ws.path(), &inputs, &outputs, gh.path());
    assert_eq!(bad.code, 2);
}

#[test]
fn readme_workflow_example_uses_the_action_inputs() {
    let readme = std::fs::read_to_string(support::repo().join("README.md")).unwrap();
    let action = yaml(&support::repo().join("action.yml"));
    let start = readme
        .find("```yaml\nname: onnx-lint")
        .expect("workflow example in README");
    let body = &readme[start + "```yaml\n".len()..];
    let body = &body[..body.find("```").unwrap()];
    let workflow: Value = serde_norway::from_str(body).unwrap();
    let steps = workflow["jobs"]["onnx-lint"]["steps"].as_array().unwrap();
    let lint = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.contains("cargo-onnx-lint"))
        })
        .unwrap();
    for key in lint["with"].as_object().unwrap().keys() {
        assert!(action["inputs"].get(key).is_some(), "unknown input {key}");
    }
    let upload = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("github/codeql-action/upload-sarif"))
        })
        .unwrap();
    assert_eq!(upload["with"]["sarif_file"], lint["with"]["sarif"]);
    let precommit = readme
        .find("```yaml\nrepos:")
        .expect("pre-commit example in README");
    let body = &readme[precommit + "```yaml\n".len()..];
    let config: Value = serde_norway::from_str(&body[..body.find("```").unwrap()]).unwrap();
    let ids: Vec<&str> = config["repos"][0]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["onnx-lint"]);
}

/// `ort` with `load-dynamic` links no ONNX Runtime of its own: Cargo.lock does not say which
/// release runs, and the tool says so instead of guessing from it.
#[test]
fn load_dynamic_is_detected_from_the_manifest_and_from_cargo_lock() {
    let newest = onnx_lint::tables::newest().version;
    // On the dependency.
    let ws = workspace();
    edit(
        &ws.path().join("crates/vision/Cargo.toml"),
        "ort = \"=2.0.0-rc.12\"",
        "ort = { version = \"=2.0.0-rc.12\", features = [\"load-dynamic\"] }",
    );
    let run = cargo_lint(ws.path(), &["-p", "vision", "--format", "json"]);
    let r = records(&run);
    assert_eq!(r["crates/vision/models/gemma.onnx"]["ort"], newest);
    for needle in [
        "package `vision` depends on `ort` with its `load-dynamic` feature",
        "Pass `--ort <VERSION>` or set `ort = \"...\"`",
    ] {
        assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
    }
    // Through a feature of the package.
    let ws = workspace();
    let manifest = ws.path().join("crates/vision/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            "[dependencies]",
            "[features]\ndynamic = [\"ort/load-dynamic\"]\n\n[dependencies]",
        ),
    )
    .unwrap();
    let run = cargo_lint(ws.path(), &["-p", "vision"]);
    assert!(
        run.stderr
            .contains("package `vision`'s feature `dynamic` enables `ort/load-dynamic`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.starts_with(&format!(
            "note: package `vision`: ORT {newest}: the newest bundled release"
        )),
        "{}",
        run.stdout
    );
    // Only Cargo.lock says so: `ort` locked with `libloading`.
    let ws = workspace();
    edit(
        &ws.path().join("Cargo.lock"),
        " \"ort-sys\",\n]",
        " \"libloading\",\n \"ort-sys\",\n]",
    );
    let run = cargo_lint(ws.path(), &["-p", "vision", "--format", "json"]);
    assert_eq!(
        records(&run)["crates/vision/models/gemma.onnx"]["ort"],
        newest
    );
    assert!(run.stderr.contains("`libloading`"), "{}", run.stderr);
    // `--ort` settles it, without a warning.
    let run = cargo_lint(
        ws.path(),
        &["-p", "vision", "--ort", "1.24", "--format", "json"],
    );
    assert_eq!(
        records(&run)["crates/vision/models/gemma.onnx"]["ort"],
        "1.24.4"
    );
    assert!(!run.stderr.contains("load-dynamic"), "{}", run.stderr);
}

/// `place` takes the release and options from the package's configuration and Cargo.lock, as
/// the lint command does.
#[test]
fn place_uses_the_package_configuration_and_cargo_lock() {
    let ws = workspace();
    let run = cargo_lint(
        ws.path(),
        &[
            "place",
            "crates/text/assets/relu.onnx",
            "crates/vision/models/gemma.onnx",
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = records(&run);
    let text = &r["crates/text/assets/relu.onnx"];
    assert!(text["ort"].as_str().unwrap().starts_with("1.28."), "{text}");
    assert_eq!(text["all_nodes_on"]["CPUExecutionProvider"], 1, "ep = cpu");
    assert_eq!(
        r["crates/vision/models/gemma.onnx"]["ort"], "1.24.4",
        "from Cargo.lock"
    );
    assert!(
        run.stderr
            .contains("note: package `vision`: ORT 1.24.4: Cargo.lock has ort"),
        "{}",
        run.stderr
    );
}

/// Mistakes in several manifests are all reported in one run.
#[test]
fn every_manifest_mistake_is_reported_at_once() {
    let ws = workspace();
    edit(
        &ws.path().join("crates/vision/Cargo.toml"),
        "registration-gap = \"deny\"",
        "registration-gpa = \"deny\"",
    );
    edit(
        &ws.path().join("crates/text/Cargo.toml"),
        "ep = \"cpu\"",
        "ep = \"cpux\"",
    );
    let run = cargo_lint(ws.path(), &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    for needle in [
        "unknown rule `registration-gpa`",
        "did you mean `registration-gap`?",
        "crates/vision/Cargo.toml:",
        "unknown ep `cpux`; did you mean `cpu`?",
        "crates/text/Cargo.toml:",
    ] {
        assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
    }
}
