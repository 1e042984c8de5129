//! Time to load one embedded kernel table: the TOML parse, and the decode of its compact form
//! (`kernel-tables/ort-<v>.bin`, what the first `Bundled::table()` call costs).
//!
//!     cargo bench --bench tables
//!
//! Prints, per release, the median and minimum of 20 parses, the median of 20 canonical writes,
//! and the median of 20 compact decodes.

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
        // The TOML source; the binary embeds only the compact form.
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("kernel-tables")
                .join(b.file_name),
        )
        .expect("kernel-tables/ is readable");
        let mut parse = Vec::with_capacity(RUNS);
        let mut write = Vec::with_capacity(RUNS);
        let mut decode = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let start = Instant::now();
            let t = tables::compact::decode(b.compact).expect("embedded compact table decodes");
            decode.push(start.elapsed());
            std::hint::black_box(&t);
            let start = Instant::now();
            let t = tables::format::parse(b.file_name, &text).expect("embedded table parses");
            parse.push(start.elapsed());
            let start = Instant::now();
            let written = tables::write(&t);
            write.push(start.elapsed());
            assert_eq!(written.len(), text.len());
        }
        let min = parse.iter().min().copied().unwrap_or_default();
        println!(
            "{:<8} {:>7} bytes  parse median {:>6.2} ms (min {:>6.2} ms)  write median {:>6.2} ms  \
             compact {:>6} bytes, decode median {:>5.2} ms",
            b.version,
            text.len(),
            median(parse).as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            median(write).as_secs_f64() * 1e3,
            b.compact.len(),
            median(decode).as_secs_f64() * 1e3,
        );
    }
}
