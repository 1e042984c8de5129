//! Work spread over a few scoped threads, for very large models: the readers (the census, the
//! session builder, the interner's table) and the steps that only read the session graph (its
//! scans and load checks, kernel lookups ahead of partitioning, the optimiser's proofs that a
//! walk would change nothing): a million-node model spends seconds on work whose parts are
//! independent. The answer never depends on how many threads ran: each thread takes its share
//! itself (the next chunk of a shared counter), so a thread the system will not give leaves its
//! share to the others, the calling thread at least, and nothing panics for want of one.

use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most threads one step takes: past it, the steps measured (the census, decoding
/// initializers) gain little, and the rest of the machine stays free.
pub const MAX_THREADS: usize = 8;

/// The threads a step may take on this machine: its parallelism, at most [`MAX_THREADS`] (1
/// where the system does not say). Asked of the system once per process: on Linux the answer
/// reads the process's cgroup files (several opens and reads per call, slow in a sandbox such
/// as gVisor), and the steps ask it often (every load check, whatever the graph's size).
pub fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_THREADS)
    })
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

/// `f` on each chunk of `items` (`chunk` at a time, the last one shorter), on up to `threads`
/// threads: the answers in the chunks' order.
pub fn map_chunks<I: Sync, T: Send>(
    items: &[I],
    chunk: usize,
    threads: usize,
    name: &str,
    f: impl Fn(&[I]) -> T + Sync,
) -> Vec<T> {
    let chunks: Vec<&[I]> = items.chunks(chunk.max(1)).collect();
    let next = AtomicUsize::new(0);
    let done = on_threads(threads.min(chunks.len()), name, || {
        let mut mine = Vec::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(c) = chunks.get(k) else {
                return mine;
            };
            mine.push((k, f(c)));
        }
    });
    let mut all: Vec<(usize, T)> = done.into_iter().flatten().collect();
    all.sort_unstable_by_key(|&(k, _)| k);
    all.into_iter().map(|(_, t)| t).collect()
}

/// Whether `test` holds for any of `items`, asked `part` items at a time on up to `threads`
/// threads; the parts not begun once one part found one are passed over. The answer is the
/// same whatever the threads.
pub fn any<I: Sync>(
    items: &[I],
    part: usize,
    threads: usize,
    name: &str,
    test: impl Fn(&I) -> bool + Sync,
) -> bool {
    let found = std::sync::atomic::AtomicBool::new(false);
    map_chunks(items, part, threads, name, |p| {
        if !found.load(Ordering::Relaxed) && p.iter().any(&test) {
            found.store(true, Ordering::Relaxed);
        }
    });
    found.into_inner()
}

/// Vectors of at least this many bytes have their pages faulted in by [`fault_in`].
pub const FAULT_IN_BYTES: usize = 16 << 20;

/// Has the pages of `spare` (the spare capacity of a large vector about to be filled in order)
/// faulted in on up to `threads` threads, 2 MiB at a time, by writing one element per page: the
/// kernel clears a fresh page when it is first written, and one thread filling a vector of a
/// million session nodes (170 MiB) would wait for each of its pages in turn. Nothing is read
/// from what is written; the vector's length is unchanged. Below [`FAULT_IN_BYTES`], nothing.
pub fn fault_in<T: Send>(spare: &mut [MaybeUninit<T>], threads: usize) {
    let size = size_of::<T>().max(1);
    if spare.len().saturating_mul(size) < FAULT_IN_BYTES || threads < 2 {
        return;
    }
    // Elements at most a page apart: every page holds the start of one.
    let step = (4096 / size).max(1);
    write_parts(spare, (2 << 20) / size, threads, "fault-in", |part| {
        for e in part.iter_mut().step_by(step) {
            *e = MaybeUninit::zeroed();
        }
    });
}

/// Writes `slice` a part at a time (`part` elements) with `write`, on up to `threads` threads:
/// each takes the next part until none is left, so every part is written once, whatever
/// threads the system gave (this one at least).
pub fn write_parts<T: Send>(
    slice: &mut [T],
    part: usize,
    threads: usize,
    name: &str,
    write: impl Fn(&mut [T]) + Sync,
) {
    let parts = Mutex::new(slice.chunks_mut(part.max(1)));
    on_threads(threads, name, || {
        loop {
            // The lock is held to take a part, not to write it.
            let part = parts.lock().unwrap_or_else(|e| e.into_inner()).next();
            let Some(part) = part else {
                return;
            };
            write(part);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_come_back_in_order_whatever_the_threads() {
        let items: Vec<usize> = (0..1000).collect();
        for threads in [1, 2, 5] {
            let sums = map_chunks(&items, 64, threads, "test", |c| c.iter().sum::<usize>());
            assert_eq!(sums.len(), 16);
            assert_eq!(sums[0], (0..64).sum::<usize>());
            assert_eq!(sums[15], (960..1000).sum::<usize>());
            assert_eq!(sums.iter().sum::<usize>(), (0..1000).sum::<usize>());
        }
        assert!(map_chunks(&items[..0], 64, 4, "test", |c| c.len()).is_empty());
    }

    #[test]
    fn any_finds_an_item_in_any_part_whatever_the_threads() {
        let items: Vec<usize> = (0..1000).collect();
        for threads in [1, 2, 5] {
            for at in [0, 63, 64, 999] {
                assert!(any(&items, 64, threads, "test", |&i| i == at));
            }
            assert!(!any(&items, 64, threads, "test", |&i| i == 1000));
        }
        assert!(!any(&items[..0], 64, 4, "test", |_| true));
    }

    #[test]
    fn faulting_in_leaves_the_vector_as_it_was() {
        let mut v: Vec<u64> = vec![1, 2, 3];
        v.reserve(FAULT_IN_BYTES / 8 + 1000);
        fault_in(v.spare_capacity_mut(), 4);
        assert_eq!(v, [1, 2, 3]);
        v.extend(0..FAULT_IN_BYTES as u64 / 8);
        assert_eq!(v.len(), FAULT_IN_BYTES / 8 + 3);
        assert_eq!(v[3 + 12_345], 12_345);
    }

    #[test]
    fn every_thread_that_ran_answers() {
        let ran = on_threads(3, "test", || 1usize);
        assert!(!ran.is_empty() && ran.len() <= 3);
        assert_eq!(on_threads(0, "test", || 7), vec![7]);
    }
}
