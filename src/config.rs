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
//! [cpu]
//! nchwc-block = 16                   # MLAS NCHWc block size: 16 (AVX-512F), 8 (other x86-64), 0 (none)
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
    /// The file's other errors: every mistake is reported at once, not only the first.
    #[related]
    pub more: Vec<ConfigError>,
}

/// The configuration keys. A key added to `Raw` is added here too (unknown keys are reported
/// with a suggestion before `Raw` is read).
pub const KEYS: &[&str] = &["models", "ort", "ep", "opt-level", "dims", "cpu", "rules"];

/// The NCHWc block sizes `[cpu] nchwc-block` accepts.
pub const NCHWC_BLOCKS: [i64; 3] = [16, 8, 0];

/// The closest of `candidates` to `key` (case-insensitive Jaro-Winkler similarity of at least
/// 0.8, as clap suggests flags), for "did you mean".
pub fn suggest<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&key, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// " (did you mean `x`?)" or nothing.
pub fn did_you_mean<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(key, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

/// The help of an unknown rule: a suggestion, then every rule.
pub fn unknown_rule_help(key: &str) -> String {
    let names = rules::all()
        .into_iter()
        .flat_map(|r| [r.code, r.name])
        .chain(["all"]);
    let known: Vec<String> = rules::all()
        .iter()
        .map(|r| format!("{} ({})", r.code, r.name))
        .collect();
    let hint = suggest(key, names)
        .map(|c| format!("did you mean `{c}`? "))
        .unwrap_or_default();
    format!(
        "{hint}rules: {}, or `all` (`cargo onnx-lint rules` lists them)",
        known.join(", ")
    )
}

/// An ORT release that no bundled table stands for.
#[derive(Debug, Error, Diagnostic)]
#[error("unknown ORT release `{spec}`")]
#[diagnostic(code(onnx_lint::tables::unknown_release), help("{help}"))]
pub struct UnknownRelease {
    pub spec: String,
    pub help: String,
}

/// The bundled table for a release spec, and a note when it is not that exact release:
/// `1.24.4` exactly; `1.24` for the newest bundled 1.24.x; a patch release without a table of
/// its own (`1.24.1`) maps to its minor release's table (ORT registers kernels per minor
/// release; the note says so).
pub fn resolve_release(
    spec: &str,
) -> Result<(&'static crate::tables::Bundled, Option<String>), UnknownRelease> {
    use crate::tables;
    if let Ok(b) = tables::resolve(spec) {
        return Ok((b, None));
    }
    let clean = spec.trim().trim_start_matches('v');
    let parts: Vec<&str> = clean.split('.').collect();
    if parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        let minor = format!("{}.{}", parts[0], parts[1]);
        if let Ok(b) = tables::resolve(&minor) {
            return Ok((
                b,
                Some(format!(
                    "ORT {clean} has no bundled table of its own: simulating the {minor} kernel table ({}), which stands for every {minor}.x release",
                    b.version
                )),
            ));
        }
    }
    let versions: Vec<&'static str> = tables::bundled().iter().map(|b| b.version).collect();
    let minors: Vec<String> = versions
        .iter()
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .collect();
    let hint = suggest(
        clean,
        versions
            .iter()
            .copied()
            .chain(minors.iter().map(String::as_str)),
    )
    .map(|c| format!("did you mean `{c}`? "))
    .unwrap_or_default();
    Err(UnknownRelease {
        spec: spec.to_string(),
        help: format!(
            "{hint}bundled releases: {}; give one of them, a minor release such as `1.24`, or a patch release of a bundled minor (`1.24.1`)",
            versions.join(", ")
        ),
    })
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
    cpu: Option<RawCpu>,
    rules: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
}

/// `[cpu]`: the machine the CPU provider runs on.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCpu {
    nchwc_block: Option<Spanned<i64>>,
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
    /// `[cpu] nchwc-block`: MLAS's NCHWc block size on the deployment machine.
    pub nchwc_block: Option<u32>,
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
        self.nchwc_block = over.nchwc_block.or(self.nchwc_block);
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
        more: Vec::new(),
    })
}

