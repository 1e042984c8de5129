//! Settings for mimalloc, the allocator of the binary and of the benchmark.

/// mimalloc's `purge_delay` option (the same index in its v2 and v3 headers).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// mimalloc's `arena_eager_commit` option.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// A run is short and its heap peaks once: keep freed pages instead of returning them to the OS
/// every 10 ms and faulting them back in zeroed (on a 100k-node model the kernel spent up to a
/// third of `place` clearing pages), and commit arenas up front. Call first thing in `main`; it
/// only sets options, so it is harmless where mimalloc is not the global allocator.
///
/// Transparent huge pages are turned off for the process (Linux): mimalloc asks for them on its
/// arenas, and where the host's THP mode honours that (`madvise`, `always`) a fault may stop for
/// the kernel to compact memory into a free 2 MiB page. On the 2-core development machine
/// (`madvise`/`madvise`) `place` on the 100k-node bench decoder took 0.42 s in some runs and
/// 0.8–0.97 s in others, 0.3–0.5 s of it system time, and every run peaked 30 MiB higher
/// (whole huge pages); with THP off, 0.53–0.58 s in every run. The flag is the process's own
/// (`PR_SET_THP_DISABLE`), never the host's setting.
pub fn tune() {
    // SAFETY: plain setters of mimalloc's global options, called before any thread starts.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 1);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)` only sets a flag of this process; its
    // result is ignored (a kernel without it leaves THP as it was).
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
