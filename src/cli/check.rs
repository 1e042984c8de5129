//! The default command: lint model files and folders. Plans the groups of models (a Cargo
//! package's, or the files given), resolves each group's settings (`settings.rs`), analyses each
//! model (`crate::lint`) and prints one report in the chosen format, with a closing summary.

use std::path::{Path, PathBuf};

use super::output::{
    self, ColorChoice, Format, ModelReport, Printing, RenderCx, Report, Sink, Totals,
};
use super::settings::{self, CargoFacts, Resolved, RuleFlags, UsageError};
use super::workspace::{self, Planned};
use super::{CargoArgs, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, LintArgs, SharedArgs};
use crate::cache::{Cache, FileFacts};
use crate::config::{self, Config};
use crate::diagnostics::render::Style;
use crate::lint;
use crate::model::{self, LoadError};

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

pub fn run(
    paths: &[PathBuf],
    shared: &SharedArgs,
    args: &LintArgs,
    cargo: &CargoArgs,
    color: ColorChoice,
) -> Result<u8, miette::Report> {
    let printing = Printing {
        format: args.format,
        quiet: args.quiet,
        statistics: args.statistics,
        exit_zero: args.exit_zero,
        color,
    };
    // The format is checked before anything is read.
    if args.format.emitter().lint(&printing).is_none() {
        let report = if args.statistics && args.format.renders(Report::Lint) {
            Report::Statistics
        } else {
            Report::Lint
        };
        return Err(UsageError::new(args.format.refusal(report), None).into());
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
    let mut sink = Sink::new(args.output.as_deref());
    let exit = lint_groups(&planned.groups, cache.as_ref(), &printing, &mut sink);
    sink.finish()
        .map_err(|e| miette::Report::new(UsageError::new(e, None)))?;
    Ok(exit)
}

/// Lints every group and prints one report, with one exit code. With a cache, a model whose
/// bytes, settings and external files are unchanged is not loaded or analysed again: its
/// rendered report is read back.
pub fn lint_groups(groups: &[Group], cache: Option<&Cache>, p: &Printing, sink: &mut Sink) -> u8 {
    let Some(mut writer) = p.format.emitter().lint(p) else {
        eprintln!("error: {}", p.format.refusal(Report::Lint));
        return EXIT_ERROR;
    };
    let style = Style {
        color: p.color.enabled(sink.is_terminal()),
        unicode: sink.is_terminal(),
        width: output::width(),
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut exit = EXIT_OK;
    let mut totals = Totals::default();
    for group in groups {
        if !p.quiet {
            writer.group(&group.note(), sink);
        }
        let cx = RenderCx {
            settings: &group.resolved.settings,
            style,
            base: &cwd,
        };
        let context = cache.map(|_| cache_context(p.format, &cx));
        for file in &group.targets {
            match report_for(file, p.format, &cx, cache.zip(context.as_deref())) {
                Err(e) => {
                    exit = EXIT_ERROR;
                    totals.unreadable += 1;
                    writer.unreadable(&file.display().to_string(), e, sink);
                }
                Ok(r) => {
                    exit = exit.max(r.exit);
                    totals.add(&r);
                    writer.model(r, sink);
                }
            }
        }
    }
    writer.finish(&totals, sink);
    if exit == EXIT_FINDINGS && p.exit_zero {
        EXIT_OK
    } else {
        exit
    }
}

/// Everything besides the model's bytes that a report depends on (see `crate::cache`).
fn cache_context(format: Format, cx: &RenderCx) -> String {
    let s = cx.settings;
    let extra = format.emitter().cache_context(cx);
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
    format: Format,
    cx: &RenderCx,
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
    let (owned_file, owned_settings, owned_base, style) = (
        file.to_path_buf(),
        cx.settings.clone(),
        cx.base.to_path_buf(),
        cx.style,
    );
    let (r, locations) = super::budget::bounded(file, move || {
        let a = lint::analyse(model::load(&owned_file)?, &owned_settings);
        let locations: Vec<String> = a
            .model
            .external
            .iter()
            .map(|e| e.location.clone())
            .collect();
        let cx = RenderCx {
            settings: &owned_settings,
            style,
            base: &owned_base,
        };
        let r = ModelReport::of(&a, format.emitter().render(&a, &cx));
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
