//! Settings for mimalloc, the allocator of the binary and of the benchmark.

/// mimalloc's `purge_delay` option (the same index in its v2 and v3 headers).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// mimalloc's `arena_eager_commit` option.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// A run is short and its heap peaks once: keep freed pages instead of returning them to the OS
/// every 10 ms and faulting them back in zeroed (on a 100k-node model the kernel spent up to a
/// third of `place` clearing pages), and commit arenas up front. Call first thing in `main`; it
/// only sets options, so it is harmless where mimalloc is not the global allocator.
pub fn tune() {
    // SAFETY: plain setters of mimalloc's global options, called before any thread starts.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 1);
    }
}
