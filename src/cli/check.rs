//! The default command: lint model files and folders.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use miette::Diagnostic;
use serde_json::{Value, json};

use super::output::{self, out};
use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, Format, SharedArgs};
use crate::cache::{Cache, FileFacts};
use crate::config::{self, Config};
use crate::diagnostics::render::{self, Style};
use crate::diagnostics::{Finding, Severity};
use crate::model::{self, LoadError, Model, ProblemLevel};
use crate::placer::{self, Outcome, Placement};
use crate::rules::{self, Severities};
use crate::tables::{self, Bundled, Ep};

/// Expands folders into the `*.onnx` files below them, sorted; files are taken as given.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = walkdir::WalkDir::new(p)
                .follow_links(false)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "onnx")
                })
                .map(|e| e.into_path())
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Everything a lint run needs, resolved from the command line and configuration.
#[derive(Clone)]
pub struct Settings {
    pub release: &'static Bundled,
    /// Why that release: `--ort`, the config file, or the default.
    pub release_reason: String,
    pub options: placer::Options,
    pub severities: Severities,
    pub format: Format,
}

/// Resolves settings: the command line over the configuration over defaults.
pub fn settings(shared: &SharedArgs, config: &Config) -> Result<Settings, String> {
    let (release, release_reason) = match (&shared.ort, &config.ort) {
        (Some(v), _) => (
            tables::resolve(v).map_err(|e| release_error(&e))?,
            format!("--ort {v}"),
        ),
        (None, Some(v)) => (
            tables::resolve(v).map_err(|e| release_error(&e))?,
            format!(
                "ort = \"{v}\" in {}",
                config
                    .origin
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
        ),
        (None, None) => (tables::newest(), "the newest bundled release".to_string()),
    };
    let mut options = super::place::options(shared);
    if shared.ep.is_none()
        && let Some(ep) = &config.ep
    {
        options.eps = if ep == "cpu" {
            vec![Ep::Cpu]
        } else {
            vec![Ep::Cuda, Ep::Cpu]
        };
    }
    if shared.opt_level.is_none()
        && let Some(level) = &config.opt_level
    {
        options.level = match level.as_str() {
            "disable" => placer::OptLevel::Disable,
            "basic" => placer::OptLevel::Basic,
            "extended" => placer::OptLevel::Extended,
            _ => placer::OptLevel::All,
        };
    }
    let mut severities = Severities::default();
    for (rule, level) in &config.rules {
        severities
            .set(rule, *level)
            .map_err(|e| format!("unknown rule `{}` in configuration", e.0))?;
    }
    for (list, level) in [
        (&shared.allow, Severity::Allow),
        (&shared.warn, Severity::Warn),
        (&shared.deny, Severity::Deny),
    ] {
        for rule in list {
            severities.set(rule, level).map_err(|e| {
                let known: Vec<String> = rules::all()
                    .iter()
                    .map(|r| format!("{} ({})", r.code, r.name))
                    .collect();
                format!(
                    "unknown rule `{}`; rules: {}, or `all`",
                    e.0,
                    known.join(", ")
                )
            })?;
        }
    }
    Ok(Settings {
        release,
        release_reason,
        options,
        severities,
        format: shared.format,
    })
}

/// One analysed model.
pub struct Analysis {
    pub model: Model,
    pub placement: Placement,
    pub findings: Vec<Finding>,
}

/// Places a model and runs the rules.
pub fn analyse(model: Model, s: &Settings) -> Analysis {
    let table = s.release.table();
    let placement = placer::place(&model, table, &s.options);
    let releases: Vec<(&'static str, &tables::KernelTable)> = tables::bundled()
        .iter()
        .map(|b| (b.version, b.table()))
        .collect();
    let cx = rules::Context {
        model: &model,
        placement: &placement,
        table,
        releases: &releases,
    };
    let findings = rules::check(&cx, &s.severities);
    Analysis {
        model,
        placement,
        findings,
    }
}

pub fn run(paths: &[PathBuf], shared: &SharedArgs, cargo: &super::CargoArgs) -> u8 {
    let cwd = std::env::current_dir().unwrap_or_default();
    let config = match config::find_file(&cwd) {
        // Shown relative to the working directory, like the models.
        Some(file) => match config::load_file(file.strip_prefix(&cwd).unwrap_or(&file)) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{}", output::render_report(&miette::Report::new(*e)));
                return EXIT_ERROR;
            }
        },
        None => Config::default(),
    };
    // Inside a Cargo project: the workspace's configuration, models, Cargo.lock and cache.
    if let Some(code) = super::workspace::run(paths, shared, cargo, &config) {
        return code;
    }
    let targets: Vec<PathBuf> = if paths.is_empty() {
        let mut found = Vec::new();
        for pattern in &config.models {
            if let Ok(entries) = glob::glob(pattern) {
                found.extend(entries.filter_map(Result::ok));
            }
        }
        if found.is_empty() {
            eprintln!(
                "error: no model given; pass model files or folders, or list them in {} (`models = [\"models/**/*.onnx\"]`)",
                config::FILE_NAME
            );
            return EXIT_ERROR;
        }
        found.sort();
        found
    } else {
        paths.to_vec()
    };
    let settings = match settings(shared, &config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    lint(&targets, &settings)
}

/// Lints `targets` (files or folders) with `settings` and prints in the chosen format.
pub fn lint(targets: &[PathBuf], settings: &Settings) -> u8 {
    lint_groups(
        &[Group {
            targets: targets.to_vec(),
            settings,
            note: None,
        }],
        None,
    )
}

/// Model files or folders to lint under one set of settings (a Cargo package's, say).
pub struct Group<'a> {
    pub targets: Vec<PathBuf>,
    pub settings: &'a Settings,
    /// Printed before the group's models in human output (which release, and why).
    pub note: Option<String>,
}

