//! The ORT release that the `ort` crate in a Cargo.lock links by default.
//!
//! The mapping is data, with its provenance: `ort-crate-releases.toml` beside this file.

use std::path::Path;
use std::sync::OnceLock;

use semver::{Version, VersionReq};
use serde::Deserialize;

use super::CargoError;
use crate::tables::{self, Bundled};

/// The mapping file, embedded.
pub const MAPPING: &str = include_str!("ort-crate-releases.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// `ort-sys` version → the ONNX Runtime release its build script downloads.
    #[serde(rename = "ort-sys")]
    pub ort_sys: Vec<SysEntry>,
    /// `ort` version → the `ort-sys` it requires.
    pub ort: Vec<OrtEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SysEntry {
    pub version: String,
    pub onnxruntime: String,
    pub source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrtEntry {
    pub version: String,
    #[serde(rename = "ort-sys")]
    pub ort_sys: String,
    pub described: String,
}

/// The embedded mapping, parsed on first use. `tests/it/cargo.rs` checks that it parses.
pub fn mapping() -> Result<&'static Mapping, String> {
    static PARSED: OnceLock<Result<Mapping, String>> = OnceLock::new();
    PARSED
        .get_or_init(|| toml::from_str(MAPPING).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The `ort` and `ort-sys` versions a Cargo.lock names (usually one of each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locked {
    pub ort: Vec<Version>,
    pub ort_sys: Vec<Version>,
    /// The locked `ort` depends on `libloading`, which only its `load-dynamic` feature pulls
    /// in: the program loads whatever ONNX Runtime library it finds at run time.
    pub ort_dynamic: bool,
}

#[derive(Debug, Deserialize)]
struct LockFile {
    #[serde(default)]
    package: Vec<LockPackage>,
}

#[derive(Debug, Deserialize)]
struct LockPackage {
    name: String,
    version: String,
    #[serde(default)]
    dependencies: Vec<String>,
}

/// Reads `ort`/`ort-sys` from a Cargo.lock; a missing file names neither.
pub fn read_lock(path: &Path) -> Result<Locked, CargoError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Locked::default()),
        Err(e) => {
            return Err(CargoError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            });
        }
    };
    let lock: LockFile = toml::from_str(&text).map_err(|e| CargoError::Lock {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })?;
    let mut locked = Locked::default();
    for p in lock.package {
        let Ok(v) = Version::parse(&p.version) else {
            continue;
        };
        match p.name.as_str() {
            "ort" => {
                // `"libloading"` or `"libloading 0.8.9"` when two versions are locked.
                if p.dependencies
                    .iter()
                    .any(|d| d.split(' ').next() == Some("libloading"))
                {
                    locked.ort_dynamic = true;
                }
                locked.ort.push(v)
            }
            "ort-sys" => locked.ort_sys.push(v),
            _ => {}
        }
    }
    locked.ort.sort();
    locked.ort_sys.sort();
    Ok(locked)
}

/// Why the ORT release cannot be read from Cargo.lock: the `ort` crate is built with
/// `load-dynamic`, so the program loads whatever library it finds at run time. `manifest` is
/// what the package's manifest says (its `ort` dependency's features), when it says so.
pub fn dynamic_reason(locked: &Locked, manifest: Option<&str>) -> Option<String> {
    match manifest {
        Some(why) => Some(why.to_string()),
        None if locked.ort_dynamic => Some(
            "Cargo.lock shows `ort` with `libloading`, which only its `load-dynamic` feature pulls in"
                .to_string(),
        ),
        None => None,
    }
}

/// The release chosen from a Cargo.lock, and why.
#[derive(Debug, Clone)]
pub struct Inferred {
    pub release: &'static Bundled,
    /// One sentence: what Cargo.lock says and which table that selects.
    pub reason: String,
    /// Set when the linked release has no bundled table (or is unknown) and another was taken.
    pub warning: Option<String>,
}

/// The release for a project whose Cargo.lock names `locked`; `want` is the requirement of a
/// package's own `ort` dependency (it picks among several locked versions). `None` when the lock
/// names no `ort` (nor `ort-sys`).
pub fn infer(locked: &Locked, want: Option<&VersionReq>) -> Option<Inferred> {
    let pick = |vs: &[Version]| -> Option<Version> {
        let matching = vs.iter().rev().find(|v| want.is_some_and(|r| r.matches(v)));
        matching.or_else(|| vs.last()).cloned()
    };
    let ort = pick(&locked.ort);
    let sys_locked = locked.ort_sys.last().cloned();
    if ort.is_none() && sys_locked.is_none() {
        return None;
    }
    let what = match (&ort, &sys_locked) {
        (Some(o), Some(s)) => format!("Cargo.lock has ort {o} (ort-sys {s})"),
        (Some(o), None) => format!("Cargo.lock has ort {o}"),
        (None, Some(s)) => format!("Cargo.lock has ort-sys {s}"),
        (None, None) => String::new(),
    };
    let fallback = |why: String| Inferred {
        release: tables::newest(),
        reason: format!("{what}; {why}; simulating the newest bundled release"),
        warning: Some(format!(
            "{what}, {why}: simulating the newest bundled ORT {}; pass `--ort` or set `ort = \"...\"` to choose",
            tables::newest().version
        )),
    };
    let map = match mapping() {
        Ok(m) => m,
        Err(e) => {
            return Some(fallback(format!(
                "the ort-crate mapping is unreadable ({e})"
            )));
        }
    };
    // The ort-sys that decides: the locked one, else the one this ort was released with.
    let sys = match (&sys_locked, &ort) {
        (Some(s), _) => s.to_string(),
        (None, Some(o)) => match map.ort.iter().find(|e| e.version == o.to_string()) {
            Some(e) => e.ort_sys.trim_start_matches(['=', '^']).to_string(),
            None => return Some(fallback(format!("ort {o} is not in the mapping"))),
        },
        (None, None) => return None,
    };
    let Some(entry) = map.ort_sys.iter().find(|e| e.version == sys) else {
        return Some(fallback(format!("ort-sys {sys} is not in the mapping")));
    };
    let onnxruntime = entry.onnxruntime.as_str();
    let minor: String = onnxruntime.split('.').take(2).collect::<Vec<_>>().join(".");
    let linked = format!("{what}, which links ONNX Runtime {onnxruntime} by default");
    if let Ok(release) = tables::resolve(&minor) {
        return Some(Inferred {
            release,
            reason: format!("{linked} (the {minor} kernel table is {})", release.version),
            warning: None,
        });
    }
    // No table of that minor release: take the nearest bundled one, newer on a tie.
    let target = tables::parse_version(onnxruntime).unwrap_or_default();
    let distance = |b: &Bundled| {
        let v = tables::parse_version(b.version).unwrap_or_default();
        let key =
            |v: &[u64]| v.first().copied().unwrap_or(0) * 1000 + v.get(1).copied().unwrap_or(0);
        key(&v).abs_diff(key(&target))
    };
    let release = tables::bundled()
        .iter()
        .rev()
        .min_by_key(|b| distance(b))
        .unwrap_or_else(|| tables::newest());
    Some(Inferred {
        release,
        reason: format!(
            "{linked}; no {minor} kernel table is bundled, so the nearest, {}",
            release.version
        ),
        warning: Some(format!(
            "{linked}, which has no bundled kernel table: simulating ORT {} instead; pass `--ort` to choose",
            release.version
        )),
    })
}
