//! Bytes → [`ModelProto`]: memory-maps the file, decodes it with prost (raw tensor data stays a
//! slice of the map), and turns every way a file can fail to be an ONNX model into a [`LoadError`].

use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use miette::Diagnostic;
use prost::Message;
use thiserror::Error;

use super::proto::ModelProto;

/// Files larger than this are refused before they are mapped: protobuf cannot describe a model
/// larger than 2 GiB, so anything past that is not an ONNX model file.
pub const MAX_MODEL_FILE: u64 = 2 << 30;

/// `.onnxtxt` files larger than this are refused before they are read: the text syntax is for
/// fixtures and hand-written reproducers, and the text is held in memory (and by a syntax
/// error's report) while it is parsed.
pub const MAX_TEXT_FILE: u64 = 256 << 20;

/// Opens `path` for reading only if it is a regular file (after symlinks): never a FIFO (opening
/// one blocks until a writer comes), a socket, a device (`/dev/zero` reports 0 bytes and never
/// ends) or a folder. The file is opened non-blocking and checked again by its handle, so a path
/// swapped for a FIFO between the two checks cannot block either.
pub fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let not_regular = |m: &std::fs::Metadata| LoadError::NotRegularFile {
        path: path.to_path_buf(),
        kind: if m.is_dir() {
            "a directory"
        } else {
            special_kind(m)
        },
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok((file, meta))
}

#[cfg(unix)]
fn special_kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::Metadata) -> &'static str {
    "a special file"
}

/// Why a file could not be read as an ONNX model. Each variant has a stable diagnostic code.
#[derive(Debug, Error, Diagnostic)]
pub enum LoadError {
    #[error("cannot read {path}")]
    #[diagnostic(
        code(onnx_lint::load::io),
        help("check that the path exists and is readable")
    )]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{path} is {kind}, not a regular file")]
    #[diagnostic(
        code(onnx_lint::load::not_regular_file),
        help("only regular files are read as models (a FIFO would block, a device never ends)")
    )]
    NotRegularFile { path: PathBuf, kind: &'static str },

    #[error("{path} is empty")]
    #[diagnostic(code(onnx_lint::load::empty))]
    Empty { path: PathBuf },

    #[error("{path} is {size} bytes, larger than any protobuf-encoded ONNX model can be (2 GiB)")]
    #[diagnostic(
        code(onnx_lint::load::too_large),
        help(
            "models over 2 GiB keep their weights in external data files; point the linter at the .onnx file"
        )
    )]
    TooLarge { path: PathBuf, size: u64 },

    #[error("{path} ends in the middle of a protobuf message: the file is truncated ({detail})")]
    #[diagnostic(
        code(onnx_lint::load::truncated),
        help("the file was probably cut short while copying or downloading; fetch it again")
    )]
    Truncated { path: PathBuf, detail: String },

    #[error("{path} is not a protobuf-encoded ONNX model ({detail})")]
    #[diagnostic(
        code(onnx_lint::load::not_protobuf),
        help("the linter reads binary .onnx files: a serialized onnx.ModelProto")
    )]
    NotProtobuf { path: PathBuf, detail: String },

    #[error("{path} is a protobuf message, but not an ONNX model: {detail}")]
    #[diagnostic(
        code(onnx_lint::load::not_a_model),
        help(
            "an ONNX model has an ir_version, opset imports and a graph; is this a tensor or another message?"
        )
    )]
    NotAModel { path: PathBuf, detail: String },

    #[error("{path}: {message}")]
    #[diagnostic(code(onnx_lint::load::invalid_model))]
    Invalid {
        path: PathBuf,
        message: String,
        #[help]
        help: Option<String>,
    },

    #[error(
        "{path} is {size} bytes, larger than the {} MiB the linter reads as ONNX text",
        MAX_TEXT_FILE >> 20
    )]
    #[diagnostic(
        code(onnx_lint::load::text_too_large),
        help("the text syntax is for small models; save large ones as binary .onnx")
    )]
    TextTooLarge { path: PathBuf, size: u64 },

    #[error("{path} is too large to analyse: {detail}")]
    #[diagnostic(
        code(onnx_lint::load::too_large_to_analyse),
        help(
            "the linter bounds the work one model may take; this model is past those bounds \
             (see the README's robustness section)"
        )
    )]
    TooLargeToAnalyse { path: PathBuf, detail: String },

    #[error("{path} is not valid ONNX text syntax: {message}")]
    #[diagnostic(code(onnx_lint::load::text_syntax))]
    Text {
        path: PathBuf,
        message: String,
        #[source_code]
        src: std::sync::Arc<miette::NamedSource<String>>,
        #[label("here")]
        span: miette::SourceSpan,
    },

    #[error(
        "{path}: external data of tensor `{tensor}` points outside the model's folder: `{location}`"
    )]
    #[diagnostic(
        code(onnx_lint::load::external_data_escape),
        help(
            "external data locations must be relative paths inside the model's folder; \
             the linter never follows absolute paths or `..` out of it"
        )
    )]
    ExternalDataEscape {
        path: PathBuf,
        tensor: String,
        location: String,
    },
}

