//! External data references: recorded and validated, never read.
//!
//! A location must be a relative path that stays inside the model's folder, lexically and after
//! symlinks are resolved. Files are only stat'ed (for their size), never opened.

use std::path::{Component, Path, PathBuf};

use super::load::LoadError;
use super::proto::{GraphProto, ModelProto, TensorProto, tensor_proto::DataLocation};
use super::tensor::tensor_byte_size;
use super::{Problem, ProblemLevel};

/// A tensor whose data lives in an external file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalRef {
    /// The tensor's name.
    pub tensor: String,
    /// The `location` key, as written in the model.
    pub location: String,
    pub offset: u64,
    /// Bytes of data: the `length` key, else the tensor's dense size.
    pub length: Option<u64>,
    /// Size of the file on disk, when it exists.
    pub file_size: Option<u64>,
}

/// Walks every tensor of the model (initializers and tensor attributes of every graph) and
/// validates the external ones.
pub(super) fn collect(
    model_path: &Path,
    proto: &ModelProto,
    problems: &mut Vec<Problem>,
) -> Result<Vec<ExternalRef>, LoadError> {
    let mut tensors = Vec::new();
    if let Some(g) = &proto.graph {
        gather(g, &mut tensors);
    }
    let dir = model_path.parent().unwrap_or(Path::new(""));
    let mut refs = Vec::new();
    for t in tensors {
        if t.data_location() != DataLocation::External {
            continue;
        }
        refs.push(check(model_path, dir, t, problems)?);
    }
    Ok(refs)
}

/// Whether loading accepts tensor `t` of the model at `model_path` as far as external data goes
/// (what [`collect`] refuses; its notes are not refusals).
pub(crate) fn external_data_loads(model_path: &Path, t: &TensorProto) -> bool {
    if t.data_location() != DataLocation::External {
        return true;
    }
    let dir = model_path.parent().unwrap_or(Path::new(""));
    check(model_path, dir, t, &mut Vec::new()).is_ok()
}

fn gather<'a>(g: &'a GraphProto, out: &mut Vec<&'a TensorProto>) {
    out.extend(g.initializer.iter());
    out.extend(
        g.sparse_initializer
            .iter()
            .filter_map(|s| s.values.as_ref()),
    );
    for node in &g.node {
        for attr in &node.attribute {
            out.extend(attr.t.as_deref());
            out.extend(attr.tensors.iter());
            if let Some(sub) = &attr.g {
                gather(sub, out);
            }
            for sub in &attr.graphs {
                gather(sub, out);
            }
        }
    }
}

fn check(
    model_path: &Path,
    dir: &Path,
    t: &TensorProto,
    problems: &mut Vec<Problem>,
) -> Result<ExternalRef, LoadError> {
    let invalid = |message: String| LoadError::Invalid {
        path: model_path.to_path_buf(),
        message,
        help: Some(
            "external_data entries are `location`, `offset`, `length` and `checksum`".into(),
        ),
    };
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for entry in &t.external_data {
        let value = entry.value();
        match entry.key() {
            "location" => location = Some(value.to_string()),
            "offset" => {
                offset = value.trim().parse().map_err(|_| {
                    invalid(format!(
                        "tensor `{}` has external data offset `{value}`",
                        t.name()
                    ))
                })?
            }
            "length" => {
                length = Some(value.trim().parse().map_err(|_| {
                    invalid(format!(
                        "tensor `{}` has external data length `{value}`",
                        t.name()
                    ))
                })?)
            }
            _ => {}
        }
    }
    let Some(location) = location.filter(|l| !l.is_empty()) else {
        return Err(invalid(format!(
            "tensor `{}` is marked external but names no location",
            t.name()
        )));
    };
    let escape = || LoadError::ExternalDataEscape {
        path: model_path.to_path_buf(),
        tensor: t.name().to_string(),
        location: location.clone(),
    };
    let relative = lexically_inside(&location).ok_or_else(escape)?;
    let length = length.or_else(|| tensor_byte_size(&t.dims, t.data_type()));
    let Some(end) = length.map(|l| offset.checked_add(l)) else {
        return Ok(ExternalRef {
            tensor: t.name().to_string(),
            location,
            offset,
            length,
            file_size: None,
        });
    };
    let Some(end) = end else {
        return Err(invalid(format!(
            "tensor `{}` has external data offset {offset} plus length that overflows",
            t.name()
        )));
    };
    let full = dir.join(&relative);
    let mut file_size = None;
    match std::fs::symlink_metadata(&full) {
        Ok(_) => {
            // A symlink (anywhere on the path) may still lead out of the folder: compare the
            // resolved paths. Only metadata is read.
            let (Ok(real), Ok(real_dir)) = (full.canonicalize(), canonical_dir(dir)) else {
                return Err(escape());
            };
            if !real.starts_with(&real_dir) {
                return Err(escape());
            }
            let meta = std::fs::metadata(&real).map_err(|source| LoadError::Io {
                path: real.clone(),
                source,
            })?;
            file_size = Some(meta.len());
            if end > meta.len() {
                problems.push(Problem {
                    level: ProblemLevel::Error,
                    code: "model::external-data-short",
                    message: format!(
                        "tensor `{}` needs bytes {offset}..{end} of `{location}`, which has {} bytes",
                        t.name(),
                        meta.len()
                    ),
                    node: None,
                });
            }
        }
        Err(_) => problems.push(Problem {
            level: ProblemLevel::Warning,
            code: "model::external-data-missing",
            message: format!(
                "external data file `{location}` of tensor `{}` does not exist (it is never read; ORT will need it)",
                t.name()
            ),
            node: None,
        }),
    }
    Ok(ExternalRef {
        tensor: t.name().to_string(),
        location,
        offset,
        length,
        file_size,
    })
}

fn canonical_dir(dir: &Path) -> std::io::Result<PathBuf> {
    if dir.as_os_str().is_empty() {
        std::env::current_dir()?.canonicalize()
    } else {
        dir.canonicalize()
    }
}

/// The location as a relative path that stays inside the folder, or `None` when it is absolute,
/// names a drive or climbs above the folder with `..`.
fn lexically_inside(location: &str) -> Option<PathBuf> {
    // Windows spellings are refused on every platform: a model is shared across machines.
    if location.starts_with('\\') || location.as_bytes().get(1) == Some(&b':') {
        return None;
    }
    let location = location.replace('\\', "/");
    let mut depth = 0usize;
    let mut out = PathBuf::new();
    for c in Path::new(&location).components() {
        match c {
            Component::Normal(part) => {
                depth += 1;
                out.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth.checked_sub(1)?;
                out.pop();
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (depth > 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::lexically_inside;

    #[test]
    fn locations() {
        assert!(lexically_inside("weights.bin").is_some());
        assert!(lexically_inside("./data/w.bin").is_some());
        assert!(lexically_inside("data/../w.bin").is_some());
        assert!(lexically_inside("../w.bin").is_none());
        assert!(lexically_inside("data/../../w.bin").is_none());
        assert!(lexically_inside("/etc/passwd").is_none());
        assert!(lexically_inside("C:\\w.bin").is_none());
        assert!(lexically_inside("..\\w.bin").is_none());
        assert!(lexically_inside(".").is_none());
    }
}