/// One error carrying the others (in file order), or `None`.
fn combine(mut errors: Vec<ConfigError>) -> Option<Box<ConfigError>> {
    errors.sort_by_key(|e| e.span.offset());
    let mut it = errors.into_iter();
    let mut first = it.next()?;
    first.more.extend(it);
    Some(Box::new(first))
}

/// Parses configuration text. `table_prefix` locates the keys inside a larger document (for a
/// Cargo.toml: `package.metadata.onnx-lint`); `None` for an `onnx-lint.toml`.
pub fn parse(
    path: &Path,
    text: &str,
    table_prefix: Option<&str>,
) -> Result<Config, Box<ConfigError>> {
    let Some(table) = find_table(path, text, table_prefix)? else {
        return Ok(Config::default());
    };
    let mut errors: Vec<ConfigError> = Vec::new();
    // Unknown keys first, all of them, each with a suggestion; the rest is then read by serde.
    let (span, inner) = (table.span(), table.into_inner());
    let mut known = toml::de::DeTable::new();
    for (key, value) in inner {
        if KEYS.contains(&key.get_ref().as_ref()) {
            known.insert(key, value);
        } else {
            let k: &str = key.get_ref();
            errors.push(*error(
                path,
                text,
                key.span(),
                format!(
                    "unknown field `{k}`{}",
                    did_you_mean(k, KEYS.iter().copied())
                ),
                "not a configuration key",
                Some(format!("the keys are {}", KEYS.join(", "))),
            ));
        }
    }
    let value = Spanned::new(span, toml::de::DeValue::Table(known));
    let raw = match Raw::deserialize(toml::de::ValueDeserializer::from(value)) {
        Ok(raw) => raw,
        Err(e) => {
            errors.push(*toml_error(path, text, &e));
            return Err(combine(errors).unwrap_or_else(|| toml_error(path, text, &e)));
        }
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
            match glob::Pattern::new(&pattern) {
                Ok(_) => config
                    .models
                    .push(dir.join(&pattern).to_string_lossy().into_owned()),
                Err(e) => errors.push(*error(
                    path,
                    text,
                    span,
                    format!("bad glob `{pattern}`: {e}"),
                    "this glob",
                    None,
                )),
            }
        }
    }
    if let Some(ort) = raw.ort {
        let span = ort.span();
        let v = ort.into_inner();
        match resolve_release(&v) {
            Ok(_) => config.ort = Some(v),
            Err(e) => errors.push(*error(
                path,
                text,
                span,
                format!("unknown ORT release `{v}`"),
                "not a bundled release",
                Some(e.help),
            )),
        }
    }
    if let Some(ep) = raw.ep {
        let span = ep.span();
        let v = ep.into_inner();
        if crate::providers::by_option(&v).is_some() {
            config.ep = Some(v);
        } else {
            let options = crate::providers::options();
            let expected = match options.split_last() {
                Some((last, [])) => format!("expected `{last}`"),
                Some((last, rest)) => format!("expected `{}` or `{last}`", rest.join("`, `")),
                None => "expected a provider".to_string(),
            };
            errors.push(*error(
                path,
                text,
                span,
                format!(
                    "unknown ep `{v}`{}",
                    did_you_mean(&v, options.iter().copied())
                ),
                &expected,
                None,
            ));
        }
    }
    const LEVELS: [&str; 4] = ["disable", "basic", "extended", "all"];
    if let Some(level) = raw.opt_level {
        let span = level.span();
        let v = level.into_inner();
        if LEVELS.contains(&v.as_str()) {
            config.opt_level = Some(v);
        } else {
            errors.push(*error(
                path,
                text,
                span,
                format!("unknown opt-level `{v}`{}", did_you_mean(&v, LEVELS)),
                "expected disable, basic, extended or all",
                None,
            ));
        }
    }
    for (key, value) in raw.dims.unwrap_or_default() {
        let span = value.span();
        let (key, value) = (key.into_inner(), value.into_inner());
        match u64::try_from(value) {
            Ok(v) => {
                config.dims.insert(key, v);
            }
            Err(_) => errors.push(*error(
                path,
                text,
                span,
                format!("dim `{key}` must be a non-negative integer"),
                "negative",
                None,
            )),
        }
    }
    if let Some(block) = raw.cpu.and_then(|c| c.nchwc_block) {
        let span = block.span();
        let v = block.into_inner();
        match u32::try_from(v) {
            Ok(b) if NCHWC_BLOCKS.contains(&v) => config.nchwc_block = Some(b),
            _ => errors.push(*error(
                path,
                text,
                span,
                format!("unsupported nchwc-block `{v}`"),
                "expected 16, 8 or 0",
                Some(
                    "MLAS's NCHWc block size: 16 on a CPU with AVX-512F, 8 on other x86-64 \
                     CPUs, 0 where ORT has no NCHWc kernels (`cargo onnx-lint verify` prints \
                     this machine's)"
                        .into(),
                ),
            )),
        }
    }
    for (key, level) in raw.rules.unwrap_or_default() {
        let (kspan, vspan) = (key.span(), level.span());
        let (key, level) = (key.into_inner(), level.into_inner());
        let mut ok = true;
        if !rules::is_group(&key) && rules::find(&key).is_none() {
            ok = false;
            errors.push(*error(
                path,
                text,
                kspan,
                format!("unknown rule `{key}`"),
                "no rule has this code or name",
                Some(unknown_rule_help(&key)),
            ));
        }
        match Severity::parse(&level) {
            Some(sev) if ok => config.rules.push((key, sev)),
            Some(_) => {}
            None => errors.push(*error(
                path,
                text,
                vspan,
                format!(
                    "unknown level `{level}`{}",
                    did_you_mean(&level, ["deny", "warn", "allow"])
                ),
                "expected deny, warn or allow",
                None,
            )),
        }
    }
    match combine(errors) {
        Some(e) => Err(e),
        None => Ok(config),
    }
}

