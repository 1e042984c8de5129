//! The default command: lint model files and folders. Plans the groups of models (a Cargo
//! package's, or the files given), resolves each group's settings (`settings.rs`), analyses each
//! model (`crate::lint`) and prints one report in the chosen format, with a closing summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use miette::Diagnostic;
use serde_json::{Value, json};

use super::output::{self, ColorChoice, Sink, github, json as json_out, plural, sarif};
use super::settings::{self, CargoFacts, Resolved, RuleFlags, UsageError};
use super::workspace::{self, Planned};
use super::{CargoArgs, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, Format, LintArgs, SharedArgs};
use crate::cache::{Cache, FileFacts};
use crate::config::{self, Config};
use crate::diagnostics::render::{self, Style};
use crate::diagnostics::{Finding, Severity};
use crate::lint::{self, Analysis, Settings};
use crate::model::{self, LoadError, Model, ProblemLevel};
use crate::placer::{Outcome, Placement};
use crate::rules;
use crate::tables::Ep;

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

/// Model files under one set of settings (a Cargo package's, or the files given).
pub struct Group {
    /// `package `a``, `workspace`; `None` outside a Cargo project.
    pub label: Option<String>,
    pub targets: Vec<PathBuf>,
    pub resolved: Resolved,
}

impl Group {
    /// `note: package `a`: ORT 1.24.4: ...`: which release, and why.
    pub fn note(&self) -> String {
        match &self.label {
            Some(l) => format!("note: {l}: {}", self.resolved.note),
            None => format!("note: {}", self.resolved.note),
        }
    }
}

/// The groups of a run and where its cache is.
pub struct Groups {
    pub groups: Vec<Group>,
    pub cache_dir: Option<PathBuf>,
    pub warnings: Vec<String>,
}

/// Plans the groups of models for `paths` (none: the configured models) and resolves each
/// group's settings. Shared by the lint command and `place`.
pub fn plan_groups(
    paths: &[PathBuf],
    shared: &SharedArgs,
    rule_flags: RuleFlags,
    cargo: &CargoArgs,
) -> Result<Groups, miette::Report> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let file_config = match config::find_file(&cwd) {
        // Shown relative to the working directory, like the models.
        Some(file) => config::load_file(file.strip_prefix(&cwd).unwrap_or(&file))
            .map_err(|e| miette::Report::new(*e))?,
        None => Config::default(),
    };
    let files = if paths.is_empty() {
        None
    } else {
        let files = expand_paths(paths).map_err(miette::Report::new)?;
        if files.is_empty() {
            return Err(UsageError::new(
                format!("no `*.onnx` files under {}", join_paths(paths)),
                None,
            )
            .into());
        }
        Some(files)
    };
    let mut warnings = Vec::new();
    let (units, lock, cache_dir) = match workspace::plan(files.as_deref(), cargo, &file_config)
        .map_err(miette::Report::new)?
    {
        Planned::Cargo(p) => (
            p.units
                .into_iter()
                .map(|u| {
                    let label = Some(u.label.clone());
                    (label, u)
                })
                .collect::<Vec<_>>(),
            Some(p.lock),
            (!cargo.no_cache).then_some(p.cache_dir),
        ),
        other => {
            if let Planned::Without(w) = other {
                warnings.push(w);
            }
            let models = match files {
                Some(f) => f,
                None => configured_models(&file_config)?,
            };
            let unit = crate::cargo::Unit {
                label: String::new(),
                config: file_config.clone(),
                ort_origin: None,
                ort_req: None,
                ort_dynamic: None,
                models,
            };
            (vec![(None, unit)], None, None)
        }
    };
    let mut groups = Vec::new();
    for (label, u) in units {
        let resolved = settings::resolve(
            shared,
            rule_flags,
            &u.config,
            CargoFacts {
                lock: lock.as_ref(),
                ort_req: u.ort_req.as_ref(),
                ort_dynamic: u.ort_dynamic.as_deref(),
                ort_origin: u.ort_origin.as_deref(),
            },
        )?;
        for w in &resolved.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
        groups.push(Group {
            label,
            targets: u.models,
            resolved,
        });
    }
    Ok(Groups {
        groups,
        cache_dir,
        warnings,
    })
}

