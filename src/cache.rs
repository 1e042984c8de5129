//! The dev-loop cache: an unchanged model under an unchanged configuration is not analysed again.
//!
//! An entry is keyed by the SHA-256 of
//! - the model file's bytes (all of them: a one-byte change is a new key);
//! - a *context* string from the caller that names everything else the answer depends on: the
//!   model's path as printed, the ORT release and the SHA-256 of its embedded kernel table, the
//!   providers, the optimisation level, the rule severities, the output format and style, and the
//!   reason printed for the release;
//! - this binary: its version and the size and modification time of the executable, so a rebuilt
//!   linter never reads what an older build wrote.
//!
//! External data files are never read by the analysis, only stat'ed (do they exist, how long are
//! they, where does a symlink lead). An entry therefore records, for every external-data location
//! of the model, exactly those facts, and a lookup re-checks them: a file that appeared, vanished,
//! grew, shrank or now links elsewhere makes the entry a miss. Their contents are not keyed on,
//! because no answer depends on them.
//!
//! Entries live in `<target-dir>/onnx-lint/cache-v2/<key>.json`, written to a temporary file and
//! renamed into place, so concurrent runs (pre-commit runs hooks in parallel, or two processes
//! share one target directory) never see half an entry. An entry's first line is the SHA-256 of
//! its key and of the bytes after that line; an entry whose checksum does not match (truncated,
//! corrupt, or edited by hand) is a miss, never an answer. Only regular files are read, and at
//! most [`MAX_ENTRY`] bytes: a FIFO or device put in place of an entry is a miss too. A cache
//! that cannot be written (a read-only target directory) only costs the next run its analysis.
//! Nothing here prints.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The folder name under the target directory.
pub const DIR_NAME: &str = "onnx-lint";
const ENTRIES: &str = "cache-v2";

/// The largest entry read back (reports are kilobytes; anything this large is not ours).
pub const MAX_ENTRY: u64 = 64 << 20;

/// A cache rooted in a folder (created on first write).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    binary: String,
}

/// A cache key: 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the analysis learned about one external-data file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    pub path: PathBuf,
    /// `None`: it does not exist (not even as a dangling symlink).
    pub len: Option<u64>,
    /// Where it resolves to, when it resolves.
    pub real: Option<PathBuf>,
}

impl FileFacts {
    /// Stats `path` the way the model loader does.
    pub fn of(path: &Path) -> FileFacts {
        let exists = fs::symlink_metadata(path).is_ok();
        let real = if exists {
            path.canonicalize().ok()
        } else {
            None
        };
        let len = if exists {
            fs::metadata(path).ok().map(|m| m.len())
        } else {
            None
        };
        FileFacts {
            path: path.to_path_buf(),
            len,
            real,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "path": self.path.to_string_lossy(),
            "len": self.len,
            "real": self.real.as_ref().map(|p| p.to_string_lossy().into_owned()),
        })
    }

    fn from_json(v: &Value) -> Option<FileFacts> {
        Some(FileFacts {
            path: PathBuf::from(v.get("path")?.as_str()?),
            len: v.get("len")?.as_u64(),
            real: v.get("real")?.as_str().map(PathBuf::from),
        })
    }
}

/// The checksum line of an entry: SHA-256 over the key and the entry's body.
fn checksum(key: &Key, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"onnx-lint cache entry\0");
    h.update(key.0.as_bytes());
    h.update(b"\0");
    h.update(body);
    hex(&h.finalize())
}

/// SHA-256 of `bytes`, as hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// This executable's identity: the crate version plus the size and modification time of the
/// file, so that every rebuild invalidates what earlier builds wrote.
fn binary_identity() -> String {
    let exe = std::env::current_exe().ok();
    let meta = exe.as_deref().and_then(|p| fs::metadata(p).ok());
    let (len, mtime) = match meta {
        Some(m) => (
            m.len(),
            m.modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        ),
        None => (0, 0),
    };
    format!(
        "cargo-onnx-lint {} exe {len} {mtime}",
        env!("CARGO_PKG_VERSION")
    )
}