impl LoadError {
    /// The model file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Io { path, .. }
            | LoadError::Empty { path }
            | LoadError::NotRegularFile { path, .. }
            | LoadError::TooLarge { path, .. }
            | LoadError::TextTooLarge { path, .. }
            | LoadError::TooLargeToAnalyse { path, .. }
            | LoadError::Truncated { path, .. }
            | LoadError::NotProtobuf { path, .. }
            | LoadError::NotAModel { path, .. }
            | LoadError::Invalid { path, .. }
            | LoadError::Text { path, .. }
            | LoadError::ExternalDataEscape { path, .. } => path,
        }
    }
}

/// Maps `path` into memory (weights are never copied: `raw_data` fields become slices of the map)
/// and decodes it.
pub fn read_model_proto(path: &Path) -> Result<(ModelProto, u64), LoadError> {
    let (bytes, size) = map_model_file(path)?;
    let proto = decode_model(path, bytes)?;
    Ok((proto, size))
}

/// Maps the model file at `path` into memory (read-only), refusing what cannot be a model file
/// (not a regular file, empty, past 2 GiB). Returns the bytes and the file's size.
pub fn map_model_file(path: &Path) -> Result<(Bytes, u64), LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (file, meta) = open_regular(path)?;
    let size = meta.len();
    if size == 0 {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    if size > MAX_MODEL_FILE {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            size,
        });
    }
    // SAFETY: the map is read-only and private to this process. A file truncated by another
    // process while we read it would fault; that is the usual contract of every mmap-based reader
    // (ripgrep included) and the files are the user's own models.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok((Bytes::from_owner(map), size))
}

/// Drops this process's mapping of the pages of `bytes`, a map made by [`map_model_file`], once
/// what was read from them has been copied out (the session builder keeps names as ids, and
/// tensors only by their slices): the pages stay in the kernel's page cache, and a later read
/// of a weight through a slice faults its page back in, unchanged. A model's file no longer
/// counts in the peak resident memory of the simulation that follows (35 MiB of 210 on the
/// 100k-node bench decoder). Anything else (bytes not from a map, or an `madvise` the kernel
/// refuses) is left as it is.
pub fn release_mapped_pages(bytes: &Bytes) {
    #[cfg(unix)]
    {
        let ptr = bytes.as_ptr();
        // A map starts on a page boundary; anything else was not made by `map_model_file`.
        if bytes.is_empty() || ptr.align_offset(4096) != 0 {
            return;
        }
        // SAFETY: `ptr..ptr + len` is a read-only, file-backed mapping this process owns
        // (`memmap2::Mmap::map`, kept alive by `bytes`). `MADV_DONTNEED` on such a mapping
        // only unmaps its pages from the process; every later read sees the same file
        // contents (they were never written). No reference into it is invalidated.
        unsafe {
            libc::madvise(ptr.cast_mut().cast(), bytes.len(), libc::MADV_DONTNEED);
        }
    }
}

/// Decodes an in-memory model (tests, text fixtures already encoded, stdin). What decoding
/// would cost is checked first ([`super::census`]).
pub fn decode_model(path: &Path, bytes: Bytes) -> Result<ModelProto, LoadError> {
    let budget = super::census::Budget::for_file(bytes.len() as u64);
    let c = super::census::census_within(&bytes, budget);
    let too_large = |detail: String| LoadError::TooLargeToAnalyse {
        path: path.to_path_buf(),
        detail,
    };
    if c.nodes > budget.nodes {
        return Err(too_large(format!(
            "it has more than {} nodes, the most the linter analyses in a file of its size",
            budget.nodes
        )));
    }
    if c.decoded_bytes > budget.decoded_bytes {
        return Err(too_large(format!(
            "decoding it would take more than the {} MiB of memory the linter allows for a file \
             of its size",
            budget.decoded_bytes >> 20
        )));
    }
    let proto =
        ModelProto::decode(bytes.clone()).map_err(|e| classify_decode_error(path, &bytes, &e))?;
    check_is_model(path, &proto)?;
    Ok(proto)
}

