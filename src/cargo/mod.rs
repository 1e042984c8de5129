//! Cargo: the only module that knows about Cargo.
//!
//! - [`discover`]: `cargo metadata --no-deps` (through `cargo_metadata`, which runs `$CARGO` or
//!   `cargo` from `PATH`) gives the workspace, its members and the target directory; each
//!   member's `Cargo.toml` and the workspace's are then read for `[package.metadata.onnx-lint]`
//!   and `[workspace.metadata.onnx-lint]`, with spans so that errors point into the file.
//! - [`Workspace::units`]: which models to lint, with which configuration, for a selection
//!   (`-p`, `--workspace`, or the package of the current folder), as other cargo subcommands do.
//! - [`ort_version`]: the ORT release the `ort` crate in Cargo.lock links.
//!
//! Layers, later over earlier: `onnx-lint.toml`, `[workspace.metadata.onnx-lint]`,
//! `[package.metadata.onnx-lint]` (the command line goes over all, in `cli/`). Model globs are
//! relative to the `Cargo.toml` that declares them. Nothing here prints.

pub mod ort_version;

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

use miette::{Diagnostic, NamedSource, SourceSpan};
use semver::VersionReq;
use thiserror::Error;

use crate::config::{self, Config, ConfigError};

/// Where the keys live in a `Cargo.toml`.
pub const PACKAGE_TABLE: &str = "package.metadata.onnx-lint";
pub const WORKSPACE_TABLE: &str = "workspace.metadata.onnx-lint";

/// Errors of this module. Each is a usage error (exit code 2) for the command line.
#[derive(Debug, Error, Diagnostic)]
pub enum CargoError {
    #[error("`cargo metadata` failed: {message}")]
    #[diagnostic(
        code(onnx_lint::cargo::metadata),
        help(
            "cargo onnx-lint reads the workspace with `cargo metadata`: it needs `cargo` (from \
             `$CARGO` or `PATH`) and a valid Cargo.toml; or pass model files as arguments"
        )
    )]
    Metadata { message: String },

    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(Box<ConfigError>),

    #[error("package `{name}` is not a member of the workspace at {root}")]
    #[diagnostic(code(onnx_lint::cargo::unknown_package), help("members: {members}"))]
    UnknownPackage {
        name: String,
        root: String,
        members: String,
    },

    #[error("cannot read {}: {message}", path.display())]
    #[diagnostic(code(onnx_lint::cargo::io))]
    Io { path: PathBuf, message: String },

    #[error("cannot parse {}: {message}", path.display())]
    #[diagnostic(code(onnx_lint::cargo::lock))]
    Lock { path: PathBuf, message: String },

    #[error("no models to lint: {message}")]
    #[diagnostic(
        code(onnx_lint::cargo::no_models),
        help(
            "list them in the workspace's Cargo.toml:\n\n    [workspace.metadata.onnx-lint]\n    \
             models = [\"models/**/*.onnx\"]\n\nor in a package's [package.metadata.onnx-lint], \
             or pass model files or folders as arguments"
        )
    )]
    NoModels { message: String },
}

/// One `Cargo.toml` table of configuration, as read.
#[derive(Debug, Clone, Default)]
pub struct Declared {
    /// The `Cargo.toml` (absolute) and its text, for errors that point into it.
    pub manifest: PathBuf,
    /// The `Cargo.toml` as errors name it: relative to the current folder when inside it.
    pub shown: PathBuf,
    pub text: String,
    /// The table's keys; `models` joined to the manifest's folder.
    pub config: Config,
    /// The span of each entry of `models`, in order.
    pub model_spans: Vec<Range<usize>>,
}

/// A workspace member.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    /// The folder of its `Cargo.toml`.
    pub dir: PathBuf,
    pub declared: Declared,
    /// The requirement of its own dependency on the `ort` crate, if any.
    pub ort_req: Option<VersionReq>,
    /// How its manifest enables the `ort` crate's `load-dynamic` feature, if it does.
    pub ort_dynamic: Option<String>,
}

