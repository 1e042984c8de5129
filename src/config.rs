//! Configuration: the keys of `onnx-lint.toml`, also accepted in `[workspace.metadata.onnx-lint]`
//! and `[package.metadata.onnx-lint]` of a `Cargo.toml`. Errors point into the file.
//!
//! ```toml
//! models = ["models/**/*.onnx"]     # globs, relative to the file that declares them
//! ort = "1.24"                       # release to simulate
//! ep = "cuda"                        # cuda | cpu
//! opt-level = "all"                  # disable | basic | extended | all
//! dims = { batch = 1, sequence_length = 2048 }   # sizes of copies are evaluated here (else 1)
//!
//! [rules]                            # deny | warn | allow, by code or by name
//! OL101 = "deny"
//! shape-fed-reshape = "allow"
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use miette::{Diagnostic, NamedSource, SourceSpan};
use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use crate::diagnostics::Severity;
use crate::rules;

/// The name of the configuration file, looked up from the working directory upwards.
pub const FILE_NAME: &str = "onnx-lint.toml";

/// A configuration error, pointing at the offending text.
#[derive(Debug, Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(onnx_lint::config))]
pub struct ConfigError {
    pub message: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("{label}")]
    pub span: SourceSpan,
    pub label: String,
    #[help]
    pub help: Option<String>,
}

/// The configuration keys, as read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    models: Option<Spanned<Vec<Spanned<String>>>>,
    ort: Option<Spanned<String>>,
    ep: Option<Spanned<String>>,
    opt_level: Option<Spanned<String>>,
    dims: Option<BTreeMap<Spanned<String>, Spanned<i64>>>,
    rules: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
}

/// A validated configuration.
#[derive(Debug, Default, Clone)]
pub struct Config {
    /// Where it came from (a file, or a Cargo.toml table).
    pub origin: Option<PathBuf>,
    /// Model globs, already made relative to the current directory's view (joined to the folder
    /// of the file that declared them).
    pub models: Vec<String>,
    pub ort: Option<String>,
    pub ep: Option<String>,
    pub opt_level: Option<String>,
    /// (rule code or name, severity), in file order.
    pub rules: Vec<(String, Severity)>,
    /// Dim values that sizes of copies are evaluated at (`dims = { batch = 1 }`).
    pub dims: BTreeMap<String, u64>,
}

impl Config {
    /// Later configuration wins key by key; rule overrides accumulate.
    pub fn merge(mut self, over: Config) -> Config {
        if !over.models.is_empty() {
            self.models = over.models;
        }
        self.ort = over.ort.or(self.ort);
        self.ep = over.ep.or(self.ep);
        self.opt_level = over.opt_level.or(self.opt_level);
        self.rules.extend(over.rules);
        self.dims.extend(over.dims);
        self.origin = over.origin.or(self.origin);
        self
    }
}

fn error(
    path: &Path,
    text: &str,
    span: Range<usize>,
    message: String,
    label: &str,
    help: Option<String>,
) -> Box<ConfigError> {
    Box::new(ConfigError {
        message,
        src: NamedSource::new(path.display().to_string(), text.to_string()),
        span: SourceSpan::new(span.start.into(), span.end.saturating_sub(span.start)),
        label: label.to_string(),
        help,
    })
}

