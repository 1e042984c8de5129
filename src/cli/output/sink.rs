//! Where the report goes: stdout as it is produced, or the `-o` file written atomically at the
//! end; a failed write of the report ends the run (exit 2), a closed pipe quietly (exit 0).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Where a command's report goes: stdout as it is produced, or a file (`-o`), written at the
/// end in one piece through a temporary file beside it and a rename, so a reader never sees
/// half a report.
#[derive(Debug, Default)]
pub struct Sink {
    file: Option<PathBuf>,
    buffer: String,
}

impl Sink {
    pub fn new(file: Option<&Path>) -> Sink {
        Sink {
            file: file.map(Path::to_path_buf),
            buffer: String::new(),
        }
    }

    /// Whether the report goes to a terminal.
    pub fn is_terminal(&self) -> bool {
        self.file.is_none() && std::io::stdout().is_terminal()
    }

    /// Writes a line.
    pub fn line(&mut self, line: &str) {
        if self.file.is_some() {
            self.buffer.push_str(line);
            self.buffer.push('\n');
        } else {
            out(line);
        }
    }

    /// Writes `value` as pretty-printed JSON and a newline (what `line` would write of
    /// `serde_json::to_string_pretty(value)`), straight to stdout rather than through a
    /// `String` of the whole report.
    pub fn json(&mut self, value: &impl serde::Serialize) {
        if self.file.is_some() {
            self.line(&serde_json::to_string_pretty(value).unwrap_or_default());
            return;
        }
        let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let written = serde_json::to_writer_pretty(&mut stdout, value)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(stdout))
            .and_then(|()| stdout.flush());
        if let Err(e) = written {
            write_failed("stdout", &e);
        }
    }

    /// Writes the file, if there is one.
    pub fn finish(self) -> Result<(), String> {
        let Some(path) = self.file else {
            return Ok(());
        };
        write_atomically(&path, self.buffer.as_bytes())
            .map_err(|e| format!("cannot write the report to {}: {e}", path.display()))
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.as_deref().unwrap_or("onnx-lint-report"),
        std::process::id()
    ));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// Writes a line to stdout. A closed pipe (`cargo onnx-lint ... | head`) ends the run quietly
/// with exit 0, as ripgrep does: the reader has all it wants. Any other failure (stdout on a
/// full disk, `> /dev/full`) ends it with exit 2 and the reason: the report is lost, and a
/// lost report must not pass for a clean one.
pub fn out(line: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        write_failed("stdout", &e);
    }
}

/// Ends the run after a failed write of the report to `what` (see [`out`]).
#[allow(clippy::exit)]
pub fn write_failed(what: &str, e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(crate::cli::EXIT_OK));
    }
    let _ = writeln!(
        std::io::stderr(),
        "error: cannot write the report to {what}: {e}"
    );
    std::process::exit(i32::from(crate::cli::EXIT_ERROR));
}

/// Appends `text` to the file at `path` (the GitHub job summary): created if missing, refused
/// if it is not a regular file, opened non-blocking (a FIFO there never blocks the run).
pub fn append_regular(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(std::io::Error::other("it is not a regular file"));
        }
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let mut f = options.open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    f.write_all(text.as_bytes())?;
    f.flush()
}
