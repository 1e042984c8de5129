//! Finding the ONNX Runtime shared library to verify against.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the library came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--ort-dylib PATH`.
    Flag,
    /// `ORT_DYLIB_PATH`.
    Env,
    /// A pip-installed package found through the active Python (`python3`, or `ONNX_LINT_PYTHON`).
    Python {
        /// `onnxruntime-gpu`, `onnxruntime`, ... with its version, when Python's metadata says.
        package: Option<String>,
    },
}

/// A located library.
#[derive(Debug, Clone)]
pub struct Located {
    pub path: PathBuf,
    pub source: Source,
    /// The CUDA provider library sits next to it (`libonnxruntime_providers_cuda.so`): the build
    /// can register the CUDA EP.
    pub has_cuda_provider: bool,
}

impl Located {
    pub fn describe(&self) -> String {
        let from = match &self.source {
            Source::Flag => "--ort-dylib".to_string(),
            Source::Env => "ORT_DYLIB_PATH".to_string(),
            Source::Python { package: Some(p) } => format!("pip package {p}"),
            Source::Python { package: None } => "pip package onnxruntime".to_string(),
        };
        format!("{} (from {from})", self.path.display())
    }
}

fn cuda_provider_next_to(lib: &Path) -> bool {
    let Some(dir) = lib.parent() else {
        return false;
    };
    [
        "libonnxruntime_providers_cuda.so",
        "onnxruntime_providers_cuda.dll",
    ]
    .iter()
    .any(|f| dir.join(f).is_file())
}

/// The library file in a wheel's `capi` folder: `libonnxruntime.so.<version>` (the highest when
/// several), `libonnxruntime.so`, `libonnxruntime.<v>.dylib` or `onnxruntime.dll`.
pub fn library_in(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut found: Vec<(Vec<u64>, PathBuf)> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let rank = if let Some(v) = name.strip_prefix("libonnxruntime.so.") {
            v.split('.').map(|c| c.parse().unwrap_or(0)).collect()
        } else if name == "libonnxruntime.so" || name == "onnxruntime.dll" {
            vec![0]
        } else if let Some(v) = name
            .strip_prefix("libonnxruntime.")
            .and_then(|r| r.strip_suffix(".dylib"))
        {
            v.split('.').map(|c| c.parse().unwrap_or(0)).collect()
        } else {
            continue;
        };
        found.push((rank, e.path()));
    }
    found.sort();
    found.pop().map(|(_, p)| p)
}

const FIND_ORT: &str = r#"
import importlib.util, importlib.metadata, os
s = importlib.util.find_spec("onnxruntime")
print(os.path.join(list(s.submodule_search_locations)[0], "capi") if s and s.submodule_search_locations else "")
for d in ("onnxruntime-gpu", "onnxruntime", "ort-nightly-gpu", "ort-nightly"):
    try:
        print(d + " " + importlib.metadata.version(d)); break
    except Exception:
        pass
"#;

/// The `capi` folder of the `onnxruntime` package the active Python would import (without
/// importing it), and the distribution that provides it.
pub fn python_onnxruntime() -> Result<(PathBuf, Option<String>), String> {
    let python = std::env::var("ONNX_LINT_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(&python)
        .args(["-c", FIND_ORT])
        .output()
        .map_err(|e| format!("could not run `{python}`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let dir = lines.next().unwrap_or("").trim();
    if !out.status.success() || dir.is_empty() {
        return Err(format!(
            "`{python}` has no `onnxruntime` package (pip install onnxruntime-gpu, or onnxruntime)"
        ));
    }
    let package = lines.next().map(|l| l.trim().to_string());
    Ok((PathBuf::from(dir), package))
}

/// `--ort-dylib`, else `ORT_DYLIB_PATH`, else the active Python's `onnxruntime` package.
pub fn locate(flag: Option<&Path>) -> Result<Located, String> {
    let direct = |path: PathBuf, source: Source| -> Result<Located, String> {
        let path = if path.is_dir() {
            library_in(&path).ok_or_else(|| {
                format!(
                    "no ONNX Runtime library (libonnxruntime.so*) in {}",
                    path.display()
                )
            })?
        } else {
            path
        };
        if !path.exists() {
            return Err(format!("{} does not exist", path.display()));
        }
        Ok(Located {
            has_cuda_provider: cuda_provider_next_to(&path),
            path,
            source,
        })
    };
    if let Some(p) = flag {
        return direct(p.to_path_buf(), Source::Flag);
    }
    if let Ok(p) = std::env::var("ORT_DYLIB_PATH")
        && !p.is_empty()
    {
        return direct(PathBuf::from(p), Source::Env);
    }
    let (capi, package) = python_onnxruntime()?;
    let path =
        library_in(&capi).ok_or_else(|| format!("no libonnxruntime.so* in {}", capi.display()))?;
    Ok(Located {
        has_cuda_provider: cuda_provider_next_to(&path),
        path,
        source: Source::Python { package },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_versioned_library() {
        let dir = tempfile::tempdir().expect("tempdir");
        for f in [
            "libonnxruntime.so.1.30.0",
            "libonnxruntime.so.1.31.1",
            "libonnxruntime_providers_shared.so",
            "onnxruntime_pybind11_state.so",
        ] {
            std::fs::write(dir.path().join(f), b"").expect("write");
        }
        let lib = library_in(dir.path()).expect("found");
        assert!(lib.ends_with("libonnxruntime.so.1.31.1"));
        assert!(!cuda_provider_next_to(&lib));
        std::fs::write(dir.path().join("libonnxruntime_providers_cuda.so"), b"").expect("write");
        assert!(cuda_provider_next_to(&lib));
        let located = locate(Some(dir.path())).expect("located");
        assert_eq!(located.source, Source::Flag);
        assert!(located.has_cuda_provider);
    }

    #[test]
    fn a_missing_path_is_an_error() {
        assert!(locate(Some(Path::new("/nonexistent/libonnxruntime.so"))).is_err());
    }
}
