//! Writing a fixed model without ever leaving a half-written file: the bytes go to a temporary
//! file beside the target (same folder, so same file system), are flushed and fsync'ed, take the
//! target's permissions, and only then is the temporary renamed over the target (atomic on
//! POSIX). On any failure the temporary is removed and the target is untouched.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use miette::Diagnostic;
use thiserror::Error;

/// Why a fixed model could not be written. The target is unchanged in every case.
#[derive(Debug, Error, Diagnostic)]
pub enum WriteError {
    #[error("cannot write the fixed model to {path}: {source}")]
    #[diagnostic(
        code(onnx_lint::fix::write),
        help("the original file is unchanged; check the folder's permissions and free space")
    )]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Where the bytes go: a real file, or (in tests) a writer that fails on purpose.
pub trait Sink {
    /// Writes all of `bytes` to `file`.
    fn write_all(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()>;
}

/// Writes to the file.
#[derive(Debug, Default)]
pub struct FileSink;

impl Sink for FileSink {
    fn write_all(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }
}

/// Atomically replaces (or creates) `target` with `bytes`, keeping the permissions of the file
/// it replaces (of `like` when given: the original model, for `-o`).
pub fn write_atomic(target: &Path, bytes: &[u8], like: Option<&Path>) -> Result<(), WriteError> {
    write_atomic_with(target, bytes, like, &mut FileSink)
}

/// [`write_atomic`] through `sink` (tests inject a failing one).
pub fn write_atomic_with(
    target: &Path,
    bytes: &[u8],
    like: Option<&Path>,
    sink: &mut dyn Sink,
) -> Result<(), WriteError> {
    let err = |source| WriteError::Io {
        path: target.to_path_buf(),
        source,
    };
    // A symbolic link is kept: the file it points to is replaced (beside itself).
    let resolved;
    let target = match fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_symlink() => {
            resolved = fs::canonicalize(target).map_err(err)?;
            resolved.as_path()
        }
        _ => target,
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model.onnx".into());
    let original = fs::metadata(target)
        .or_else(|e| match like {
            Some(l) => fs::metadata(l),
            None => Err(e),
        })
        .ok();
    let (tmp, mut file) = create_temp(&dir, &name).map_err(err)?;
    let result = (|| {
        sink.write_all(&mut file, bytes)?;
        file.flush()?;
        file.sync_all()?;
        if let Some(m) = &original {
            fs::set_permissions(&tmp, m.permissions())?;
            keep_owner(&tmp, m);
        }
        drop(file);
        fs::rename(&tmp, target)?;
        // The rename is durable once the folder is synced (best effort: not every platform
        // lets a folder be opened).
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

/// Gives the new file the original's owner and group where the platform allows it (best effort:
/// only a privileged process may give a file away).
#[cfg(unix)]
fn keep_owner(path: &Path, original: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let _ = std::os::unix::fs::chown(path, Some(original.uid()), Some(original.gid()));
}

#[cfg(not(unix))]
fn keep_owner(_: &Path, _: &fs::Metadata) {}

/// A new file `.<name>.onnx-lint-<pid>-<k>.tmp` in `dir`, created exclusively.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut last = None;
    for k in 0..100u32 {
        let path = dir.join(format!(".{name}.onnx-lint-{pid}-{k}.tmp"));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing;
    impl Sink for Failing {
        fn write_all(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
            file.write_all(&bytes[..bytes.len() / 2])?;
            Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device",
            ))
        }
    }

    fn temp_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "onnx-lint-write-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).ok();
        d
    }

    #[test]
    fn failing_writer_leaves_target_and_no_temporary() {
        let d = temp_dir();
        let target = d.join("m.onnx");
        fs::write(&target, b"original").ok();
        let r = write_atomic_with(&target, b"new bytes here", None, &mut Failing);
        assert!(r.is_err());
        assert_eq!(fs::read(&target).ok().as_deref(), Some(&b"original"[..]));
        let left: Vec<_> = fs::read_dir(&d)
            .map(|r| r.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(left.len(), 1, "{left:?}");
        let _ = fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_stays_a_link_to_the_fixed_file() {
        let d = temp_dir();
        let real = d.join("real.onnx");
        let link = d.join("link.onnx");
        fs::write(&real, b"original").ok();
        std::os::unix::fs::symlink(&real, &link).ok();
        assert!(write_atomic(&link, b"fixed", None).is_ok());
        assert!(
            fs::symlink_metadata(&link)
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
        );
        assert_eq!(fs::read(&real).ok().as_deref(), Some(&b"fixed"[..]));
        let _ = fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn replaces_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let d = temp_dir();
        let target = d.join("m.onnx");
        fs::write(&target, b"original").ok();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).ok();
        write_atomic(&target, b"fixed", None).ok();
        assert_eq!(fs::read(&target).ok().as_deref(), Some(&b"fixed"[..]));
        let mode = fs::metadata(&target).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o640));
        let _ = fs::remove_dir_all(&d);
    }
}