fn classify_decode_error(path: &Path, bytes: &[u8], e: &prost::DecodeError) -> LoadError {
    let detail = e.to_string();
    match wire::walk(bytes) {
        // Well-formed protobuf from end to end, yet not a ModelProto: another message.
        wire::Walk::Complete => LoadError::NotAModel {
            path: path.to_path_buf(),
            detail: format!("its fields do not match ModelProto ({detail})"),
        },
        // It starts like a model and runs out of bytes mid-message: cut short.
        wire::Walk::Underflow if wire::starts_like_model(bytes) => LoadError::Truncated {
            path: path.to_path_buf(),
            detail,
        },
        _ => LoadError::NotProtobuf {
            path: path.to_path_buf(),
            detail,
        },
    }
}

/// A schema-less walk over protobuf wire format, used only to explain why decoding failed.
mod wire {
    pub enum Walk {
        Complete,
        Underflow,
        Invalid,
    }

    use crate::model::varint;

    /// Walks fields (nested messages are not entered) until the end of `b`.
    pub fn walk(b: &[u8]) -> Walk {
        let mut pos = 0usize;
        while pos < b.len() {
            let Some(tag) = varint(b, &mut pos) else {
                return if pos >= b.len() {
                    Walk::Underflow
                } else {
                    Walk::Invalid
                };
            };
            if tag >> 3 == 0 {
                return Walk::Invalid;
            }
            let skip = match tag & 7 {
                0 => match varint(b, &mut pos) {
                    Some(_) => 0,
                    None if pos >= b.len() => return Walk::Underflow,
                    None => return Walk::Invalid,
                },
                1 => 8,
                2 => match varint(b, &mut pos) {
                    Some(n) => match usize::try_from(n) {
                        Ok(n) => n,
                        Err(_) => return Walk::Invalid,
                    },
                    None if pos >= b.len() => return Walk::Underflow,
                    None => return Walk::Invalid,
                },
                5 => 4,
                _ => return Walk::Invalid,
            };
            match pos.checked_add(skip) {
                Some(end) if end <= b.len() => pos = end,
                _ => return Walk::Underflow,
            }
        }
        Walk::Complete
    }

    /// The first field is one a ModelProto writer puts first: `ir_version` (1, varint), or a
    /// string/message field of ModelProto (producer, domain, graph, opset_import, ...).
    pub fn starts_like_model(b: &[u8]) -> bool {
        let mut pos = 0;
        let Some(tag) = varint(b, &mut pos) else {
            return false;
        };
        matches!(
            (tag >> 3, tag & 7),
            (1, 0) | (2..=4, 2) | (5, 0) | (6..=8, 2) | (14, 2) | (20, 2) | (25, 2)
        )
    }
}

/// A random protobuf often decodes as a `ModelProto` full of unknown fields. A model has, at the
/// least, an IR version and a graph.
fn check_is_model(path: &Path, proto: &ModelProto) -> Result<(), LoadError> {
    let not_a_model = |detail: &str| LoadError::NotAModel {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    };
    match (proto.ir_version, &proto.graph) {
        (None, None) => Err(not_a_model("it has neither an ir_version nor a graph")),
        (None, Some(_)) => Err(not_a_model("it has no ir_version")),
        (Some(_), None) => Err(not_a_model("it has no graph")),
        (Some(v), Some(_)) if v <= 0 => Err(not_a_model(&format!("its ir_version is {v}"))),
        _ => Ok(()),
    }
}

/// Reads a model written in ONNX's textual syntax (`*.onnxtxt`: test fixtures, hand-written
/// repros).
pub fn read_text_model(path: &Path) -> Result<(ModelProto, u64), LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (file, meta) = open_regular(path)?;
    let size = meta.len();
    if size > MAX_TEXT_FILE {
        return Err(LoadError::TextTooLarge {
            path: path.to_path_buf(),
            size,
        });
    }
    // Bounded by the limit even if the file grows while it is read.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_TEXT_FILE + 1),
        &mut bytes,
    )
    .map_err(io)?;
    if bytes.len() as u64 > MAX_TEXT_FILE {
        return Err(LoadError::TextTooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is not UTF-8 text ({e})"),
        ))
    })?;
    let proto = match super::text::parse_model(&text) {
        Ok(p) => p,
        // The text moves into the report: never copied.
        Err(e) => {
            return Err(LoadError::Text {
                path: path.to_path_buf(),
                message: e.message,
                src: std::sync::Arc::new(miette::NamedSource::new(
                    path.display().to_string(),
                    text,
                )),
                span: e.span,
            });
        }
    };
    check_is_model(path, &proto)?;
    Ok((proto, size))
}