/// A Cargo workspace with its onnx-lint configuration.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// `[workspace.metadata.onnx-lint]` of the root `Cargo.toml`.
    pub declared: Declared,
    pub members: Vec<Member>,
    /// Indices into `members` of the default members.
    pub default_members: Vec<usize>,
    /// The member whose manifest is the one cargo would use here (`--manifest-path`, else the
    /// nearest `Cargo.toml` above the current folder); `None` at a virtual manifest.
    pub current: Option<usize>,
    /// Whether that manifest is the workspace root's.
    pub at_root: bool,
    pub lock: ort_version::Locked,
}

/// Which packages to lint, as `-p`/`--workspace` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Neither flag: the package of the current manifest, or the default members at a virtual
    /// workspace root.
    Default,
    Workspace,
    Packages(Vec<String>),
}

/// Models to lint under one configuration.
#[derive(Debug, Clone)]
pub struct Unit {
    /// `package `a``, or `workspace`.
    pub label: String,
    /// onnx-lint.toml ⊕ workspace ⊕ package.
    pub config: Config,
    /// Where `ort = ...` came from, when a layer sets it: `(file, table)`.
    pub ort_origin: Option<String>,
    /// The package's own `ort` requirement (picks among several locked `ort` versions).
    pub ort_req: Option<VersionReq>,
    /// How the package's manifest enables `ort`'s `load-dynamic` feature, if it does.
    pub ort_dynamic: Option<String>,
    pub models: Vec<PathBuf>,
}

/// The nearest `Cargo.toml` in `start` or above it.
pub fn find_manifest(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join("Cargo.toml"))
        .find(|p| p.is_file())
}

