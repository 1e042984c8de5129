//! Time to parse one embedded kernel table (what the first `Bundled::table()` call costs).
//!
//!     cargo bench --bench tables
//!
//! Prints, per release, the median and minimum of 20 parses, and the median of 20 canonical writes.

#![allow(clippy::print_stdout)] // printing the measurements is this program's job

use std::time::{Duration, Instant};

use onnx_lint::tables;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    const RUNS: usize = 20;
    for b in tables::bundled() {
        let mut parse = Vec::with_capacity(RUNS);
        let mut write = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let start = Instant::now();
            let t = tables::format::parse(b.file_name, b.text).expect("embedded table parses");
            parse.push(start.elapsed());
            let start = Instant::now();
            let text = tables::write(&t);
            write.push(start.elapsed());
            assert_eq!(text.len(), b.text.len());
        }
        let min = parse.iter().min().copied().unwrap_or_default();
        println!(
            "{:<8} {:>7} bytes  parse median {:>6.2} ms (min {:>6.2} ms)  write median {:>6.2} ms",
            b.version,
            b.text.len(),
            median(parse).as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            median(write).as_secs_f64() * 1e3,
        );
    }
}
