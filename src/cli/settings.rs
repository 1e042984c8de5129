//! Resolving what to simulate, in one place for every command (lint, `place`, `verify`): the
//! ORT release (and why), the providers, the optimisation level and the rules' severities, from
//! the command line over the configuration (`onnx-lint.toml`, Cargo metadata) over Cargo.lock
//! over the defaults. Every mistake is reported at once, each with a suggestion.

use miette::Diagnostic;
use semver::VersionReq;
use thiserror::Error;

use super::{EpArg, OptLevelArg, SharedArgs};
use crate::cargo::ort_version::{self, Locked};
use crate::config::{self, Config};
use crate::diagnostics::Severity;
use crate::lint::Settings;
use crate::placer::{OptLevel, Options};
use crate::rules::Severities;
use crate::tables;

/// A usage error of the command line (exit code 2), with the others found in the same pass.
#[derive(Debug, Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(onnx_lint::usage))]
pub struct UsageError {
    pub message: String,
    #[help]
    pub help: Option<String>,
    #[related]
    pub more: Vec<UsageError>,
}

impl UsageError {
    pub fn new(message: impl Into<String>, help: Option<String>) -> UsageError {
        UsageError {
            message: message.into(),
            help,
            more: Vec::new(),
        }
    }

    /// One error carrying the others, or `None`.
    pub fn combine(errors: Vec<UsageError>) -> Option<UsageError> {
        let mut it = errors.into_iter();
        let mut first = it.next()?;
        first.more.extend(it);
        Some(first)
    }
}

/// `--deny/--warn/--allow` as given (empty for commands without them).
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleFlags<'a> {
    pub allow: &'a [String],
    pub warn: &'a [String],
    pub deny: &'a [String],
    /// `--dim NAME=VALUE`: over `dims` in the configuration.
    pub dims: &'a [String],
}

/// What the Cargo project says about the release, for one group of models.
#[derive(Debug, Clone, Copy, Default)]
pub struct CargoFacts<'a> {
    pub lock: Option<&'a Locked>,
    /// The package's own `ort` requirement.
    pub ort_req: Option<&'a VersionReq>,
    /// How the package's manifest enables `ort`'s `load-dynamic`.
    pub ort_dynamic: Option<&'a str>,
    /// Where the configuration's `ort` key is (`[package.metadata.onnx-lint] of a/Cargo.toml`).
    pub ort_origin: Option<&'a str>,
}

/// Resolved settings, with the release note to print and warnings for stderr.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub settings: Settings,
    /// `ORT 1.24.4: --ort 1.24.4`: which release is simulated, and why.
    pub note: String,
    pub warnings: Vec<String>,
}

fn level_of(s: &str) -> OptLevel {
    match s {
        "disable" => OptLevel::Disable,
        "basic" => OptLevel::Basic,
        "extended" => OptLevel::Extended,
        _ => OptLevel::All,
    }
}

/// The command line over the configuration over Cargo.lock over the defaults.
pub fn resolve(
    shared: &SharedArgs,
    rules: RuleFlags,
    config: &Config,
    cargo: CargoFacts,
) -> Result<Resolved, UsageError> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let newest = tables::newest();
    let (release, reason) = if let Some(v) = &shared.ort {
        match config::resolve_release(v) {
            Ok((b, note)) => {
                notes.extend(note);
                (b, format!("--ort {v}"))
            }
            Err(e) => {
                errors.push(UsageError::new(e.to_string(), Some(e.help)));
                (newest, String::new())
            }
        }
    } else if let Some(v) = &config.ort {
        let origin = cargo
            .ort_origin
            .map(str::to_string)
            .or_else(|| config.origin.as_ref().map(|p| p.display().to_string()))
            .unwrap_or_else(|| "the configuration".into());
        match config::resolve_release(v) {
            Ok((b, note)) => {
                notes.extend(note);
                (b, format!("ort = \"{v}\" in {origin}"))
            }
            Err(e) => {
                errors.push(UsageError::new(
                    format!("{e} (ort = \"{v}\" in {origin})"),
                    Some(e.help),
                ));
                (newest, String::new())
            }
        }
    } else if let Some(why) = cargo
        .lock
        .and_then(|l| ort_version::dynamic_reason(l, cargo.ort_dynamic))
    {
        warnings.push(format!(
            "{why}: the ONNX Runtime release is whatever library the program loads at run time, \
             so Cargo.lock does not say which one; simulating the newest bundled release, {}. \
             Pass `--ort <VERSION>` or set `ort = \"...\"` in the configuration to simulate the \
             release you deploy",
            newest.version
        ));
        (
            newest,
            format!(
                "the newest bundled release: {why}, so the release is the library loaded at run time (pass --ort or set `ort`)"
            ),
        )
    } else if let Some(inferred) = cargo
        .lock
        .and_then(|l| ort_version::infer(l, cargo.ort_req))
    {
        warnings.extend(inferred.warning);
        (inferred.release, inferred.reason)
    } else {
        (
            newest,
            "the newest bundled release: no --ort, no `ort` key in a configuration, no `ort` crate in a Cargo.lock; pass --ort to simulate the release you deploy".to_string(),
        )
    };

    let mut options = Options {
        eps: crate::providers::default_list(),
        level: OptLevel::All,
        nchwc_block: config
            .nchwc_block
            .unwrap_or(crate::placer::RECORDED_NCHWC_BLOCK),
    };
    let ep = shared.ep.map(|EpArg(p)| p.option).or(config.ep.as_deref());
    if let Some(list) = ep.and_then(crate::providers::list) {
        options.eps = list;
    }
    options.level = match shared.opt_level {
        Some(OptLevelArg::Disable) => OptLevel::Disable,
        Some(OptLevelArg::Basic) => OptLevel::Basic,
        Some(OptLevelArg::Extended) => OptLevel::Extended,
        Some(OptLevelArg::All) => OptLevel::All,
        None => config
            .opt_level
            .as_deref()
            .map(level_of)
            .unwrap_or(OptLevel::All),
    };

    let mut severities = Severities::default();
    for (rule, level) in &config.rules {
        // The configuration was validated when it was read.
        let _ = severities.set(rule, *level);
    }
    for (list, level, flag) in [
        (rules.allow, Severity::Allow, "--allow"),
        (rules.warn, Severity::Warn, "--warn"),
        (rules.deny, Severity::Deny, "--deny"),
    ] {
        for rule in list {
            if severities.set(rule, level).is_err() {
                errors.push(UsageError::new(
                    format!("unknown rule `{rule}` in {flag} {rule}"),
                    Some(config::unknown_rule_help(rule)),
                ));
            }
        }
    }
    let mut dims = crate::rules::cost::Dims(config.dims.clone());
    for d in rules.dims {
        match crate::rules::cost::Dims::parse_one(d) {
            Ok((k, v)) => {
                dims.0.insert(k, v);
            }
            Err(e) => errors.push(UsageError::new(format!("--dim {e}"), None)),
        }
    }
    if let Some(e) = UsageError::combine(errors) {
        return Err(e);
    }
    let mut note = format!("ORT {}: {reason}", release.version);
    for n in notes {
        note.push_str("\nnote: ");
        note.push_str(&n);
    }
    Ok(Resolved {
        settings: Settings {
            release,
            release_reason: reason,
            options,
            severities,
            dims,
        },
        note,
        warnings,
    })
}
