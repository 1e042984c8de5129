//! Live verification: runs a real ONNX Runtime session and compares what it did with the
//! prediction.
//!
//! - [`log`] reads ORT's verbose session-creation log back into placements, copies and per-graph
//!   counts (pure; the formats of `../shared/oracle/ortstub.py`).
//! - [`diff`] compares a [`crate::placer::Placement`] with that (pure).
//! - [`locate`] finds the ORT shared library (a path, `ORT_DYLIB_PATH`, or a pip-installed
//!   `onnxruntime-gpu`/`onnxruntime`).
//! - `live` (feature `live`) loads that library with the `ort` crate's `load-dynamic`, looks for
//!   a CUDA device through `cudarc` (the driver is loaded at run time too), and creates the
//!   session with a logger that captures every message.
//!
//! Nothing here prints; `cli::verify` does.

pub mod diff;
#[cfg(feature = "live")]
pub mod live;
pub mod locate;
pub mod log;

use crate::tables::{self, Bundled};

/// The bundled table that simulates the live release `version` (e.g. `1.31.1`): the same release
/// when bundled (`true`), else the nearest one (`false`): the newest patch of the same minor, else
/// the closest minor, the older one on a tie.
pub fn simulated_release(version: &str) -> Option<(&'static Bundled, bool)> {
    let want = tables::parse_version(version.trim())?;
    let all = tables::bundled();
    if let Some(b) = all
        .iter()
        .find(|b| tables::parse_version(b.version).as_deref() == Some(&want[..]))
    {
        return Some((b, true));
    }
    let key = |v: &[u64]| -> i64 {
        let major = v.first().copied().unwrap_or(0) as i64;
        let minor = v.get(1).copied().unwrap_or(0) as i64;
        major * 1000 + minor
    };
    let target = key(&want);
    all.iter()
        .filter_map(|b| tables::parse_version(b.version).map(|v| (b, v)))
        .min_by_key(|(_, v)| {
            let d = key(v) - target;
            // same minor first (newest patch), then by distance, older first on a tie
            (
                d.abs(),
                if d > 0 { 1 } else { 0 },
                std::cmp::Reverse(v.get(2).copied().unwrap_or(0)),
            )
        })
        .map(|(b, _)| (b, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_nearest_release() {
        let newest = tables::newest().version;
        let (b, exact) = simulated_release(newest).expect("bundled");
        assert!(exact);
        assert_eq!(b.version, newest);
        let (b, exact) = simulated_release("1.24.1").expect("nearest");
        assert!(!exact);
        assert_eq!(b.version, "1.24.4");
        let (b, exact) = simulated_release("1.99.0").expect("nearest");
        assert!(!exact);
        assert_eq!(b.version, newest);
        assert!(simulated_release("garbage").is_none());
    }
}
