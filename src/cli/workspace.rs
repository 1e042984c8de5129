//! Planning a lint run inside a Cargo project: which models, under which package's
//! configuration, with which Cargo.lock and cache folder. Plans only: never prints, never lints
//! (`check` acts on the plan).

use std::path::{Path, PathBuf};

use super::CargoArgs;
use crate::cache;
use crate::cargo::{self, CargoError, Selection, Unit, ort_version::Locked};
use crate::config::Config;

/// The models of a Cargo project, grouped by the configuration that applies to them.
#[derive(Debug)]
pub struct Plan {
    pub units: Vec<Unit>,
    pub lock: Locked,
    /// `<target-dir>/onnx-lint`.
    pub cache_dir: PathBuf,
}

/// What [`plan`] found.
#[derive(Debug)]
pub enum Planned {
    /// Not a Cargo project (no `Cargo.toml` above the current folder and no cargo flag).
    NotCargo,
    /// Files were given and `cargo metadata` failed: lint them without Cargo (the warning says
    /// so).
    Without(String),
    Cargo(Plan),
}

/// Plans a run inside a Cargo project. `files` are the model files given on the command line
/// (already expanded), `None` for the workspace's configured models.
pub fn plan(
    files: Option<&[PathBuf]>,
    args: &CargoArgs,
    file_config: &Config,
) -> Result<Planned, CargoError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let explicit = !args.package.is_empty() || args.workspace || args.manifest_path.is_some();
    if !explicit && cargo::find_manifest(&cwd).is_none() {
        return Ok(Planned::NotCargo);
    }
    let ws = match cargo::discover(args.manifest_path.as_deref(), &cwd) {
        Ok(ws) => ws,
        Err(e @ CargoError::Metadata { .. }) if files.is_some() && !explicit => {
            return Ok(Planned::Without(format!(
                "{e}; linting the given files without the Cargo configuration"
            )));
        }
        Err(e) => return Err(e),
    };
    let units: Vec<Unit> = match files {
        None => {
            let selection = if !args.package.is_empty() {
                Selection::Packages(args.package.clone())
            } else if args.workspace {
                Selection::Workspace
            } else {
                Selection::Default
            };
            let mut units = ws.units(file_config, &selection)?;
            for u in &mut units {
                for m in &mut u.models {
                    *m = cargo::relative(m, &cwd);
                }
            }
            units
        }
        Some(files) => {
            let mut units: Vec<Unit> = Vec::new();
            for f in files {
                let u = ws.unit_for_file(file_config, f);
                match units.iter_mut().find(|x| x.label == u.label) {
                    Some(x) => x.models.push(f.clone()),
                    None => units.push(Unit {
                        models: vec![f.clone()],
                        ..u
                    }),
                }
            }
            units
        }
    };
    Ok(Planned::Cargo(Plan {
        units,
        lock: ws.lock,
        cache_dir: cache_dir(&ws.target_dir),
    }))
}

/// `<target-dir>/onnx-lint`.
fn cache_dir(target: &Path) -> PathBuf {
    target.join(cache::DIR_NAME)
}