impl Cache {
    /// A cache in `dir` (for a Cargo workspace: `<target-dir>/onnx-lint`).
    pub fn new(dir: PathBuf) -> Cache {
        Cache {
            dir,
            binary: binary_identity(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of `model` (its bytes are read and hashed) under `context`.
    pub fn key(&self, model: &Path, context: &str) -> io::Result<Key> {
        let mut h = Sha256::new();
        h.update(b"onnx-lint cache v1\0");
        h.update(self.binary.as_bytes());
        h.update(b"\0");
        h.update(context.as_bytes());
        h.update(b"\0");
        let (mut f, _) = crate::model::open_regular(model).map_err(io::Error::other)?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(Key(hex(&h.finalize())))
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(ENTRIES).join(format!("{}.json", key.0))
    }

    /// The stored value, when there is one and every external file it depended on is as it was.
    pub fn get(&self, key: &Key) -> Option<Value> {
        let (f, meta) = crate::model::open_regular(&self.path(key)).ok()?;
        if meta.len() > MAX_ENTRY {
            return None;
        }
        let mut text = Vec::new();
        f.take(MAX_ENTRY).read_to_end(&mut text).ok()?;
        let newline = text.iter().position(|&b| b == b'\n')?;
        let (sum, body) = (&text[..newline], &text[newline + 1..]);
        if sum != checksum(key, body).as_bytes() {
            return None;
        }
        let entry: Value = serde_json::from_slice(body).ok()?;
        if entry.get("key")?.as_str()? != key.0 {
            return None;
        }
        for d in entry.get("files")?.as_array()? {
            let then = FileFacts::from_json(d)?;
            if FileFacts::of(&then.path) != then {
                return None;
            }
        }
        entry.get("value").cloned()
    }

    /// Stores `value` under `key`, with the facts about the external files it depended on.
    /// Failing to write is not an error: the next run analyses again.
    pub fn put<V: serde::Serialize + ?Sized>(
        &self,
        key: &Key,
        files: &[FileFacts],
        value: &V,
    ) -> io::Result<()> {
        let dir = self.dir.join(ENTRIES);
        fs::create_dir_all(&dir)?;
        let tag = self.dir.join("CACHEDIR.TAG");
        if !tag.exists() {
            let _ = fs::write(
                &tag,
                "Signature: 8a477f597d28d172789f06886806bc55\n# cargo-onnx-lint's cache; safe to delete.\n",
            );
        }
        // Serialised from the value in place (its keys in the order `json!` would give them):
        // a report of tens of thousands of findings is not copied for the cache.
        #[derive(serde::Serialize)]
        struct Entry<'a, V: serde::Serialize + ?Sized> {
            files: Vec<Value>,
            key: &'a str,
            value: &'a V,
        }
        let entry = Entry {
            files: files.iter().map(FileFacts::to_json).collect(),
            key: &key.0,
            value,
        };
        let body = serde_json::to_vec(&entry).map_err(io::Error::other)?;
        let head = format!("{}\n", checksum(key, &body));
        let nanos = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = dir.join(format!(".{}.{}.{nanos}.tmp", key.0, std::process::id()));
        let written = fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(head.as_bytes())
                .and_then(|()| f.write_all(&body))
        });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, self.path(key)).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_changed_byte_or_context_is_a_new_key_and_files_are_rechecked() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().join("c"));
        let model = dir.path().join("m.onnx");
        fs::write(&model, b"abc").unwrap();
        let k1 = cache.key(&model, "ctx").unwrap();
        assert_eq!(k1, cache.key(&model, "ctx").unwrap());
        assert_ne!(k1, cache.key(&model, "ctx2").unwrap());
        fs::write(&model, b"abd").unwrap();
        let k2 = cache.key(&model, "ctx").unwrap();
        assert_ne!(k1, k2);

        let ext = dir.path().join("w.bin");
        fs::write(&ext, b"1234").unwrap();
        assert_eq!(cache.get(&k2), None);
        cache
            .put(&k2, &[FileFacts::of(&ext)], &json!({"x": 1}))
            .unwrap();
        assert_eq!(cache.get(&k2), Some(json!({"x": 1})));
        fs::write(&ext, b"12345").unwrap();
        assert_eq!(cache.get(&k2), None, "external file grew");
        fs::remove_file(&ext).unwrap();
        cache
            .put(&k2, &[FileFacts::of(&ext)], &json!({"x": 2}))
            .unwrap();
        assert_eq!(cache.get(&k2), Some(json!({"x": 2})));
        fs::write(&ext, b"").unwrap();
        assert_eq!(cache.get(&k2), None, "external file appeared");
        fs::write(cache.path(&k2), b"{not json").unwrap();
        assert_eq!(cache.get(&k2), None, "corrupt entry");
    }

    /// issue 15: a well-formed entry edited by hand was served as the answer.
    #[test]
    fn a_tampered_truncated_or_special_entry_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().join("c"));
        let model = dir.path().join("m.onnx");
        fs::write(&model, b"abc").unwrap();
        let k = cache.key(&model, "ctx").unwrap();
        cache
            .put(&k, &[], &json!({"exit": 1, "text": "1 error"}))
            .unwrap();
        assert_eq!(cache.get(&k), Some(json!({"exit": 1, "text": "1 error"})));
        let stored = fs::read_to_string(cache.path(&k)).unwrap();
        // Still well-formed JSON after the edit, with a fabricated answer.
        let edited = stored.replace("\"exit\":1", "\"exit\":0");
        assert_ne!(edited, stored);
        fs::write(cache.path(&k), &edited).unwrap();
        assert_eq!(cache.get(&k), None, "edited by hand");
        fs::write(cache.path(&k), &stored[..stored.len() - 3]).unwrap();
        assert_eq!(cache.get(&k), None, "truncated");
        fs::write(cache.path(&k), &stored).unwrap();
        assert!(cache.get(&k).is_some(), "restored");
        // Another key's valid entry copied over this one.
        let k2 = cache.key(&model, "other").unwrap();
        cache.put(&k2, &[], &json!({"exit": 0})).unwrap();
        fs::copy(cache.path(&k2), cache.path(&k)).unwrap();
        assert_eq!(cache.get(&k), None, "another key's entry");
        #[cfg(unix)]
        {
            // A FIFO in place of an entry: a miss, at once (never blocks).
            fs::remove_file(cache.path(&k)).unwrap();
            let c = std::ffi::CString::new(cache.path(&k).to_str().unwrap()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            assert_eq!(cache.get(&k), None, "a FIFO");
        }
    }
}
