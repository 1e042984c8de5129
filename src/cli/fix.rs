//! `--fix`, `--diff`, `--unsafe-fixes`, `-o/--output`: apply the fixes findings carry, re-analyse,
//! and report what changed (`28 → 0 copies, 19 → 0 CPU nodes`) in every format.
//!
//! Rounds: analyse, collect the fixes (safe ones; unsafe ones too with `--unsafe-fixes`), apply
//! them to the bytes, decode and index the result again, and repeat until no fix applies (at most
//! [`MAX_ROUNDS`]). Nothing is written before the last round succeeded; `--diff` writes nothing.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::check;
pub use super::output::FixOptions;
use super::output::{self, FixCounts, Fixed, Format, ModelReport, Report, Sink};
use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK};
use crate::analysis::opset_lowering::{self, Verdict};
use crate::diagnostics::render::Style;
use crate::diagnostics::{Fix, FixSafety, Severity};
use crate::fix;
use crate::lint::{self, Analysis, Settings};
use crate::model::{self, Model, ProblemLevel};

/// Rounds of apply-and-re-analyse before giving up on convergence.
pub const MAX_ROUNDS: usize = 8;

// ---------------------------------------------------------------------------------------------
// The lint API this module uses, in one place: analysing a model and rendering the final report.

fn analyse(model: Model, settings: &Settings) -> Analysis {
    lint::analyse(model, settings)
}

/// The final analysis rendered in `format` (SARIF results with paths relative to the working
/// directory).
fn final_report(a: &Analysis, settings: &Settings, format: Format) -> ModelReport {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let style = Style {
        color: false,
        unicode: tty,
        width: output::width(),
    };
    let base = std::env::current_dir().unwrap_or_default();
    ModelReport::new(a, settings, format, style, &base)
}

// ---------------------------------------------------------------------------------------------

/// Fixes every model of every group (model files or folders under one set of settings); prints
/// one report in `format`; returns the exit code.
pub fn fix_groups(groups: &[(&[PathBuf], &Settings)], format: Format, opts: &FixOptions) -> u8 {
    let Some(mut writer) = format.emitter().fix(opts) else {
        eprintln!("error: {}", format.refusal(Report::Fix));
        return EXIT_ERROR;
    };
    let mut jobs: Vec<(PathBuf, &Settings)> = Vec::new();
    for (targets, settings) in groups {
        match check::expand_paths(targets) {
            Ok(files) => jobs.extend(files.into_iter().map(|f| (f, *settings))),
            Err(e) => {
                eprintln!("{}", output::render_report(&miette::Report::new(e)));
                return EXIT_ERROR;
            }
        }
    }
    if jobs.is_empty() {
        eprintln!("error: no `*.onnx` files to fix");
        return EXIT_ERROR;
    }
    if opts.output.is_some() && jobs.len() != 1 {
        eprintln!(
            "error: -o/--output takes one model, and {} were given",
            jobs.len()
        );
        return EXIT_ERROR;
    }
    let mut exit = EXIT_OK;
    let mut done: Vec<Fixed> = Vec::new();
    let mut sink = Sink::new(None);
    for (file, settings) in &jobs {
        match fix_one(file, settings, format, opts) {
            Ok(o) => {
                exit = exit.max(o.report.exit);
                if opts.diff && !o.diff.is_empty() {
                    exit = exit.max(EXIT_FINDINGS);
                }
                if opts.exit_non_zero_on_fix && o.written.is_some() && !o.applied.is_empty() {
                    exit = exit.max(EXIT_FINDINGS);
                }
                done.push(o);
            }
            Err(message) => {
                exit = EXIT_ERROR;
                writer.failed(file, &message, &mut sink);
            }
        }
    }
    writer.finish(&done, &mut sink);
    exit
}