/// Parses configuration text. `table_prefix` locates the keys inside a larger document (for a
/// Cargo.toml: `package.metadata.onnx-lint`); `None` for an `onnx-lint.toml`.
pub fn parse(
    path: &Path,
    text: &str,
    table_prefix: Option<&str>,
) -> Result<Config, Box<ConfigError>> {
    let raw: Raw = match table_prefix {
        None => toml::from_str(text).map_err(|e| toml_error(path, text, &e))?,
        Some(prefix) => match sub_table(path, text, prefix)? {
            Some(raw) => raw,
            None => return Ok(Config::default()),
        },
    };
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut config = Config {
        origin: Some(path.to_path_buf()),
        ..Config::default()
    };
    if let Some(models) = raw.models {
        for m in models.into_inner() {
            let span = m.span();
            let pattern = m.into_inner();
            if let Err(e) = glob::Pattern::new(&pattern) {
                return Err(error(
                    path,
                    text,
                    span,
                    format!("bad glob `{pattern}`: {e}"),
                    "this glob",
                    None,
                ));
            }
            config
                .models
                .push(dir.join(&pattern).to_string_lossy().into_owned());
        }
    }
    if let Some(ort) = raw.ort {
        let span = ort.span();
        let v = ort.into_inner();
        if crate::tables::resolve(&v).is_err() {
            let bundled: Vec<&str> = crate::tables::bundled().iter().map(|b| b.version).collect();
            return Err(error(
                path,
                text,
                span,
                format!("unknown ORT release `{v}`"),
                "not a bundled release",
                Some(format!("bundled releases: {}", bundled.join(", "))),
            ));
        }
        config.ort = Some(v);
    }
    if let Some(ep) = raw.ep {
        let span = ep.span();
        let v = ep.into_inner();
        if !matches!(v.as_str(), "cuda" | "cpu") {
            return Err(error(
                path,
                text,
                span,
                format!("unknown ep `{v}`"),
                "expected `cuda` or `cpu`",
                None,
            ));
        }
        config.ep = Some(v);
    }
    if let Some(level) = raw.opt_level {
        let span = level.span();
        let v = level.into_inner();
        if !matches!(v.as_str(), "disable" | "basic" | "extended" | "all") {
            return Err(error(
                path,
                text,
                span,
                format!("unknown opt-level `{v}`"),
                "expected disable, basic, extended or all",
                None,
            ));
        }
        config.opt_level = Some(v);
    }
    for (key, value) in raw.dims.unwrap_or_default() {
        let span = value.span();
        let (key, value) = (key.into_inner(), value.into_inner());
        let Ok(v) = u64::try_from(value) else {
            return Err(error(
                path,
                text,
                span,
                format!("dim `{key}` must be a non-negative integer"),
                "negative",
                None,
            ));
        };
        config.dims.insert(key, v);
    }
    for (key, level) in raw.rules.unwrap_or_default() {
        let (kspan, vspan) = (key.span(), level.span());
        let (key, level) = (key.into_inner(), level.into_inner());
        if !rules::is_group(&key) && rules::find(&key).is_none() {
            let known: Vec<String> = rules::all()
                .iter()
                .map(|r| format!("{} ({})", r.code, r.name))
                .collect();
            return Err(error(
                path,
                text,
                kspan,
                format!("unknown rule `{key}`"),
                "no rule has this code or name",
                Some(format!("rules: {}", known.join(", "))),
            ));
        }
        let Some(sev) = Severity::parse(&level) else {
            return Err(error(
                path,
                text,
                vspan,
                format!("unknown level `{level}`"),
                "expected deny, warn or allow",
                None,
            ));
        };
        config.rules.push((key, sev));
    }
    Ok(config)
}

/// Deserialises `prefix` (dotted) of a document with spans relative to the whole text.
fn sub_table(path: &Path, text: &str, prefix: &str) -> Result<Option<Raw>, Box<ConfigError>> {
    let table = toml::de::DeTable::parse(text).map_err(|e| toml_error(path, text, &e))?;
    let mut current = table.into_inner();
    let parts: Vec<&str> = prefix.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let key = Spanned::new(0..0, std::borrow::Cow::Borrowed(*part));
        let Some(item) = current.remove(&key) else {
            return Ok(None);
        };
        let span = item.span();
        match item.into_inner() {
            toml::de::DeValue::Table(t) if i + 1 < parts.len() => current = t,
            toml::de::DeValue::Table(t) => {
                let value = Spanned::new(span, toml::de::DeValue::Table(t));
                let raw = Raw::deserialize(toml::de::ValueDeserializer::from(value))
                    .map_err(|e| toml_error(path, text, &e))?;
                return Ok(Some(raw));
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> Box<ConfigError> {
    let span = e.span().unwrap_or(0..0);
    error(
        path,
        text,
        span,
        format!("invalid configuration: {}", e.message()),
        "here",
        None,
    )
}

/// `onnx-lint.toml` in `start` or the nearest folder above it.
pub fn find_file(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// Loads `onnx-lint.toml` from `path`.
pub fn load_file(path: &Path) -> Result<Config, Box<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Box::new(ConfigError {
            message: format!("cannot read {}: {e}", path.display()),
            src: NamedSource::new(path.display().to_string(), String::new()),
            span: SourceSpan::new(0.into(), 0),
            label: String::new(),
            help: None,
        })
    })?;
    parse(path, &text, None)
}
