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
/// otherwise: a 100k-node model takes about one second in a release build, and a run on any
/// input should end within 20 s. Debug builds (tests) run about ten times slower and get more.
pub const DEFAULT_TIME_LIMIT_SECS: f64 = if cfg!(debug_assertions) { 300.0 } else { 15.0 };

/// The time limit: `ONNX_LINT_TIME_LIMIT` (seconds, fractions allowed; 0 = none), else the
/// default.
pub fn time_limit() -> Option<Duration> {
    let secs = std::env::var("ONNX_LINT_TIME_LIMIT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(DEFAULT_TIME_LIMIT_SECS);
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
    let received = match time_limit() {
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