/// The models `onnx-lint.toml` lists, outside a Cargo project.
fn configured_models(config: &Config) -> Result<Vec<PathBuf>, miette::Report> {
    let mut found = Vec::new();
    for pattern in &config.models {
        if let Ok(entries) = glob::glob(pattern) {
            found.extend(entries.filter_map(Result::ok));
        }
    }
    if found.is_empty() {
        return Err(UsageError::new(
            format!(
                "no model given; pass model files or folders, or list them in {} (`models = [\"models/**/*.onnx\"]`)",
                config::FILE_NAME
            ),
            None,
        )
        .into());
    }
    found.sort();
    Ok(found)
}

/// How the report is printed.
pub struct Printing {
    pub format: Format,
    pub quiet: bool,
    pub statistics: bool,
    pub exit_zero: bool,
    pub color: ColorChoice,
}

pub fn run(
    paths: &[PathBuf],
    shared: &SharedArgs,
    args: &LintArgs,
    cargo: &CargoArgs,
    color: ColorChoice,
) -> Result<u8, miette::Report> {
    if args.statistics && matches!(args.format, Format::Sarif | Format::Github) {
        return Err(UsageError::new(
            "--statistics prints a table: use it with --format human or json",
            None,
        )
        .into());
    }
    let planned = plan_groups(
        paths,
        shared,
        RuleFlags {
            allow: &args.allow,
            warn: &args.warn,
            deny: &args.deny,
            dims: &args.dim,
        },
        cargo,
    )?;
    for w in &planned.warnings {
        eprintln!("warning: {w}");
    }
    let cache = planned.cache_dir.map(Cache::new);
    let printing = Printing {
        format: args.format,
        quiet: args.quiet,
        statistics: args.statistics,
        exit_zero: args.exit_zero,
        color,
    };
    let mut sink = Sink::new(args.output.as_deref());
    let exit = lint_groups(&planned.groups, cache.as_ref(), &printing, &mut sink);
    sink.finish()
        .map_err(|e| miette::Report::new(UsageError::new(e, None)))?;
    Ok(exit)
}

/// Totals over the models of a run, for the closing summary and `--statistics`.
#[derive(Default)]
struct Totals {
    models: usize,
    with_findings: usize,
    unreadable: usize,
    deny: usize,
    warn: usize,
    cpu_nodes: usize,
    copies: usize,
    failing_sessions: usize,
    /// (code, rule, severity) → count.
    per_rule: BTreeMap<(String, String, String), usize>,
}

impl Totals {
    fn add(&mut self, r: &ModelReport) {
        self.models += 1;
        if r.deny + r.warn > 0 {
            self.with_findings += 1;
        }
        self.deny += r.deny;
        self.warn += r.warn;
        self.cpu_nodes += r.cpu_nodes;
        self.copies += r.copies;
        self.failing_sessions += usize::from(r.session_fails);
        for (code, rule, severity, n) in &r.per_rule {
            *self
                .per_rule
                .entry((code.clone(), rule.clone(), severity.clone()))
                .or_default() += n;
        }
    }

    /// `Found 0 errors and 47 warnings in 1 of 2 models; 19 nodes on CPU, 28 copies; ...`.
    fn line(&self) -> String {
        let mut s = format!(
            "Found {} and {} in {} of {}",
            plural(self.deny, "error", "errors"),
            plural(self.warn, "warning", "warnings"),
            self.with_findings,
            plural(self.models + self.unreadable, "model", "models"),
        );
        s += &format!(
            "; {} on CPU, {} in all",
            plural(self.cpu_nodes, "node", "nodes"),
            plural(self.copies, "copy", "copies")
        );
        if self.failing_sessions > 0 {
            s += &format!(
                "; session creation fails for {}",
                plural(self.failing_sessions, "model", "models")
            );
        }
        if self.unreadable > 0 {
            s += &format!(
                "; {} could not be read",
                plural(self.unreadable, "model", "models")
            );
        }
        s
    }

