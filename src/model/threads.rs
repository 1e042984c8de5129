//! Work spread over a few scoped threads, for the readers of very large models (the census here,
//! the session builder): a million-node model spends most of a second on work whose parts are
//! independent. The answer never depends on how many threads ran: each thread takes its share
//! itself (the next chunk of a shared counter), so a thread the system will not give leaves its
//! share to the others, the calling thread at least, and nothing panics for want of one.

/// The most threads one step takes: past it, the steps measured (the census, decoding
/// initializers) gain little, and the rest of the machine stays free.
pub const MAX_THREADS: usize = 8;

/// The threads a step may take on this machine: its parallelism, at most [`MAX_THREADS`] (1
/// where the system does not say).
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

/// Runs `work` on this thread and on up to `threads - 1` scoped threads named `name`, and
/// returns what each run returned (this thread's first). `work` must take its share itself:
/// how many threads the system gave is not known in advance.
pub fn on_threads<T: Send>(threads: usize, name: &str, work: impl Fn() -> T + Sync) -> Vec<T> {
    std::thread::scope(|scope| {
        let work = &work;
        let helpers: Vec<_> = (1..threads)
            .map_while(|_| {
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn_scoped(scope, work)
                    .ok()
            })
            .collect();
        let mut all = Vec::with_capacity(helpers.len() + 1);
        all.push(work());
        for h in helpers {
            match h.join() {
                Ok(t) => all.push(t),
                // A bug of the work itself, not of the input: it would have panicked here too.
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_that_ran_answers() {
        let ran = on_threads(3, "test", || 1usize);
        assert!(!ran.is_empty() && ran.len() <= 3);
        assert_eq!(on_threads(0, "test", || 7), vec![7]);
    }
}
