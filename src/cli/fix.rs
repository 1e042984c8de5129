//! `--fix`, `--diff`, `--unsafe-fixes`, `-o/--output`: apply the fixes findings carry, re-analyse,
//! and report what changed (`28 → 0 copies, 19 → 0 CPU nodes`) in every format.
//!
//! Rounds: analyse, collect the fixes (safe ones; unsafe ones too with `--unsafe-fixes`), apply
//! them to the bytes, decode and index the result again, and repeat until no fix applies (at most
//! [`MAX_ROUNDS`]). Nothing is written before the last round succeeded; `--diff` writes nothing.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::{Value, json};

use super::check::{self, ModelReport};
use super::output::{self, github, json as json_out, out, sarif};
use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, Format};
use crate::analysis::opset_lowering::{self, Verdict};
use crate::diagnostics::render::Style;
use crate::diagnostics::{Fix, FixSafety, Severity};
use crate::fix;
use crate::lint::{self, Analysis, Settings};
use crate::model::{self, Model, ProblemLevel};
use crate::placer::Placement;
use crate::rules;
use crate::tables::Ep;

/// Rounds of apply-and-re-analyse before giving up on convergence.
pub const MAX_ROUNDS: usize = 8;

/// The fix flags of the default command.
#[derive(Debug, Clone, Default)]
pub struct FixOptions {
    /// `--fix`: write the fixed model.
    pub write: bool,
    /// `--diff`: print the change as a unified diff of the text view; write nothing.
    pub diff: bool,
    /// `--unsafe-fixes`: apply unsafe fixes too.
    pub unsafe_fixes: bool,
    /// `--exit-non-zero-on-fix`: exit 1 when a file was changed.
    pub exit_non_zero_on_fix: bool,
    /// `-o/--output`: where the fixed model goes (one model).
    pub output: Option<PathBuf>,
}

/// What one model's fix run did.
struct Outcome {
    path: PathBuf,
    written: Option<PathBuf>,
    applied: Vec<Fix>,
    skipped: Vec<(Fix, String)>,
    /// Unsafe fixes left out (no `--unsafe-fixes`).
    unsafe_left: Vec<Fix>,
    removed_nodes: Vec<String>,
    rounds: usize,
    converged: bool,
    before: Counts,
    after: Counts,
    diff: String,
    report: ModelReport,
    final_json: Value,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    copies: usize,
    cpu_nodes: usize,
    findings: usize,
}

impl Counts {
    fn of(a: &Analysis) -> Counts {
        Counts {
            copies: a.placement.copies.len(),
            cpu_nodes: cpu_nodes(&a.placement),
            findings: a.findings.len(),
        }
    }
}

fn cpu_nodes(p: &Placement) -> usize {
    p.session
        .graphs
        .iter()
        .flat_map(|g| g.live_nodes())
        .filter(|(_, n)| n.ep == Some(Ep::Cpu))
        .count()
}

// ---------------------------------------------------------------------------------------------
// The lint API this module uses, in one place: analysing a model and rendering the final report.

fn analyse(model: Model, settings: &Settings) -> Analysis {
    lint::analyse(model, settings)
}

/// The final analysis rendered in `format` (human text, GitHub lines, SARIF results with paths
/// relative to the working directory) and as the JSON record.
fn final_report(a: &Analysis, settings: &Settings, format: Format) -> (ModelReport, Value) {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let style = Style {
        color: false,
        unicode: tty,
        width: output::width(),
    };
    let base = std::env::current_dir().unwrap_or_default();
    (
        ModelReport::new(a, settings, format, style, &base),
        json_out::analysis_json(a, settings),
    )
}

// ---------------------------------------------------------------------------------------------

/// Fixes every model of every group (model files or folders under one set of settings); prints
/// one report in `format`; returns the exit code.
pub fn fix_groups(groups: &[(&[PathBuf], &Settings)], format: Format, opts: &FixOptions) -> u8 {
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
    let mut done: Vec<Outcome> = Vec::new();
    let mut json_out: Vec<Value> = Vec::new();
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
                match format {
                    Format::Json => json_out.push(json!({
                        "model": file.display().to_string(),
                        "error": {"code": "onnx_lint::fix", "message": message},
                    })),
                    Format::Github => out(&format!(
                        "::error file={},title=onnx-lint --fix::{}",
                        github::escape_property(&file.display().to_string()),
                        github::escape_data(&message)
                    )),
                    _ => eprintln!("error: {}: {message}", file.display()),
                }
            }
        }
    }
    print(format, &done, json_out, opts);
    exit
}