/// Loads, fixes (in rounds) and, unless `--diff`, writes one model.
fn fix_one(
    file: &Path,
    settings: &Settings,
    format: Format,
    opts: &FixOptions,
) -> Result<Fixed, String> {
    if file.extension().is_some_and(|e| e == "onnxtxt") {
        return Err("only binary `.onnx` models are fixed; the model is unchanged".into());
    }
    let size = std::fs::metadata(file)
        .map_err(|e| format!("cannot read it: {e}"))?
        .len();
    if size > model::MAX_MODEL_FILE {
        return Err(format!(
            "it is {size} bytes, larger than any ONNX model file"
        ));
    }
    let mut bytes = Bytes::from(std::fs::read(file).map_err(|e| format!("cannot read it: {e}"))?);
    let load = |bytes: &Bytes| -> Result<Model, String> {
        let proto = model::decode_model(file, bytes.clone()).map_err(|e| e.to_string())?;
        Model::from_proto(file, bytes.len() as u64, proto).map_err(|e| e.to_string())
    };
    let model = load(&bytes)?;
    // Errors, and external data that is missing or short: ORT could not run the model, and
    // the fixed file would not be any better.
    if let Some(p) = model
        .problems
        .iter()
        .find(|p| p.level == ProblemLevel::Error || p.code.starts_with("model::external-data"))
    {
        return Err(format!(
            "{} ({}); the model is not fixed",
            p.message, p.code
        ));
    }
    let target = opts.output.clone().unwrap_or_else(|| file.to_path_buf());
    if !model.external.is_empty() && !same_folder(file, &target) {
        return Err(format!(
            "its weights are in external data files beside it, which --fix never copies or rewrites; write the fixed model into the same folder ({})",
            file.parent()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| ".".into())
        ));
    }
    let original = model.proto.clone();
    let mut a = analyse(model, settings);
    let before = FixCounts::of(&a);
    let mut applied = Vec::new();
    let mut skipped = Vec::new();
    let mut removed_nodes = Vec::new();
    let mut unsafe_left: Vec<Fix>;
    let mut rounds = 0;
    let mut converged = false;
    loop {
        let (take, leave): (Vec<Fix>, Vec<Fix>) = unique_fixes(&a)
            .into_iter()
            .partition(|f| f.safety() == FixSafety::Safe || opts.unsafe_fixes);
        unsafe_left = leave;
        // Fixes already refused once are not tried again; opset edits are checked again here.
        let mut vetted = Vec::new();
        for f in take {
            if skipped.iter().any(|(s, _)| *s == f) {
                continue;
            }
            match vet(&a, settings, &f, opts.unsafe_fixes) {
                Ok(()) => vetted.push(f),
                Err(why) => skipped.push((f, why)),
            }
        }
        let take = vetted;
        if take.is_empty() {
            converged = true;
            break;
        }
        if rounds == MAX_ROUNDS {
            break;
        }
        let r = fix::apply(&bytes, &a.model, &take)
            .map_err(|e| format!("malformed protobuf at byte {}; the model is not fixed", e.0))?;
        skipped.extend(r.skipped);
        if r.applied.is_empty() {
            continue;
        }
        rounds += 1;
        applied.extend(r.applied);
        removed_nodes.extend(r.removed_nodes);
        bytes = Bytes::from(r.bytes);
        let fixed = load(&bytes)
            .map_err(|e| format!("the fixed model does not load ({e}); the model is not fixed"))?;
        // A fix must not make the model invalid: no structural problem the input did not have.
        if let Some(p) = fixed.problems.iter().find(|p| {
            !a.model
                .problems
                .iter()
                .any(|q| q.code == p.code && q.message == p.message)
        }) {
            return Err(format!(
                "the fixes would introduce a problem ({}: {}); the model is not fixed",
                p.code, p.message
            ));
        }
        a = analyse(fixed, settings);
    }
    let after = FixCounts::of(&a);
    let path_text = file.display().to_string();
    let diff = if opts.diff {
        fix::text_diff(&original, &a.model.proto, &path_text)
    } else {
        String::new()
    };
    let mut written = None;
    if opts.write && !opts.diff && (!applied.is_empty() || opts.output.is_some()) {
        fix::write_atomic(&target, &bytes, Some(file)).map_err(|e| e.to_string())?;
        written = Some(target);
    }
    let report = final_report(&a, settings, format);
    Ok(Fixed {
        path: file.to_path_buf(),
        written,
        applied,
        skipped,
        unsafe_left,
        removed_nodes,
        rounds,
        converged,
        max_rounds: MAX_ROUNDS,
        before,
        after,
        diff,
        report,
    })
}

/// Checks an opset edit again with the opset-lowering analysis, whoever proposed it: a node that
/// breaks refuses it; an unproven one needs `--unsafe-fixes`.
fn vet(a: &Analysis, settings: &Settings, fix: &Fix, unsafe_fixes: bool) -> Result<(), String> {
    let table = settings.release.table();
    match opset_lowering::verdict_of(&a.model, table, Some(&a.placement.session), fix) {
        Verdict::Safe => Ok(()),
        Verdict::Unproven(_) if unsafe_fixes => Ok(()),
        Verdict::Unproven(why) => Err(format!("not proved safe ({why}); use --unsafe-fixes")),
        Verdict::Breaks(why) => Err(format!("not safe: {why}")),
    }
}

/// The fixes of an analysis's findings, each once, in finding order.
fn unique_fixes(a: &Analysis) -> Vec<Fix> {
    let mut out: Vec<Fix> = Vec::new();
    for f in a.findings.iter().filter(|f| f.severity > Severity::Allow) {
        if let Some(fix) = &f.fix
            && !out.contains(fix)
        {
            out.push(fix.clone());
        }
    }
    out
}

fn same_folder(a: &Path, b: &Path) -> bool {
    let dir = |p: &Path| {
        let d = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf())
    };
    dir(a) == dir(b)
}
