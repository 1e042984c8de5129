//! The whole-model budget at the edge: one model's load and analysis run on a worker thread
//! under a time limit, and a model that exhausts a budget of the analysis (see
//! [`crate::placer::budget_exceeded`]) gets a clear "too large to analyse" error
//! (`onnx_lint::load::too_large_to_analyse`, exit 2) instead of a made-up answer.
//!
//! A model past the time limit is reported and the run goes on with the next model; its
//! worker is left to finish (threads cannot be stopped) and ends with the process. The
//! analysis's own budgets (constant folding, inlining, shape ranks) keep such cases rare.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::model::LoadError;

/// Seconds one model's load and analysis may take, unless `ONNX_LINT_TIME_LIMIT` says
/// otherwise: a 100k-node model takes a quarter to half a second in a release build, and a run
/// on any input should end within 20 s. Debug builds (tests) run about ten times slower and get more.
pub const DEFAULT_TIME_LIMIT_SECS: f64 = if cfg!(debug_assertions) { 300.0 } else { 15.0 };

/// Seconds added to the default limit per MiB of model file: a big model is a legitimate input
/// that its size justifies (a million-node decoder is a 355 MB file and takes about 14 s in a
/// release build on an idle machine when this limit was set; 3.4–6.8 s now), a small file that
/// runs long is not.
pub const TIME_LIMIT_SECS_PER_FILE_MIB: f64 = 0.1;

/// The time limit for a model file of `file_len` bytes: `ONNX_LINT_TIME_LIMIT` (seconds,
/// fractions allowed; 0 = none), else the default plus [`TIME_LIMIT_SECS_PER_FILE_MIB`] per
/// MiB of the file.
pub fn time_limit(file_len: u64) -> Option<Duration> {
    limit_for(
        file_len,
        std::env::var("ONNX_LINT_TIME_LIMIT").ok().as_deref(),
    )
}

fn limit_for(file_len: u64, setting: Option<&str>) -> Option<Duration> {
    let by_size = DEFAULT_TIME_LIMIT_SECS
        + TIME_LIMIT_SECS_PER_FILE_MIB * (file_len as f64 / f64::from(1u32 << 20));
    let secs = setting
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(by_size);
    (secs > 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)))
}

/// Runs `work` (the load and analysis of the model at `path`) on a worker thread, within the
/// time limit, and turns an exhausted analysis budget into [`LoadError::TooLargeToAnalyse`].
/// A panic of the worker is re-raised here: a panic is a bug, never an answer.
pub fn bounded<T: Send + 'static>(
    path: &Path,
    work: impl FnOnce() -> Result<T, LoadError> + Send + 'static,
) -> Result<T, LoadError> {
    let too_large = |detail: String| LoadError::TooLargeToAnalyse {
        path: path.to_path_buf(),
        detail,
    };
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("analysis".into())
        // The main thread's stack size: the analysis walks nested subgraphs recursively.
        .stack_size(8 << 20)
        .spawn(move || {
            let r = work();
            // The budgets are per thread: read them on the thread that spent them.
            let exceeded = crate::placer::budget_exceeded();
            let _ = tx.send((r, exceeded));
        })
        .map_err(|e| LoadError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
    let file_len = std::fs::metadata(path).map_or(0, |m| m.len());
    let received = match time_limit(file_len) {
        Some(limit) => match rx.recv_timeout(limit) {
            Ok(v) => Ok(v),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(too_large(format!(
                    "its analysis took longer than {} s (set ONNX_LINT_TIME_LIMIT to allow more)",
                    limit.as_secs_f64()
                )));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
        },
        None => rx.recv().map_err(|_| ()),
    };
    match received {
        Ok((_, Some(detail))) => Err(too_large(detail)),
        Ok((r, None)) => r,
        // The worker ended without sending: it panicked.
        Err(()) => match worker.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => Err(too_large("its analysis stopped without a result".into())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_grows_with_the_file_unless_set() {
        let mib = 1u64 << 20;
        let small = limit_for(mib, None).map(|d| d.as_secs_f64());
        let big = limit_for(355 * mib, None).map(|d| d.as_secs_f64());
        assert_eq!(small, Some(DEFAULT_TIME_LIMIT_SECS + 0.1));
        assert_eq!(big, Some(DEFAULT_TIME_LIMIT_SECS + 35.5));
        assert_eq!(
            limit_for(355 * mib, Some("2.5")),
            Some(Duration::from_secs_f64(2.5))
        );
        assert_eq!(limit_for(355 * mib, Some("0")), None);
        // An unreadable setting falls back to the size rule.
        assert_eq!(
            limit_for(0, Some("soon")).map(|d| d.as_secs_f64()),
            Some(DEFAULT_TIME_LIMIT_SECS)
        );
    }
}