    fn statistics_human(&self) -> String {
        let mut rows: Vec<(&(String, String, String), &usize)> = self.per_rule.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let width = rows.iter().map(|(k, _)| k.1.len()).max().unwrap_or(0);
        rows.iter()
            .map(|((code, rule, sev), n)| format!("{n:>6}  {code}  {rule:<width$}  [{sev}]"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn statistics_json(&self) -> Value {
        let mut rows: Vec<(&(String, String, String), &usize)> = self.per_rule.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        Value::Array(
            rows.into_iter()
                .map(|((code, rule, sev), n)| {
                    json!({"code": code, "rule": rule, "severity": sev, "count": n})
                })
                .collect(),
        )
    }
}

/// Lints every group and prints one report, with one exit code. With a cache, a model whose
/// bytes, settings and external files are unchanged is not loaded or analysed again: its
/// rendered report is read back.
pub fn lint_groups(groups: &[Group], cache: Option<&Cache>, p: &Printing, sink: &mut Sink) -> u8 {
    let format = p.format;
    let style = Style {
        color: p.color.enabled(sink.is_terminal()),
        unicode: sink.is_terminal(),
        width: output::width(),
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut exit = EXIT_OK;
    let mut totals = Totals::default();
    let mut json_records: Vec<Value> = Vec::new();
    let mut sarif_results: Vec<Value> = Vec::new();
    let mut failures: Vec<sarif::Failure> = Vec::new();
    let (mut rows, mut sections) = (Vec::new(), Vec::new());
    for group in groups {
        let settings = &group.resolved.settings;
        if !p.quiet {
            if format == Format::Human && !p.statistics {
                sink.line(&group.note());
            } else {
                eprintln!("{}", group.note());
            }
        }
        let context = cache.map(|_| cache_context(settings, format, style, &cwd));
        for file in &group.targets {
            match report_for(
                file,
                settings,
                format,
                style,
                &cwd,
                cache.zip(context.as_deref()),
            ) {
                Err(e) => {
                    exit = EXIT_ERROR;
                    totals.unreadable += 1;
                    let shown = file.display().to_string();
                    match format {
                        Format::Json => json_records.push(json_out::load_error_json(
                            &shown,
                            e.code().map(|c| c.to_string()),
                            &e.to_string(),
                        )),
                        Format::Github => sink.line(&github::load_error(&shown, &e.to_string())),
                        Format::Sarif => {
                            failures.push(sarif::Failure {
                                path: shown,
                                code: e.code().map(|c| c.to_string()),
                                message: e.to_string(),
                            });
                            eprintln!("{}", output::render_report(&miette::Report::new(e)));
                        }
                        Format::Human => {
                            eprintln!("{}", output::render_report(&miette::Report::new(e)))
                        }
                    }
                }
                Ok(mut r) => {
                    exit = exit.max(r.exit);
                    totals.add(&r);
                    match format {
                        Format::Human if !p.statistics => {
                            if !r.text.is_empty() {
                                sink.line(&r.text);
                            }
                            if !p.quiet {
                                sink.line(&r.summary);
                            }
                        }
                        Format::Human => {}
                        Format::Github => {
                            for line in &r.lines {
                                sink.line(line);
                            }
                            rows.push(r.text.clone());
                            sections.push(r.section.clone());
                        }
                        // Moved, not copied: a report of tens of thousands of findings is
                        // hundreds of MB as a JSON tree.
                        Format::Json => json_records.push(r.value.take()),
                        Format::Sarif => {
                            if let Value::Array(results) = r.value.take() {
                                sarif_results.extend(results);
                            }
                        }
                    }
                }
            }
        }
    }
    match format {
        Format::Human if p.statistics => {
            let table = totals.statistics_human();
            if !table.is_empty() {
                sink.line(&table);
            }
            if !p.quiet {
                sink.line(&totals.line());
            }
        }
        Format::Human => {
            if !p.quiet {
                sink.line(&totals.line());
            }
        }
        Format::Json => {
            let v = if p.statistics {
                totals.statistics_json()
            } else {
                Value::Array(json_records)
            };
            sink.json(&v);
        }
        Format::Sarif => {
            let log = sarif::log(
                sarif_results,
                &failures,
                &cwd,
                &rules::all(),
                env!("CARGO_PKG_VERSION"),
            );
            sink.json(&log);
        }
        Format::Github => {
            if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
                let text = github::summary(&rows, &sections);
                let written = output::append_regular(Path::new(&path), &text);
                if let Err(e) = written {
                    eprintln!(
                        "warning: cannot write the job summary to {}: {e}",
                        Path::new(&path).display()
                    );
                }
            }
        }
    }
    if exit == EXIT_FINDINGS && p.exit_zero {
        EXIT_OK
    } else {
        exit
    }
}

/// One model's rendered report in the run's format, with its counts: what the cache stores
/// (serialised in place, read back by `ModelReport::from_json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelReport {
    /// `EXIT_OK` or `EXIT_FINDINGS`.
    pub exit: u8,
    /// human: the diagnostics; github: the job-summary table row.
    pub text: String,
    /// human: the model's summary lines (path, opsets, prediction, problems).
    pub summary: String,
    /// github: the annotations.
    pub lines: Vec<String>,
    /// github: the job-summary section of this model (empty without findings).
    pub section: String,
    /// json: the record; sarif: the array of results.
    pub value: Value,
    pub deny: usize,
    pub warn: usize,
    pub cpu_nodes: usize,
    pub copies: usize,
    pub session_fails: bool,
    /// (code, rule, severity, count) of the findings.
    pub per_rule: Vec<(String, String, String, usize)>,
}

impl ModelReport {
    /// Renders an analysis for `format`.
    pub fn new(
        a: &Analysis,
        settings: &Settings,
        format: Format,
        style: Style,
        base: &Path,
    ) -> ModelReport {
        let (deny, warn) = severity_counts(&a.findings);
        let (_, cpu) = node_counts(&a.placement);
        let mut per_rule: Vec<(String, String, String, usize)> = Vec::new();
        for f in &a.findings {
            match per_rule.iter_mut().find(|r| r.0 == f.code) {
                Some(r) => r.3 += 1,
                None => per_rule.push((
                    f.code.to_string(),
                    f.rule.to_string(),
                    f.severity.name().to_string(),
                    1,
                )),
            }
        }
        let mut r = ModelReport {
            exit: if a.denies() { EXIT_FINDINGS } else { EXIT_OK },
            text: String::new(),
            summary: String::new(),
            lines: Vec::new(),
            section: String::new(),
            value: Value::Null,
            deny,
            warn,
            cpu_nodes: cpu,
            copies: a.placement.copies.len(),
            session_fails: !matches!(a.placement.outcome, Outcome::Ok),
            per_rule,
        };
        match format {
            Format::Human => {
                r.text = render::human(&a.model, &a.findings, style)
                    .trim_end()
                    .to_string();
                if !r.text.is_empty() {
                    r.text.push('\n');
                }
                r.summary = human_summary(a);
            }
            Format::Json => r.value = json_out::analysis_json(a, settings),
            Format::Github => {
                let shown = a.model.path.display().to_string();
                r.lines = github::annotations(&a.model, &a.findings);
                r.text = github::summary_row(&shown, &prediction_line(&a.placement), &a.findings);
                r.section = github::summary_section(&shown, &a.findings);
            }
            Format::Sarif => {
                r.value = Value::Array(sarif::results(
                    &a.model.path,
                    base,
                    &a.findings,
                    &rules::all(),
                ))
            }
        }
        r
    }

    fn from_json(v: &Value) -> Option<ModelReport> {
        let n = |k: &str| v.get(k)?.as_u64().and_then(|x| usize::try_from(x).ok());
        let s = |k: &str| Some(v.get(k)?.as_str()?.to_string());
        Some(ModelReport {
            exit: u8::try_from(v.get("exit")?.as_u64()?).ok()?,
            text: s("text")?,
            summary: s("summary")?,
            lines: v
                .get("lines")?
                .as_array()?
                .iter()
                .map(|l| l.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()?,
            section: s("section")?,
            value: v.get("value")?.clone(),
            deny: n("deny")?,
            warn: n("warn")?,
            cpu_nodes: n("cpu_nodes")?,
            copies: n("copies")?,
            session_fails: v.get("session_fails")?.as_bool()?,
            per_rule: serde_json::from_value(v.get("per_rule")?.clone()).ok()?,
        })
    }
}

/// Everything besides the model's bytes that a report depends on (see `crate::cache`).
fn cache_context(s: &Settings, format: Format, style: Style, base: &Path) -> String {
    let extra = match format {
        Format::Human => format!("{style:?}"),
        Format::Sarif => format!("base {}", base.display()),
        _ => String::new(),
    };
    format!(
        "ort {} table {}\noptions {:?}\nseverities {:?}\nformat {format:?} {extra}\nreason {}\ndims {:?}",
        s.release.version,
        crate::cache::sha256_hex(
            &[s.release.compact, s.release.attributes_text.as_bytes()].concat()
        ),
        s.options,
        s.severities,
        s.release_reason,
        s.dims,
    )
}

/// The report of one model: from the cache when it has it, else loaded, analysed and stored.
fn report_for(
    file: &Path,
    settings: &Settings,
    format: Format,
    style: Style,
    base: &Path,
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
    let (owned_file, owned_settings, owned_base) =
        (file.to_path_buf(), settings.clone(), base.to_path_buf());
    let (r, locations) = super::budget::bounded(file, move || {
        let a = lint::analyse(model::load(&owned_file)?, &owned_settings);
        let locations: Vec<String> = a
            .model
            .external
            .iter()
            .map(|e| e.location.clone())
            .collect();
        let r = ModelReport::new(&a, &owned_settings, format, style, &owned_base);
        Ok((r, locations))
    })?;
    if let Some((c, k)) = &key {
        let dir = file.parent().unwrap_or(Path::new(""));
        let mut seen = std::collections::BTreeSet::new();
        let facts: Vec<FileFacts> = locations
            .iter()
            .filter(|l| seen.insert((*l).clone()))
            .map(|l| FileFacts::of(&dir.join(l)))
            .collect();
        let _ = c.put(k, &facts, &r);
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

/// Nodes on the provider before the CPU (copies not counted) and on the CPU.
fn node_counts(p: &Placement) -> (usize, usize) {
    let provider = crate::providers::advised(&p.eps).ep;
    let (mut on_provider, mut cpu) = (0, 0);
    for g in &p.session.graphs {
        for (_, n) in g.live_nodes() {
            match n.ep {
                Some(Ep::Cpu) => cpu += 1,
                Some(e) if e == provider && !n.op.starts_with("Memcpy") => on_provider += 1,
                _ => {}
            }
        }
    }
    (on_provider, cpu)
}

/// `ORT 1.24.4 (all): 52 nodes on CUDA, 33 on CPU, 28 copies`.
pub fn prediction_line(p: &Placement) -> String {
    let (on_provider, cpu) = node_counts(p);
    match &p.outcome {
        Outcome::Ok => format!(
            "ORT {} ({}): {} on {}, {cpu} on CPU, {}",
            p.ort,
            p.level.name(),
            plural(on_provider, "node", "nodes"),
            crate::providers::advised(&p.eps).label,
            plural(p.copies.len(), "copy", "copies")
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

/// The summary lines of one model: path and structure, prediction and counts, problems.
fn human_summary(a: &Analysis) -> String {
    let (deny, warn) = severity_counts(&a.findings);
    let mut text = summary_line(&a.model);
    text.push('\n');
    let copied = match &a.copied {
        (Some(b), Some(e)) if *b > 0 => {
            format!(" ({} per run at the dims: {e})", output::human_bytes(*b))
        }
        _ => String::new(),
    };
    text.push_str(&format!(
        "  {}{copied}; {}, {}",
        prediction_line(&a.placement),
        plural(deny, "error", "errors"),
        plural(warn, "warning", "warnings"),
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
        "{}: ir {}, opsets {}; {} in {}",
        m.path.display(),
        m.proto.ir_version(),
        if opsets.is_empty() {
            "none".into()
        } else {
            opsets
        },
        plural(s.nodes, "node", "nodes"),
        plural(s.graphs, "graph", "graphs"),
    );
    if s.functions > 0 {
        line += &format!(
            ", {}",
            plural(s.functions, "local function", "local functions")
        );
    }
    line += &format!(
        "; {} ({})",
        plural(s.initializers, "initializer", "initializers"),
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
            "; external data: {} in {} ({files})",
            output::human_bytes(s.external_bytes),
            plural(s.external_files.len(), "file", "files")
        );
    }
    line
}

/// Findings at deny and at warn level.
fn severity_counts(findings: &[Finding]) -> (usize, usize) {
    let count = |level| findings.iter().filter(|f| f.severity == level).count();
    (count(Severity::Deny), count(Severity::Warn))
}
