//! The default command inside a Cargo project: the models the workspace declares (or the files
//! given, each under the configuration of the package that holds it), the release the `ort`
//! crate in Cargo.lock links, and the cache in the target directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::check::{self, Group, Settings};
use super::output;
use super::{CargoArgs, EXIT_ERROR, SharedArgs};
use crate::cache::{self, Cache};
use crate::cargo::{self, CargoError, Selection, Unit, ort_version};
use crate::config::Config;

fn report(e: CargoError) -> u8 {
    eprintln!("{}", output::render_report(&miette::Report::new(e)));
    EXIT_ERROR
}

/// Lints inside a Cargo project. `None` when this is not one (no `Cargo.toml` above the current
/// folder and no cargo flag), or when files were given and `cargo metadata` cannot run: the
/// caller then lints without Cargo.
/// The resolved groups go to `finish` (lint, or `--fix`).
pub fn run_with(
    paths: &[PathBuf],
    shared: &SharedArgs,
    args: &CargoArgs,
    file_config: &Config,
    finish: &check::Finish,
) -> Option<u8> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let explicit = !args.package.is_empty() || args.workspace || args.manifest_path.is_some();
    if !explicit && cargo::find_manifest(&cwd).is_none() {
        return None;
    }
    let ws = match cargo::discover(args.manifest_path.as_deref(), &cwd) {
        Ok(ws) => ws,
        Err(e @ CargoError::Metadata { .. }) if !paths.is_empty() && !explicit => {
            eprintln!("warning: {e}; linting the given files without the Cargo configuration");
            return None;
        }
        Err(e) => return Some(report(e)),
    };
    let units: Vec<Unit> = if paths.is_empty() {
        let selection = if !args.package.is_empty() {
            Selection::Packages(args.package.clone())
        } else if args.workspace {
            Selection::Workspace
        } else {
            Selection::Default
        };
        match ws.units(file_config, &selection) {
            Ok(mut units) => {
                for u in &mut units {
                    for m in &mut u.models {
                        *m = cargo::relative(m, &cwd);
                    }
                }
                units
            }
            Err(e) => return Some(report(e)),
        }
    } else {
        let files = match check::expand_paths(paths) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{}", output::render_report(&miette::Report::new(e)));
                return Some(EXIT_ERROR);
            }
        };
        if files.is_empty() {
            let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            eprintln!("error: no `*.onnx` files under {}", shown.join(", "));
            return Some(EXIT_ERROR);
        }
        let mut units: Vec<Unit> = Vec::new();
        for f in files {
            let u = ws.unit_for_file(file_config, &f);
            match units.iter_mut().find(|x| x.label == u.label) {
                Some(x) => x.models.push(f),
                None => units.push(Unit {
                    models: vec![f],
                    ..u
                }),
            }
        }
        units
    };

    let mut all: Vec<(Settings, Option<String>)> = Vec::new();
    let mut warnings = BTreeSet::new();
    for u in &units {
        let mut s = match check::settings(shared, &u.config) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return Some(EXIT_ERROR);
            }
        };
        let mut note = None;
        if shared.ort.is_none() {
            if let Some(v) = &u.config.ort {
                s.release_reason = format!(
                    "ort = \"{v}\" in {}",
                    u.ort_origin.as_deref().unwrap_or("the configuration")
                );
                note = Some(s.release_reason.clone());
            } else if let Some(inferred) = ort_version::infer(&ws.lock, u.ort_req.as_ref()) {
                s.release = inferred.release;
                s.release_reason = inferred.reason;
                note = Some(s.release_reason.clone());
                if let Some(w) = inferred.warning {
                    warnings.insert(w);
                }
            }
        }
        let note = note.map(|why| format!("{}: ORT {}: {why}", u.label, s.release.version));
        all.push((s, note));
    }
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let groups: Vec<Group> = units
        .iter()
        .zip(&all)
        .map(|(u, (s, note))| Group {
            targets: u.models.clone(),
            settings: s,
            note: note.clone(),
        })
        .collect();
    let cache = (!args.no_cache).then(|| Cache::new(cache_dir(&ws.target_dir)));
    Some(finish(&groups, cache.as_ref()))
}

/// `<target-dir>/onnx-lint`.
fn cache_dir(target: &Path) -> PathBuf {
    target.join(cache::DIR_NAME)
}