/// Lints every group and prints one report in the groups' format (that of the first group), with
/// one exit code. With a cache, a model whose bytes, settings and external files are unchanged
/// is not loaded or analysed again: its rendered report is read back.
pub fn lint_groups(groups: &[Group], cache: Option<&Cache>) -> u8 {
    let Some(format) = groups.first().map(|g| g.settings.format) else {
        return EXIT_OK;
    };
    let mut exit = EXIT_OK;
    let mut reports: Vec<ModelReport> = Vec::new();
    let mut json_out: Vec<Value> = Vec::new();
    for group in groups {
        let settings = group.settings;
        let files = match expand_paths(&group.targets) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{}", output::render_report(&miette::Report::new(e)));
                return EXIT_ERROR;
            }
        };
        if files.is_empty() {
            eprintln!(
                "error: no `*.onnx` files under {}",
                join_paths(&group.targets)
            );
            return EXIT_ERROR;
        }
        if let (Format::Human, Some(note)) = (format, &group.note) {
            out(&format!("note: {note}"));
        }
        let context = cache.map(|_| cache_context(settings));
        for file in &files {
            match report_for(file, settings, cache.zip(context.as_deref())) {
                Err(e) => {
                    exit = EXIT_ERROR;
                    match format {
                        Format::Json => json_out.push(json!({
                            "model": file.display().to_string(),
                            "error": {"code": e.code().map(|c| c.to_string()), "message": e.to_string()},
                        })),
                        Format::Github => out(&format!(
                            "::error file={},title=load error::{}",
                            file.display(),
                            e.to_string().replace('%', "%25").replace('\n', "%0A")
                        )),
                        _ => eprintln!("{}", output::render_report(&miette::Report::new(e))),
                    }
                }
                Ok(r) => {
                    exit = exit.max(r.exit);
                    match format {
                        Format::Human => out(&r.text),
                        Format::Github => {
                            for line in &r.lines {
                                out(line);
                            }
                        }
                        Format::Json => json_out.push(r.value.clone()),
                        Format::Sarif => {}
                    }
                    reports.push(r);
                }
            }
        }
    }
    match format {
        Format::Json => {
            let v = if json_out.len() == 1 {
                json_out.remove(0)
            } else {
                Value::Array(json_out)
            };
            out(&serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        Format::Sarif => {
            let mut log = render::sarif(&[], &rules::all(), env!("CARGO_PKG_VERSION"));
            let results: Vec<Value> = reports
                .iter()
                .flat_map(|r| r.value.as_array().cloned().unwrap_or_default())
                .collect();
            log["runs"][0]["results"] = Value::Array(results);
            out(&serde_json::to_string_pretty(&log).unwrap_or_default());
        }
        Format::Github => {
            if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
                let mut text = render::github_summary(&[]);
                for r in &reports {
                    text.push_str(&r.text);
                }
                for r in &reports {
                    text.push_str(&r.section);
                }
                let written = output::append_regular(Path::new(&path), &text);
                if let Err(e) = written {
                    eprintln!(
                        "warning: cannot write the job summary to {}: {e}",
                        Path::new(&path).display()
                    );
                }
            }
        }
        Format::Human => {}
    }
    exit
}

