//! The fuzzer: three targets drive the whole pipeline in-process under `catch_unwind`:
//! load → place (all four optimisation levels, CUDA and CPU) → rules → every output format
//! (human, json, sarif, github, `place` json) and the text listing.
//!
//! - `structure`: models from the structure-aware generator (`fuzz/generate.rs`);
//! - `bytes`: byte-level mutants of the repository's `.onnx` files and of generated models;
//! - `text`: token-level mutants of the repository's `.onnxtxt` sources and of generated
//!   models' listings.
//!
//! `fuzz_short` is part of `cargo test`: fixed seeds and case counts (deterministic, about a
//! minute on a 2-core machine in a debug build). The long run is one command:
//!
//! ```text
//! ONNX_LINT_FUZZ_SECS=3600 cargo test --release --test it fuzz_long -- --ignored --nocapture
//! ```
//!
//! (`ONNX_LINT_FUZZ_SEED` picks the seed, `ONNX_LINT_FUZZ_OUT` the folder for reproducers and
//! the progress log, default `target/fuzz`.) Every panic, and every case slower than
//! `ONNX_LINT_FUZZ_SLOW_SECS` (default 20), is saved there as a reproducer; the run fails at the
//! end if there was any. A case that aborts the process (memory) is left in `current.*`.
//! Reproducers become fixtures under `tests/fixtures/robust/` (see `robust.rs`).

mod generate;
mod mutate;
mod rng;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onnx_lint::cli::output::{Format, ModelReport, human};
use onnx_lint::cli::placement_json;
use onnx_lint::diagnostics::render::Style;
use onnx_lint::lint::{self, Settings};
use onnx_lint::model::proto::ModelProto;
use onnx_lint::model::{self, Model};
use onnx_lint::placer::{self, OptLevel};
use onnx_lint::rules::Severities;
use onnx_lint::tables::{self, Ep};
use prost::Message;

use crate::support;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Structure,
    Bytes,
    Text,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Structure => "structure",
            Target::Bytes => "bytes",
            Target::Text => "text",
        }
    }
    fn ext(self) -> &'static str {
        match self {
            Target::Text => "onnxtxt",
            _ => "onnx",
        }
    }
}