/// Reads the workspace that `manifest_path` (else the current folder `cwd`) belongs to.
pub fn discover(manifest_path: Option<&Path>, cwd: &Path) -> Result<Workspace, CargoError> {
    let mut cmd = cargo_metadata::MetadataCommand::new();
    cmd.no_deps();
    cmd.current_dir(cwd);
    let manifest = match manifest_path {
        Some(p) => {
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                cwd.join(p)
            };
            cmd.manifest_path(&p);
            Some(p)
        }
        None => find_manifest(cwd),
    };
    let meta = cmd.exec().map_err(|e| CargoError::Metadata {
        message: match e {
            cargo_metadata::Error::CargoMetadata { stderr } => stderr.trim().to_string(),
            cargo_metadata::Error::Io(io) => format!(
                "cannot run `{}`: {io}",
                std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
            ),
            other => other.to_string(),
        },
    })?;
    let root = meta.workspace_root.clone().into_std_path_buf();
    let root_manifest = root.join("Cargo.toml");
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let current_manifest = manifest.as_deref().map(canon);

    let members_ids: BTreeSet<&cargo_metadata::PackageId> = meta.workspace_members.iter().collect();
    let mut members = Vec::new();
    let mut config_errors: Vec<ConfigError> = Vec::new();
    for p in meta.packages.iter().filter(|p| members_ids.contains(&p.id)) {
        let manifest = p.manifest_path.clone().into_std_path_buf();
        let declared = match read_declared(&manifest, cwd, PACKAGE_TABLE) {
            Ok(d) => d,
            // Every manifest's mistakes are reported, not only the first manifest's.
            Err(CargoError::Config(e)) => {
                config_errors.push(*e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let ort_dep = p.dependencies.iter().find(|d| d.name == "ort");
        let ort_req = ort_dep.map(|d| d.req.clone());
        let ort_dynamic = load_dynamic(p, ort_dep);
        members.push(Member {
            name: p.name.to_string(),
            dir: manifest.parent().unwrap_or(Path::new("")).to_path_buf(),
            declared,
            ort_req,
            ort_dynamic,
        });
    }
    members.sort_by(|a, b| a.name.cmp(&b.name));
    let current = current_manifest.as_deref().and_then(|cm| {
        members
            .iter()
            .position(|m| canon(&m.declared.manifest) == cm)
    });
    let default_ids: Vec<&cargo_metadata::PackageId> =
        if meta.workspace_default_members.is_available() {
            meta.workspace_default_members.iter().collect()
        } else {
            meta.workspace_members.iter().collect()
        };
    let default_members = meta
        .packages
        .iter()
        .filter(|p| default_ids.contains(&&p.id))
        .filter_map(|p| members.iter().position(|m| m.name == p.name.as_str()))
        .collect();
    let declared = match read_declared(&root_manifest, cwd, WORKSPACE_TABLE) {
        Ok(d) => d,
        Err(CargoError::Config(e)) => {
            config_errors.push(*e);
            Declared::default()
        }
        Err(e) => return Err(e),
    };
    let mut it = config_errors.into_iter();
    if let Some(mut first) = it.next() {
        first.more.extend(it);
        return Err(CargoError::Config(Box::new(first)));
    }
    let lock = ort_version::read_lock(&root.join("Cargo.lock"))?;
    Ok(Workspace {
        at_root: current_manifest.as_deref() == Some(canon(&root_manifest).as_path()),
        root,
        target_dir: meta.target_directory.into_std_path_buf(),
        declared,
        members,
        default_members,
        current,
        lock,
    })
}

/// How a package's manifest enables the `ort` crate's `load-dynamic` feature: on its `ort`
/// dependency, or through one of its own features (`dynamic = ["ort/load-dynamic"]`).
fn load_dynamic(
    p: &cargo_metadata::Package,
    ort_dep: Option<&cargo_metadata::Dependency>,
) -> Option<String> {
    let dep = ort_dep?;
    if dep.features.iter().any(|f| f == "load-dynamic") {
        return Some(format!(
            "package `{}` depends on `ort` with its `load-dynamic` feature",
            p.name
        ));
    }
    let (feature, _) = p.features.iter().find(|(_, enables)| {
        enables
            .iter()
            .any(|e| e == "ort/load-dynamic" || e == "ort?/load-dynamic")
    })?;
    Some(format!(
        "package `{}`'s feature `{feature}` enables `ort/load-dynamic`",
        p.name
    ))
}

/// Reads one table of a `Cargo.toml`. Errors name it relative to `cwd` when inside it, and its
/// model globs are joined to that spelling of its folder.
fn read_declared(manifest: &Path, cwd: &Path, table: &str) -> Result<Declared, CargoError> {
    let text = std::fs::read_to_string(manifest).map_err(|e| CargoError::Io {
        path: manifest.to_path_buf(),
        message: e.to_string(),
    })?;
    let shown = relative(manifest, cwd);
    let config = config::parse(&shown, &text, Some(table)).map_err(CargoError::Config)?;
    let model_spans = model_spans(&text, table);
    Ok(Declared {
        manifest: manifest.to_path_buf(),
        shown,
        text,
        config,
        model_spans,
    })
}

/// The spans of the entries of `<table>.models`.
fn model_spans(text: &str, table: &str) -> Vec<Range<usize>> {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return Vec::new();
    };
    let mut current = doc.into_inner();
    let parts: Vec<&str> = table.split('.').chain(["models"]).collect();
    for (i, part) in parts.iter().enumerate() {
        let key = toml::Spanned::new(0..0, std::borrow::Cow::Borrowed(*part));
        let Some(item) = current.remove(&key) else {
            return Vec::new();
        };
        match item.into_inner() {
            toml::de::DeValue::Table(t) if i + 1 < parts.len() => current = t,
            toml::de::DeValue::Array(a) if i + 1 == parts.len() => {
                return a.iter().map(|v| v.span()).collect();
            }
            _ => return Vec::new(),
        }
    }
    Vec::new()
}

/// Layers configurations (later over earlier); remembers which one set `ort`.
fn layer(layers: &[(&Config, Option<String>)]) -> (Config, Option<String>) {
    let mut out = Config::default();
    let mut origin = None;
    for (c, where_) in layers {
        if c.ort.is_some() {
            origin = where_.clone();
        }
        out = out.merge((*c).clone());
    }
    (out, origin)
}

/// `crates/a/Cargo.toml` relative to `base` when inside it (also when only their canonical
/// forms say so), else as it is.
pub fn relative(path: &Path, base: &Path) -> PathBuf {
    if let Ok(r) = path.strip_prefix(base) {
        return r.to_path_buf();
    }
    match (path.canonicalize(), base.canonicalize()) {
        (Ok(p), Ok(b)) => p
            .strip_prefix(&b)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

impl Workspace {
    fn origin(&self, declared: &Declared, table: &str) -> String {
        format!(
            "[{table}] of {}",
            relative(&declared.manifest, &self.root).display()
        )
    }

    /// The configuration for the workspace level (file ⊕ workspace).
    fn workspace_config(&self, file: &Config) -> (Config, Option<String>) {
        layer(&[
            (file, file.origin.as_ref().map(|p| p.display().to_string())),
            (
                &self.declared.config,
                Some(self.origin(&self.declared, WORKSPACE_TABLE)),
            ),
        ])
    }

    fn member_unit(&self, file: &Config, i: usize) -> Unit {
        let m = &self.members[i];
        let (config, ort_origin) = layer(&[
            (file, file.origin.as_ref().map(|p| p.display().to_string())),
            (
                &self.declared.config,
                Some(self.origin(&self.declared, WORKSPACE_TABLE)),
            ),
            (
                &m.declared.config,
                Some(self.origin(&m.declared, PACKAGE_TABLE)),
            ),
        ]);
        Unit {
            label: format!("package `{}`", m.name),
            config,
            ort_origin,
            ort_req: m.ort_req.clone(),
            ort_dynamic: m.ort_dynamic.clone(),
            models: Vec::new(),
        }
    }

    /// The member whose folder holds `path` (the deepest one), if any.
    pub fn owner(&self, path: &Path) -> Option<usize> {
        let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                let dir = m.dir.canonicalize().unwrap_or_else(|_| m.dir.clone());
                abs.starts_with(&dir)
            })
            .max_by_key(|(_, m)| m.dir.components().count())
            .map(|(i, _)| i)
    }

    /// The configuration for model files given on the command line: that of the package whose
    /// folder holds the file, else the workspace's.
    pub fn unit_for_file(&self, file_config: &Config, path: &Path) -> Unit {
        match self.owner(path) {
            Some(i) => self.member_unit(file_config, i),
            None => self.workspace_unit(file_config),
        }
    }

    fn workspace_unit(&self, file_config: &Config) -> Unit {
        let (config, ort_origin) = self.workspace_config(file_config);
        Unit {
            label: "workspace".into(),
            config,
            ort_origin,
            ort_req: None,
            ort_dynamic: None,
            models: Vec::new(),
        }
    }

    /// The selected members' indices.
    fn selected(&self, selection: &Selection) -> Result<Vec<usize>, CargoError> {
        Ok(match selection {
            Selection::Workspace => (0..self.members.len()).collect(),
            Selection::Default => match self.current {
                Some(i) => vec![i],
                None => self.default_members.clone(),
            },
            Selection::Packages(names) => {
                let mut out = Vec::new();
                for n in names {
                    let Some(i) = self.members.iter().position(|m| &m.name == n) else {
                        return Err(CargoError::UnknownPackage {
                            name: n.clone(),
                            root: self.root.display().to_string(),
                            members: self
                                .members
                                .iter()
                                .map(|m| m.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                        });
                    };
                    if !out.contains(&i) {
                        out.push(i);
                    }
                }
                out
            }
        })
    }

    /// The models to lint and their configuration, for `selection`:
    /// - each selected package's own `models`, under its configuration;
    /// - the workspace's `models`: a file inside a selected package's folder under that
    ///   package's configuration; a file outside every package when the whole workspace is
    ///   selected (`--workspace`, or no flag at the workspace root) under the workspace's.
    ///
    /// A glob that matches nothing is an error pointing at it.
    pub fn units(
        &self,
        file_config: &Config,
        selection: &Selection,
    ) -> Result<Vec<Unit>, CargoError> {
        let selected = self.selected(selection)?;
        let whole = match selection {
            Selection::Workspace => true,
            Selection::Default => self.at_root,
            Selection::Packages(_) => false,
        };
        let mut units: Vec<Unit> = Vec::new();
        let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
        let unit_of = |units: &mut Vec<Unit>, label: &str, make: &dyn Fn() -> Unit| -> usize {
            match units.iter().position(|u| u.label == label) {
                Some(i) => i,
                None => {
                    units.push(make());
                    units.len() - 1
                }
            }
        };
        for &i in &selected {
            let m = &self.members[i];
            let files = expand(&m.declared)?;
            if files.is_empty() {
                continue;
            }
            let label = format!("package `{}`", m.name);
            let u = unit_of(&mut units, &label, &|| self.member_unit(file_config, i));
            for f in files {
                if seen.insert(canonical(&f)) {
                    units[u].models.push(f);
                }
            }
        }
        if !self.declared.config.models.is_empty() && (whole || !selected.is_empty()) {
            for f in expand(&self.declared)? {
                let owner = self.owner(&f);
                let take = match owner {
                    Some(i) => selected.contains(&i),
                    None => whole,
                };
                if !take || !seen.insert(canonical(&f)) {
                    continue;
                }
                let u = match owner {
                    Some(i) => {
                        let label = format!("package `{}`", self.members[i].name);
                        unit_of(&mut units, &label, &|| self.member_unit(file_config, i))
                    }
                    None => unit_of(&mut units, "workspace", &|| {
                        self.workspace_unit(file_config)
                    }),
                };
                units[u].models.push(f);
            }
        }
        // onnx-lint.toml's models, when no Cargo.toml declares any.
        if units.is_empty() && !file_config.models.is_empty() && whole {
            let mut u = self.workspace_unit(file_config);
            for pattern in &file_config.models {
                if let Ok(entries) = glob::glob(pattern) {
                    u.models.extend(entries.filter_map(Result::ok));
                }
            }
            u.models.sort();
            if !u.models.is_empty() {
                units.push(u);
            }
        }
        if units.is_empty() {
            let names: Vec<String> = selected
                .iter()
                .map(|&i| format!("`{}`", self.members[i].name))
                .collect();
            return Err(CargoError::NoModels {
                message: if whole {
                    format!("the workspace at {} declares none", self.root.display())
                } else {
                    format!("package {} declares none", names.join(", "))
                },
            });
        }
        for u in &mut units {
            u.models.sort();
        }
        Ok(units)
    }
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Expands a table's `models` globs; a glob that matches no file is an error pointing at it.
fn expand(d: &Declared) -> Result<Vec<PathBuf>, CargoError> {
    let mut out = Vec::new();
    for (i, pattern) in d.config.models.iter().enumerate() {
        let span = d.model_spans.get(i).cloned().unwrap_or(0..0);
        let err = |message: String, label: &str| {
            CargoError::Config(Box::new(ConfigError {
                message,
                src: NamedSource::new(d.shown.display().to_string(), d.text.clone()),
                span: SourceSpan::new(span.start.into(), span.end.saturating_sub(span.start)),
                label: label.to_string(),
                help: Some(format!(
                    "globs are relative to the folder of this Cargo.toml ({})",
                    match d.shown.parent().map(|p| p.display().to_string()) {
                        Some(p) if !p.is_empty() => p,
                        _ => ".".to_string(),
                    }
                )),
                more: Vec::new(),
            }))
        };
        let entries = glob::glob(pattern)
            .map_err(|e| err(format!("bad glob `{pattern}`: {e}"), "this glob"))?;
        let found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect();
        if found.is_empty() {
            let shown = d
                .text
                .get(span.clone())
                .unwrap_or(pattern.as_str())
                .to_string();
            return Err(err(
                format!("the model glob {shown} matches no file"),
                "matches nothing",
            ));
        }
        out.extend(found);
    }
    Ok(out)
}