/// One model's rendered report in the run's format: what the cache stores.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReport {
    /// `EXIT_OK` or `EXIT_FINDINGS`.
    pub exit: u8,
    /// human: the text; github: the job-summary table row.
    pub text: String,
    /// github: the annotations.
    pub lines: Vec<String>,
    /// github: the job-summary section of this model (empty without findings).
    pub section: String,
    /// json: the record; sarif: the array of results.
    pub value: Value,
}

impl ModelReport {
    /// Renders an analysis for `settings.format`.
    pub fn new(a: &Analysis, settings: &Settings) -> ModelReport {
        let deny = a.findings.iter().any(|f| f.severity == Severity::Deny)
            || a.model
                .problems
                .iter()
                .any(|p| p.level == ProblemLevel::Error);
        let mut r = ModelReport {
            exit: if deny { EXIT_FINDINGS } else { EXIT_OK },
            text: String::new(),
            lines: Vec::new(),
            section: String::new(),
            value: Value::Null,
        };
        match settings.format {
            Format::Human => r.text = human_text(a),
            Format::Json => r.value = analysis_json(a, settings),
            Format::Github => {
                r.lines = render::github(&a.model, &a.findings);
                // The summary of one model is the header, its row, then its section.
                let header = render::github_summary(&[]);
                let one = render::github_summary(&[(
                    &a.model,
                    a.findings.as_slice(),
                    prediction_line(&a.placement),
                )]);
                let body = one.strip_prefix(header.as_str()).unwrap_or(&one);
                let cut = body.find("\n### `").map(|i| i + 1).unwrap_or(body.len());
                r.text = body[..cut].to_string();
                r.section = body[cut..].to_string();
            }
            Format::Sarif => {
                let log = render::sarif(
                    &[(&a.model, a.findings.as_slice())],
                    &rules::all(),
                    env!("CARGO_PKG_VERSION"),
                );
                r.value = log["runs"][0]["results"].clone();
            }
        }
        r
    }

    fn to_json(&self) -> Value {
        json!({"exit": self.exit, "text": self.text, "lines": self.lines, "section": self.section, "value": self.value})
    }

