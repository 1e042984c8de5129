//! `cargo onnx-lint place <MODEL>...`: what ORT would do with a model.

use std::path::PathBuf;

use super::check::plan_groups;
use super::output::{Format, Report, Sink};
use super::settings::{RuleFlags, UsageError};
use super::{CargoArgs, EXIT_ERROR, EXIT_OK, SharedArgs};
use crate::placer;

/// Places every model (files, or the `*.onnx` files of folders), each under the settings of
/// the Cargo package that holds it (the configuration and Cargo.lock, as the lint command).
pub fn run(models: &[PathBuf], shared: &SharedArgs, format: Format) -> Result<u8, miette::Report> {
    let Some(mut writer) = format.emitter().place() else {
        return Err(UsageError::new(format.refusal(Report::Place), None).into());
    };
    // One model file: its session is built while the settings are resolved (in a Cargo project
    // `cargo metadata` takes about 20 ms; building the session needs no setting). The analysis
    // of that model takes it (waiting for it, within its time limit).
    let mut prebuilt = match models {
        [one] if one.is_file() => {
            let path = one.clone();
            std::thread::Builder::new()
                .name("read".into())
                .stack_size(8 << 20)
                .spawn(move || crate::session::build::from_file(&path))
                .ok()
                .map(|h| (one.clone(), h))
        }
        _ => None,
    };
    let planned = plan_groups(
        models,
        shared,
        RuleFlags::default(),
        &CargoArgs {
            no_cache: true,
            ..CargoArgs::default()
        },
    )?;
    for w in &planned.warnings {
        eprintln!("warning: {w}");
    }
    let total: usize = planned.groups.iter().map(|g| g.targets.len()).sum();
    let mut done = 0;
    let mut exit = EXIT_OK;
    let mut sink = Sink::new(None);
    // The last model's placement: never freed (see `exit_without_freeing`).
    let mut last = None;
    for group in &planned.groups {
        eprintln!("{}", group.note());
        let settings = &group.resolved.settings;
        let release = settings.release;
        if !release.is_decoded() {
            // The release's kernel table is decoded on a thread of its own while the first
            // model is read (the session build does not need it): 6% of the wall time of
            // `place` on an 8k-node decoder (`qwen2.L32`, tools/bench/ab.py). The analysis
            // takes it after the build, waiting if need be (`OnceLock`); a thread that cannot
            // start leaves the decoding to the analysis.
            let _ = std::thread::Builder::new()
                .name("tables".into())
                .spawn(move || {
                    release.table();
                });
        }
        for path in &group.targets {
            done += 1;
            // Loaded and placed within the whole-model budget (`cli/budget.rs`).
            let (owned, opts) = (path.clone(), settings.options.clone());
            // The session is built straight from the file (`placer::place_file`): the model
            // is neither decoded whole nor indexed.
            let read = prebuilt.take_if(|(p, _)| p == path).map(|(_, h)| h);
            let placed = super::budget::bounded(path, move || match read {
                Some(handle) => {
                    let read = handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    placer::place_read(&owned, read, || release.table(), &opts)
                }
                None => placer::place_file_with(&owned, || release.table(), &opts),
            });
            let p = match placed {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{}", super::output::render_report(&miette::Report::new(e)));
                    exit = EXIT_ERROR;
                    continue;
                }
            };
            writer.model(&path.display().to_string(), &p, &mut sink);
            if done == total {
                // The process ends soon after the last model: freeing its graph (hundreds of
                // thousands of small allocations on a large model, ~5% of `place`) is wasted
                // work. Earlier models are dropped here so that memory stays bounded over many
                // models. (The rest of its protobuf is freed while the session is built, so
                // that later allocations reuse those pages instead of faulting in new ones.)
                last = Some(p);
            }
        }
    }
    writer.finish(&mut sink);
    if let Some(kept) = last {
        exit_without_freeing(exit, kept);
    }
    Ok(exit)
}

/// Ends the process with exit code `code` without running `kept`'s destructors: the whole
/// report has been written (`out` flushes stdout after every write; stderr is unbuffered,
/// flushed here anyway), `place` holds no file, lock or temporary to clean up, and the
/// operating system takes the memory back at once. `std::process::exit` runs no destructor
/// of a value still alive on any stack, so `kept` is never freed; nothing is leaked past the
/// process.
#[allow(clippy::exit)]
fn exit_without_freeing<T>(code: u8, kept: T) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let _alive_until_exit = kept;
    std::process::exit(i32::from(code))
}