/// Loads, fixes (in rounds) and, unless `--diff`, writes one model.
fn fix_one(
    file: &Path,
    settings: &Settings,
    format: Format,
    opts: &FixOptions,
) -> Result<Outcome, String> {
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
    let before = Counts::of(&a);
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
    let after = Counts::of(&a);
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
    let (report, final_json) = final_report(&a, settings, format);
    Ok(Outcome {
        path: file.to_path_buf(),
        written,
        applied,
        skipped,
        unsafe_left,
        removed_nodes,
        rounds,
        converged,
        before,
        after,
        diff,
        report,
        final_json,
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

/// `28 → 0 copies, 19 → 0 CPU nodes`.
fn change_line(o: &Outcome) -> String {
    format!(
        "{} → {} cop{}, {} → {} CPU node{}",
        o.before.copies,
        o.after.copies,
        if o.after.copies == 1 { "y" } else { "ies" },
        o.before.cpu_nodes,
        o.after.cpu_nodes,
        if o.after.cpu_nodes == 1 { "" } else { "s" },
    )
}

/// The headline of one model: what happened to the file, then the change.
fn headline(o: &Outcome, opts: &FixOptions) -> String {
    let n = o.applied.len();
    let what = if n == 0 {
        "nothing to fix".to_string()
    } else if opts.diff {
        format!("would apply {n} fix{}", if n == 1 { "" } else { "es" })
    } else {
        format!("applied {n} fix{}", if n == 1 { "" } else { "es" })
    };
    let whither = match &o.written {
        Some(p) if *p != o.path => format!(", written to {}", p.display()),
        _ => String::new(),
    };
    format!("{}: {what}{whither}: {}", o.path.display(), change_line(o))
}

fn details(o: &Outcome, opts: &FixOptions) -> Vec<String> {
    let mut lines = Vec::new();
    let verb = if opts.diff { "would fix" } else { "fixed" };
    for f in &o.applied {
        lines.push(format!("  {verb}: {}", fix::describe(f)));
    }
    if !o.removed_nodes.is_empty() {
        lines.push(format!(
            "  removed {} node{} left without consumers: {}",
            o.removed_nodes.len(),
            if o.removed_nodes.len() == 1 { "" } else { "s" },
            o.removed_nodes.join(", ")
        ));
    }
    for (f, why) in &o.skipped {
        lines.push(format!("  not fixed: {}: {why}", fix::describe(f)));
    }
    for f in &o.unsafe_left {
        lines.push(format!(
            "  unsafe, not applied (use --unsafe-fixes): {}",
            fix::describe(f)
        ));
    }
    if !o.converged {
        lines.push(format!(
            "  stopped after {MAX_ROUNDS} rounds: the fixes did not converge"
        ));
    }
    lines
}

fn fix_json(o: &Outcome) -> Value {
    json!({
        "written": o.written.as_ref().map(|p| p.display().to_string()),
        "applied": o.applied,
        "skipped": o.skipped.iter().map(|(f, why)| json!({"fix": f, "reason": why})).collect::<Vec<_>>(),
        "unsafe_not_applied": o.unsafe_left,
        "removed_nodes": o.removed_nodes,
        "rounds": o.rounds,
        "converged": o.converged,
        "before": {"copies": o.before.copies, "cpu_nodes": o.before.cpu_nodes, "findings": o.before.findings},
        "after": {"copies": o.after.copies, "cpu_nodes": o.after.cpu_nodes, "findings": o.after.findings},
        "change": change_line(o),
        "diff": if o.diff.is_empty() { Value::Null } else { Value::String(o.diff.clone()) },
    })
}

fn print(format: Format, done: &[Outcome], mut json_out: Vec<Value>, opts: &FixOptions) {
    match format {
        Format::Human => {
            for o in done {
                if opts.diff {
                    // The diff is the output; the summary goes to stderr (as ruff does).
                    if !o.diff.is_empty() {
                        out(o.diff.trim_end_matches('\n'));
                    }
                    eprintln!("{}", headline(o, opts));
                    for l in details(o, opts) {
                        eprintln!("{l}");
                    }
                } else {
                    out(&headline(o, opts));
                    for l in details(o, opts) {
                        out(&l);
                    }
                    if !o.report.text.is_empty() {
                        out(o.report.text.trim_end_matches('\n'));
                    }
                    out(&o.report.summary);
                }
            }
        }
        Format::Json => {
            for o in done {
                let mut v = o.final_json.clone();
                v["fix"] = fix_json(o);
                json_out.push(v);
            }
            out(&serde_json::to_string_pretty(&Value::Array(json_out)).unwrap_or_default());
        }
        Format::Sarif => {
            let results: Vec<Value> = done
                .iter()
                .flat_map(|o| o.report.value.as_array().cloned().unwrap_or_default())
                .collect();
            let base = std::env::current_dir().unwrap_or_default();
            let mut log = sarif::log(
                results,
                &[],
                &base,
                &rules::all(),
                env!("CARGO_PKG_VERSION"),
            );
            log["runs"][0]["properties"] = json!({
                "fixes": done.iter().map(|o| {
                    let mut v = fix_json(o);
                    v["model"] = Value::String(o.path.display().to_string());
                    v
                }).collect::<Vec<_>>(),
            });
            out(&serde_json::to_string_pretty(&log).unwrap_or_default());
        }
        Format::Github => {
            for o in done {
                out(&format!(
                    "::notice file={},title=onnx-lint --fix::{}",
                    github::escape_property(&o.path.display().to_string()),
                    github::escape_data(&format!(
                        "{} ({})",
                        headline(o, opts),
                        details(o, opts).join("; ").trim()
                    ))
                ));
                for l in &o.report.lines {
                    out(l);
                }
            }
        }
    }
}