    fn from_json(v: &Value) -> Option<ModelReport> {
        Some(ModelReport {
            exit: u8::try_from(v.get("exit")?.as_u64()?).ok()?,
            text: v.get("text")?.as_str()?.to_string(),
            lines: v
                .get("lines")?
                .as_array()?
                .iter()
                .map(|l| l.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()?,
            section: v.get("section")?.as_str()?.to_string(),
            value: v.get("value")?.clone(),
        })
    }
}

/// Everything besides the model's bytes that a report depends on (see `crate::cache`).
fn cache_context(s: &Settings) -> String {
    let style = match s.format {
        Format::Human => format!("{:?}", style()),
        _ => String::new(),
    };
    format!(
        "ort {} table {}\noptions {:?}\nseverities {:?}\nformat {:?} {style}\nreason {}",
        s.release.version,
        crate::cache::sha256_hex(s.release.text.as_bytes()),
        s.options,
        s.severities,
        s.format,
        s.release_reason,
    )
}

/// The report of one model: from the cache when it has it, else loaded, analysed and stored.
fn report_for(
    file: &Path,
    settings: &Settings,
    cache: Option<(&Cache, &str)>,
) -> Result<ModelReport, LoadError> {
    let key = cache.and_then(|(c, context)| {
        let context = format!("model {}\n{context}", file.display());
        c.key(file, &context).ok().map(|k| (c, k))
    });
    if let Some((c, k)) = &key
        && let Some(r) = c.get(k).as_ref().and_then(ModelReport::from_json)
    {
        return Ok(r);
    }
    // Loaded, analysed and rendered within the whole-model budget (`cli/budget.rs`).
    let (owned_file, owned_settings) = (file.to_path_buf(), settings.clone());
    let (r, locations) = super::budget::bounded(file, move || {
        let a = analyse(model::load(&owned_file)?, &owned_settings);
        let locations: Vec<String> = a
            .model
            .external
            .iter()
            .map(|e| e.location.clone())
            .collect();
        Ok((ModelReport::new(&a, &owned_settings), locations))
    })?;
    if let Some((c, k)) = &key {
        let dir = file.parent().unwrap_or(Path::new(""));
        let mut seen = std::collections::BTreeSet::new();
        let facts: Vec<FileFacts> = locations
            .iter()
            .filter(|l| seen.insert((*l).clone()))
            .map(|l| FileFacts::of(&dir.join(l)))
            .collect();
        let _ = c.put(k, &facts, &r.to_json());
    }
    Ok(r)
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ORT 1.24.4 (all): 52 nodes on CUDA, 33 on CPU, 28 copies`.
pub fn prediction_line(p: &Placement) -> String {
    let (mut cuda, mut cpu) = (0, 0);
    for g in &p.session.graphs {
        for (_, n) in g.live_nodes() {
            match n.ep {
                Some(Ep::Cuda) if !n.op.starts_with("Memcpy") => cuda += 1,
                Some(Ep::Cpu) => cpu += 1,
                _ => {}
            }
        }
    }
    match &p.outcome {
        Outcome::Ok => format!(
            "ORT {} ({}): {cuda} nodes on CUDA, {cpu} on CPU, {} cop{}",
            p.ort,
            p.level.name(),
            p.copies.len(),
            if p.copies.len() == 1 { "y" } else { "ies" }
        ),
        Outcome::LoadFail(e)
        | Outcome::NoKernel(e)
        | Outcome::InitFail(e)
        | Outcome::PartitionFail(e) => format!(
            "ORT {} ({}): session creation fails: {e}",
            p.ort,
            p.level.name()
        ),
    }
}

fn style() -> Style {
    let tty = std::io::stdout().is_terminal();
    Style {
        color: tty && std::env::var_os("NO_COLOR").is_none(),
        unicode: tty,
        width: std::env::var("ONNX_LINT_WIDTH")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(100),
    }
}

/// The human report of one model: its findings, then its summary line and problems.
fn human_text(a: &Analysis) -> String {
    let mut text = String::new();
    let rendered = render::human(&a.model, &a.findings, style());
    if !rendered.is_empty() {
        text.push_str(rendered.trim_end());
        text.push_str("\n\n");
    }
    let (deny, warn) = severity_counts(&a.findings);
    text.push_str(&summary_line(&a.model));
    text.push('\n');
    text.push_str(&format!(
        "  {}; {deny} error{}, {warn} warning{}",
        prediction_line(&a.placement),
        if deny == 1 { "" } else { "s" },
        if warn == 1 { "" } else { "s" },
    ));
    for p in &a.model.problems {
        let level = match p.level {
            ProblemLevel::Error => "error",
            ProblemLevel::Warning => "warning",
        };
        let node = p
            .node
            .map(|n| format!(" (node `{}`)", a.model.node(n).name))
            .unwrap_or_default();
        text.push_str(&format!("\n  {level}[{}]: {}{node}", p.code, p.message));
    }
    text
}

/// The `--format json` record of one linted model.
pub fn analysis_json(a: &Analysis, settings: &Settings) -> Value {
    let listing = a
        .findings
        .iter()
        .any(|f| f.node.is_some())
        .then(|| crate::model::text::print_model(&a.model.proto));
    let s = a.model.stats();
    let p = &a.placement;
    let (deny, warn) = severity_counts(&a.findings);
    let placement = super::place::placement_json(&a.model.path.display().to_string(), p);
    json!({
        "model": a.model.path.display().to_string(),
        "ort": p.ort,
        "ort_reason": settings.release_reason,
        "level": p.level.name(),
        "ep": if settings.options.eps.first() == Some(&Ep::Cuda) { "cuda" } else { "cpu" },
        "session": placement["session"],
        "error": placement["error"],
        "summary": {
            "nodes": s.nodes,
            "graphs": s.graphs,
            "initializers": s.initializers,
            "initializer_bytes": s.initializer_bytes,
            "external_bytes": s.external_bytes,
            "opsets": a.model.opsets.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "copies": p.copies.len(),
            "memcpy": placement["memcpy"],
            "deny": deny,
            "warn": warn,
        },
        "findings": a.findings.iter().map(|f| render::finding_json(&a.model, listing.as_ref(), f)).collect::<Vec<_>>(),
        "problems": a.model.problems.iter().map(|p| json!({
            "level": match p.level { ProblemLevel::Error => "error", ProblemLevel::Warning => "warning" },
            "code": p.code,
            "message": p.message,
        })).collect::<Vec<_>>(),
    })
}

/// `path: ir 8, opsets ai.onnx 17 + com.microsoft 1; 1234 nodes in 3 graphs; 56 initializers (12.3 MiB); external data: ...`
pub fn summary_line(m: &Model) -> String {
    let s = m.stats();
    let opsets = m
        .opsets
        .iter()
        .map(|(d, v)| format!("{d} {v}"))
        .collect::<Vec<_>>()
        .join(" + ");
    let mut line = format!(
        "{}: ir {}, opsets {}; {} nodes in {} graph{}",
        m.path.display(),
        m.proto.ir_version(),
        if opsets.is_empty() {
            "none".into()
        } else {
            opsets
        },
        s.nodes,
        s.graphs,
        if s.graphs == 1 { "" } else { "s" },
    );
    if s.functions > 0 {
        line += &format!(", {} local functions", s.functions);
    }
    line += &format!(
        "; {} initializers ({})",
        s.initializers,
        output::human_bytes(s.initializer_bytes)
    );
    if !s.external_files.is_empty() {
        let files = s
            .external_files
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        line += &format!(
            "; external data: {} in {} file{} ({files})",
            output::human_bytes(s.external_bytes),
            s.external_files.len(),
            if s.external_files.len() == 1 { "" } else { "s" }
        );
    }
    line
}

/// An unknown release, with the list of bundled ones.
fn release_error(e: &tables::TableError) -> String {
    let bundled: Vec<&str> = tables::bundled().iter().map(|b| b.version).collect();
    format!("{e}; bundled releases: {}", bundled.join(", "))
}

/// Findings at deny and at warn level.
fn severity_counts(findings: &[Finding]) -> (usize, usize) {
    let count = |level| findings.iter().filter(|f| f.severity == level).count();
    (count(Severity::Deny), count(Severity::Warn))
}