/// The table that holds the keys: the whole document, or `prefix` (dotted) of it, with spans
/// relative to the whole text. `None` when the document has no such table.
fn find_table<'t>(
    path: &Path,
    text: &'t str,
    prefix: Option<&str>,
) -> Result<Option<Spanned<toml::de::DeTable<'t>>>, Box<ConfigError>> {
    let table = toml::de::DeTable::parse(text).map_err(|e| toml_error(path, text, &e))?;
    let Some(prefix) = prefix else {
        return Ok(Some(table));
    };
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
            toml::de::DeValue::Table(t) => return Ok(Some(Spanned::new(span, t))),
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
            more: Vec::new(),
        })
    })?;
    parse(path, &text, None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cpu_nchwc_block_is_read_and_checked() {
        let path = Path::new("onnx-lint.toml");
        let c = parse(path, "[cpu]\nnchwc-block = 8\n", None).unwrap();
        assert_eq!(c.nchwc_block, Some(8));
        let c = parse(path, "[cpu]\nnchwc-block = 0\n", None).unwrap();
        assert_eq!(c.nchwc_block, Some(0));
        assert_eq!(
            parse(path, "ort = \"1.24\"\n", None).unwrap().nchwc_block,
            None
        );
        let e = parse(path, "[cpu]\nnchwc-block = 4\n", None).unwrap_err();
        assert!(
            e.message.contains("unsupported nchwc-block `4`"),
            "{}",
            e.message
        );
        let e = parse(path, "[cpu]\nnchwc-blok = 8\n", None).unwrap_err();
        assert!(e.message.contains("nchwc-blok"), "{}", e.message);
        // A later configuration wins.
        let a = parse(path, "[cpu]\nnchwc-block = 8\n", None).unwrap();
        let b = parse(path, "[cpu]\nnchwc-block = 16\n", None).unwrap();
        assert_eq!(a.clone().merge(b).nchwc_block, Some(16));
        assert_eq!(a.merge(Config::default()).nchwc_block, Some(8));
    }
}