thread_local! {
    /// The message of the last panic on this thread while a case ran.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    static IN_CASE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Cases on this thread that got as far as placement.
    static PLACED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A panic hook that records panics of fuzz cases (with their location) instead of printing
/// them, and leaves every other panic to the previous hook.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CASE.with(std::cell::Cell::get) {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg} at {at}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f` as a fuzz case: `Err(panic message)` when it panicked.
fn guarded(f: impl FnOnce()) -> Result<(), String> {
    install_hook();
    IN_CASE.with(|c| c.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_CASE.with(|c| c.set(false));
    r.map_err(|_| {
        PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "panic".into())
    })
}

fn settings(level: OptLevel, eps: Vec<Ep>) -> Settings {
    Settings {
        release: tables::newest(),
        release_reason: "fuzz".into(),
        options: placer::Options {
            eps,
            level,
            ..Default::default()
        },
        severities: Severities::default(),
        dims: Default::default(),
    }
}

const LEVELS: [OptLevel; 4] = [
    OptLevel::Disable,
    OptLevel::Basic,
    OptLevel::Extended,
    OptLevel::All,
];

/// Everything after decoding: index, place at every level (CUDA; and CPU at `all`), run the
/// rules, render every format, print the listing and parse it back.
pub fn pipeline(path: &Path, proto: &ModelProto) {
    let model = match Model::from_proto(path, 0, proto.clone()) {
        Ok(m) => m,
        Err(e) => {
            if std::env::var_os("ONNX_LINT_FUZZ_DEBUG").is_some() {
                eprintln!("not loaded: {e}");
            }
            return;
        }
    };
    let listing = model::text::print_model(&model.proto);
    let _ = model::text::parse_model(&listing.text);
    drop(model);
    PLACED.with(|p| p.set(p.get() + 1));
    let mut runs: Vec<(OptLevel, Vec<Ep>)> = LEVELS
        .iter()
        .map(|&l| (l, vec![Ep::Cuda, Ep::Cpu]))
        .collect();
    runs.push((OptLevel::All, vec![Ep::Cpu]));
    for (level, eps) in runs {
        let Ok(model) = Model::from_proto(path, 0, proto.clone()) else {
            return;
        };
        let base = settings(level, eps.clone());
        let a = lint::analyse(model, &base);
        let _ = placement_json(&path.display().to_string(), &a.placement);
        let _ = human::prediction_line(&a.placement);
        let style = Style {
            color: false,
            unicode: false,
            width: 100,
        };
        for &format in Format::ALL {
            let _ = ModelReport::new(&a, &base, format, style, path);
        }
    }
}

/// The path models are analysed under (external data resolves beside it and is absent).
fn case_path(target: Target) -> PathBuf {
    std::env::temp_dir()
        .join("onnx-lint-fuzz-absent")
        .join(format!("case.{}", target.ext()))
}

/// Decodes and runs one input of `target`.
pub fn run_input(target: Target, input: &[u8]) {
    let path = case_path(target);
    match target {
        Target::Text => {
            let text = String::from_utf8_lossy(input);
            if let Ok(proto) = model::text::parse_model(&text) {
                pipeline(&path, &proto);
            }
        }
        _ => {
            if let Ok(proto) = model::decode_model(&path, bytes::Bytes::copy_from_slice(input)) {
                pipeline(&path, &proto);
            }
        }
    }
}

/// The seeds of the mutation targets: the repository's models and sources (small ones).
fn seeds(ext: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = ["tests/fixtures", "tests/it/fixtures", "examples"]
        .iter()
        .flat_map(|d| walkdir::WalkDir::new(support::repo().join(d)))
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        // Small seeds: mutants of large ones are slow and find nothing more. (The robust
        // fixtures that are slow by design are run by `robust.rs`.)
        .filter(|e| e.metadata().is_ok_and(|m| m.len() <= 16 * 1024))
        .filter(|e| {
            let n = e.file_name().to_string_lossy();
            !n.starts_with("recursive_function_chain") && !n.starts_with("fuzz_slow")
        })
        .map(|e| e.into_path())
        .collect();
    files.sort();
    files.iter().filter_map(|f| std::fs::read(f).ok()).collect()
}

/// Builds the input of case `seed` of `target`.
fn make_input(target: Target, seed: u64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut r = rng::Rng::new(seed);
    match target {
        Target::Structure => generate::Gen::new(seed).model().encode_to_vec(),
        Target::Bytes => {
            let mut base = if r.chance(1, 4) || corpus.is_empty() {
                generate::Gen::new(r.next()).model().encode_to_vec()
            } else {
                corpus[r.below(corpus.len())].clone()
            };
            let other = corpus
                .get(r.below(corpus.len()))
                .cloned()
                .unwrap_or_default();
            mutate::bytes(&mut r, &mut base, &other);
            base
        }
        Target::Text => {
            let base = if r.chance(1, 4) || corpus.is_empty() {
                model::text::print_model(&generate::Gen::new(r.next()).model()).text
            } else {
                String::from_utf8_lossy(&corpus[r.below(corpus.len())]).into_owned()
            };
            mutate::text(&mut r, &base).into_bytes()
        }
    }
}

/// What one run found.
#[derive(Default)]
struct Tally {
    cases: [u64; 3],
    failures: Vec<String>,
    slowest: (Duration, String),
}

/// The case now running, for the watchdog (label, input, start).
type Current = Arc<Mutex<Option<(String, Vec<u8>, Instant, Target)>>>;

struct Runner {
    out: Option<PathBuf>,
    slow: Duration,
    bytes_corpus: Vec<Vec<u8>>,
    text_corpus: Vec<Vec<u8>>,
    current: Current,
}

impl Runner {
    fn new(out: Option<PathBuf>) -> Runner {
        let slow = std::env::var("ONNX_LINT_FUZZ_SLOW_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Duration::from_secs(20), Duration::from_secs);
        if let Some(o) = &out {
            std::fs::create_dir_all(o).unwrap();
        }
        Runner {
            out,
            slow,
            bytes_corpus: seeds("onnx"),
            text_corpus: seeds("onnxtxt"),
            current: Arc::default(),
        }
    }

    fn save(&self, kind: &str, target: Target, seed: u64, input: &[u8]) -> String {
        let name = format!("{kind}-{}-{seed:016x}.{}", target.name(), target.ext());
        let dir = self
            .out
            .clone()
            .unwrap_or_else(|| support::repo().join("target/fuzz"));
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(&name), input);
        dir.join(name).display().to_string()
    }

    fn case(&self, target: Target, seed: u64, tally: &mut Tally) {
        let corpus = match target {
            Target::Text => &self.text_corpus,
            _ => &self.bytes_corpus,
        };
        let input = make_input(target, seed, corpus);
        if let Some(o) = &self.out {
            let _ = std::fs::write(o.join(format!("current.{}", target.ext())), &input);
        }
        let label = format!("{} seed {seed:#018x}", target.name());
        *self.current.lock().unwrap() =
            Some((label.clone(), input.clone(), Instant::now(), target));
        let start = Instant::now();
        let r = guarded(|| run_input(target, &input));
        let took = start.elapsed();
        *self.current.lock().unwrap() = None;
        tally.cases[target as usize] += 1;
        if took > tally.slowest.0 {
            tally.slowest = (took, label.clone());
        }
        if let Err(msg) = r {
            let file = self.save("crash", target, seed, &input);
            tally
                .failures
                .push(format!("{label}: panic: {msg} (reproducer: {file})"));
        } else if took > self.slow {
            let file = self.save("slow", target, seed, &input);
            tally
                .failures
                .push(format!("{label}: took {took:?} (reproducer: {file})"));
        }
    }
}

fn report(t: &Tally) -> String {
    format!(
        "cases: structure {}, bytes {}, text {} ({} loaded and placed); failures {}; slowest {:?} ({})",
        t.cases[0],
        t.cases[1],
        t.cases[2],
        PLACED.with(std::cell::Cell::get),
        t.failures.len(),
        t.slowest.0,
        t.slowest.1
    )
}

/// Part of `cargo test`: fixed seeds, fixed counts.
#[test]
fn fuzz_short() {
    let runner = Runner::new(None);
    assert!(
        !runner.bytes_corpus.is_empty() && !runner.text_corpus.is_empty(),
        "the repository's models and .onnxtxt sources are the mutation seeds"
    );
    let mut tally = Tally::default();
    for (target, count) in [
        (Target::Structure, 1500u64),
        (Target::Bytes, 2500),
        (Target::Text, 2500),
    ] {
        for i in 0..count {
            runner.case(target, 0x5eed_0000 + i, &mut tally);
        }
    }
    eprintln!("fuzz_short: {}", report(&tally));
    assert!(tally.failures.is_empty(), "{}", tally.failures.join("\n"));
}

/// The long run (see the module docs).
#[test]
#[ignore = "long: ONNX_LINT_FUZZ_SECS=3600 cargo test --release --test it fuzz_long -- --ignored --nocapture"]
fn fuzz_long() {
    let secs: u64 = std::env::var("ONNX_LINT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3600);
    let seed: u64 = std::env::var("ONNX_LINT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        });
    let out = std::env::var_os("ONNX_LINT_FUZZ_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| support::repo().join("target/fuzz"));
    let runner = Runner::new(Some(out.clone()));
    let log_path = out.join("progress.log");
    let log = |line: &str| {
        eprintln!("{line}");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
        {
            let _ = std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes());
        }
    };
    log(&format!(
        "fuzz_long: seed {seed}, {secs} s, out {}",
        out.display()
    ));
    // The watchdog saves a case that runs past the slow limit while it still runs (a hang
    // never returns to the loop).
    let watch = runner.current.clone();
    let slow = runner.slow;
    let out_dir = out.clone();
    std::thread::spawn(move || {
        let mut saved = String::new();
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let Ok(guard) = watch.lock() else { return };
            if let Some((label, input, start, target)) = guard.as_ref()
                && start.elapsed() > slow
                && *label != saved
            {
                let name = format!("hang-{}.{}", label.replace(' ', "-"), target.ext());
                let _ = std::fs::write(out_dir.join(&name), input);
                eprintln!("fuzz_long: {label} still running after {slow:?}: saved {name}");
                saved = label.clone();
            }
        }
    });
    let start = Instant::now();
    let mut tally = Tally::default();
    let mut next_log = Duration::from_secs(60);
    let mut r = rng::Rng::new(seed);
    let mut i = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
        let target = [Target::Structure, Target::Bytes, Target::Text][(i % 3) as usize];
        let before = tally.failures.len();
        runner.case(target, r.next(), &mut tally);
        for f in &tally.failures[before..] {
            log(&format!("fuzz_long: FAILURE {f}"));
        }
        i += 1;
        if start.elapsed() > next_log {
            log(&format!(
                "fuzz_long: {:?}: {}",
                start.elapsed(),
                report(&tally)
            ));
            next_log += Duration::from_secs(60);
        }
    }
    log(&format!(
        "fuzz_long: done after {:?}: {}",
        start.elapsed(),
        report(&tally)
    ));
    assert!(tally.failures.is_empty(), "{}", tally.failures.join("\n"));
}
