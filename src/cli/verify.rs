//! `cargo onnx-lint verify <MODEL>`: a live ORT session compared with the prediction.
//!
//! Exit codes: 0 the live session agrees with the prediction (with `--require-cuda`: and the
//! CUDA placement was checked on a device); 1 it disagrees; 2 nothing could be checked (no ORT,
//! an unreadable model, no `live` feature, `--require-cuda` without a device).

use std::path::PathBuf;

use super::output::Report;
use super::{Format, SharedArgs};

#[cfg(not(feature = "live"))]
use super::EXIT_ERROR;

/// `verify`'s own arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Model files or folders (searched recursively for `*.onnx`).
    #[arg(required = true)]
    pub models: Vec<PathBuf>,

    #[command(flatten)]
    pub shared: SharedArgs,

    /// Output format (JSON: an array with one record per model).
    #[arg(long, visible_alias = "output-format", value_parser = Format::parser(Report::Listing), default_value = "human")]
    pub format: Format,

    /// The ONNX Runtime shared library (or the folder holding it) to verify against. Default:
    /// `ORT_DYLIB_PATH`, else the `onnxruntime-gpu`/`onnxruntime` package of `python3`.
    #[arg(long = "ort-dylib", value_name = "PATH")]
    pub ort_dylib: Option<PathBuf>,

    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: i32,

    /// Exit 2 unless the CUDA placement was checked on a CUDA device (for GPU CI runners).
    #[arg(long = "require-cuda")]
    pub require_cuda: bool,
}

#[cfg(not(feature = "live"))]
pub fn run(args: &VerifyArgs) -> Result<u8, miette::Report> {
    let _ = args;
    eprintln!(
        "error: this cargo-onnx-lint was built without the `live` feature, so `verify` cannot run \
         an ONNX Runtime session; nothing was confirmed. Rebuild with `--features live` (on by \
         default), or use `cargo onnx-lint place` for the prediction alone."
    );
    Ok(EXIT_ERROR)
}

#[cfg(feature = "live")]
pub use live::run;

#[cfg(feature = "live")]
mod live {
    use serde_json::{Value, json};

    use std::path::Path;

    use super::super::check::plan_groups;
    use super::super::output::json::placement_json;
    use super::super::output::{self, out};
    use super::super::settings::RuleFlags;
    use super::super::{CargoArgs, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, EpArg, Format};
    use super::VerifyArgs;
    use crate::model;
    use crate::placer::{self, OptLevel, Options};
    use crate::tables::Bundled;
    use crate::tables::Ep;
    use crate::verify::diff::{self, Diff, Predicted, Real};
    use crate::verify::live::{self as ort_live, CudaProbe, Device};
    use crate::verify::{locate, log, simulated_release};

    /// The provider the live side registers: ORT's CUDA provider (a live session with any
    /// other list runs on the CPU only).
    const CUDA: EpArg = EpArg(&crate::providers::cuda::CUDA);

    /// Skips the device check and registers the CUDA EP anyway (development: ORT with stub
    /// CUDA libraries). The report then says that no device was confirmed.
    const ASSUME_DEVICE: &str = "ONNX_LINT_VERIFY_ASSUME_DEVICE";

    fn fail(msg: &str) -> u8 {
        eprintln!("error: {msg}\nnothing was confirmed: the prediction stands unverified.");
        EXIT_ERROR
    }

    fn short(ep: &str) -> &str {
        ep.strip_suffix("ExecutionProvider").unwrap_or(ep)
    }

    fn counts(m: &std::collections::BTreeMap<String, usize>) -> String {
        if m.is_empty() {
            return "0 nodes".into();
        }
        m.iter()
            .rev()
            .map(|(ep, n)| format!("{n} {}", short(ep)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn copies(n: usize) -> String {
        format!("{n} cop{}", if n == 1 { "y" } else { "ies" })
    }

    /// What every model of a run shares: the library and the release it simulates.
    struct Library {
        located: locate::Located,
        version: String,
        bundled: &'static Bundled,
        exact: bool,
    }

    pub fn run(args: &VerifyArgs) -> Result<u8, miette::Report> {
        let planned = plan_groups(
            &args.models,
            &args.shared,
            RuleFlags::default(),
            &CargoArgs {
                no_cache: true,
                ..CargoArgs::default()
            },
        )?;
        let located = match locate::locate(args.ort_dylib.as_deref()) {
            Ok(l) => l,
            Err(e) => {
                return Ok(fail(&format!(
                    "no ONNX Runtime library to verify against: {e}"
                )));
            }
        };
        let version = match ort_live::library_version(&located.path) {
            Ok(v) => v,
            Err(e) => return Ok(fail(&e)),
        };
        let minor = version
            .split('.')
            .nth(1)
            .and_then(|m| m.parse::<u32>().ok())
            .unwrap_or(0);
        if minor < ort_live::MIN_MINOR {
            return Ok(fail(&format!(
                "ONNX Runtime {version} at {} is older than 1.{}, the oldest this build can load",
                located.path.display(),
                ort_live::MIN_MINOR
            )));
        }
        let Some((bundled, exact)) = simulated_release(&version) else {
            return Ok(fail(&format!("cannot read the ORT version `{version}`")));
        };
        let lib = Library {
            located,
            version,
            bundled,
            exact,
        };
        let mut exit = EXIT_OK;
        let mut records = Vec::new();
        for group in &planned.groups {
            let o = &group.resolved.settings.options;
            let ep = EpArg(crate::providers::of(
                o.eps.first().copied().unwrap_or(Ep::Cpu),
            ));
            for path in &group.targets {
                let (code, record) = one(args, &lib, path, ep, o.level, o.nchwc_block);
                exit = exit.max(code);
                records.extend(record);
            }
        }
        if args.format == Format::Json {
            out(&serde_json::to_string_pretty(&Value::Array(records)).unwrap_or_default());
        }
        Ok(exit)
    }

    /// Verifies one model: its exit code and, in JSON, its record (human output is printed).
    fn one(
        args: &VerifyArgs,
        lib: &Library,
        path: &Path,
        ep: EpArg,
        level: OptLevel,
        configured_block: u32,
    ) -> (u8, Option<Value>) {
        let Library {
            located,
            version,
            bundled,
            exact,
        } = lib;
        let (bundled, exact) = (*bundled, *exact);
        let version = version.as_str();
        let m = match model::load(path) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("{}", output::render_report(&miette::Report::new(e)));
                return (EXIT_ERROR, None);
            }
        };
        let mut notes: Vec<String> = Vec::new();
        if !exact {
            notes.push(format!(
                "ORT {version} has no bundled kernel table: simulating the nearest bundled release, {}",
                bundled.version
            ));
        }
        if let Some(spec) = &args.shared.ort
            && spec.trim_start_matches('v') != version
            && !version.starts_with(&format!("{}.", spec.trim_start_matches('v')))
        {
            notes.push(format!(
                "--ort {spec} ignored: verify simulates the release it runs, {version}"
            ));
        }

        // Decide whether the CUDA EP can be checked, and say why not.
        let mut device: Option<Device> = None;
        let mut cuda_reason: Option<String> = None;
        let assume = std::env::var(ASSUME_DEVICE).is_ok_and(|v| v == "1");
        if ep != CUDA {
            cuda_reason = Some("--ep cpu was asked for".into());
        } else if !located.has_cuda_provider {
            cuda_reason = Some(format!(
                "this ONNX Runtime build has no CUDA execution provider (no \
                 libonnxruntime_providers_cuda.so next to {}); install onnxruntime-gpu",
                located.path.display()
            ));
        } else {
            match ort_live::probe_cuda() {
                CudaProbe::Devices(ds) => match ds.into_iter().find(|d| d.ordinal == args.device) {
                    Some(d) => device = Some(d),
                    None => cuda_reason = Some(format!("no CUDA device {}", args.device)),
                },
                CudaProbe::None(why) => cuda_reason = Some(why),
            }
        }
        let register_cuda = device.is_some() || (assume && ep == CUDA && located.has_cuda_provider);
        if assume && device.is_none() && register_cuda {
            notes.push(format!(
                "{ASSUME_DEVICE}=1: the CUDA EP was registered without a detected device ({}); \
                 ORT's placement below is its own, but no device confirmed it",
                cuda_reason.clone().unwrap_or_default()
            ));
        }

        let live = match ort_live::run_session(
            &located.path,
            path,
            level,
            register_cuda.then_some(args.device),
        ) {
            Ok(s) => s,
            Err(e) => return (fail(&e.0), None),
        };
        if let Some(e) = &live.cuda_error {
            cuda_reason = Some(format!(
                "the CUDA execution provider could not be registered: {}",
                e.lines().next().unwrap_or("")
            ));
            notes.push("the session was created with the CPU provider only".into());
        }
        let cuda_checked = live.cuda && device.is_some();

        // The prediction for the providers the live session really had, with this machine's
        // NCHWc block size (the CPU's level-`all` graph depends on it).
        let block = placer::machine_nchwc_block().unwrap_or(configured_block);
        if level == OptLevel::All {
            match placer::machine_nchwc_block() {
                Some(b) if b != configured_block => notes.push(format!(
                    "this machine's MLAS NCHWc block size is {b} ({}); predicted with {b}, not \
                     the configured {configured_block} (`[cpu] nchwc-block`)",
                    if b == 16 {
                        "AVX-512F"
                    } else {
                        "x86-64 without AVX-512F"
                    }
                )),
                Some(_) => {}
                None => notes.push(format!(
                    "this machine's MLAS NCHWc block size is unknown (not x86-64): predicted \
                     with the configured {configured_block} (`[cpu] nchwc-block`)"
                )),
            }
        }
        let opts = Options {
            eps: if live.cuda {
                vec![CUDA.0.ep, Ep::Cpu]
            } else {
                vec![Ep::Cpu]
            },
            level,
            nchwc_block: block,
        };
        let p = placer::place(&m, bundled.table(), &opts);
        let predicted = Predicted::from_placement(&p);
        let parsed = log::parse(&live.log);
        let real = Real {
            session: live.session.clone(),
            log: parsed.clone(),
        };
        let mut d = diff::compare(&predicted, &real);
        if let Some(saved) = &live.saved_nodes {
            diff::compare_saved_graph(&mut d, &predicted, saved);
        }

        let placed = !parsed.reports.is_empty();
        let cuda_status = if !cuda_checked {
            "not checked"
        } else if !d.agree {
            "contradicted"
        } else if placed {
            "confirmed"
        } else {
            "no placement: the session fails as predicted"
        };
        let exit = if !d.agree {
            EXIT_FINDINGS
        } else if args.require_cuda && !cuda_checked {
            EXIT_ERROR
        } else {
            EXIT_OK
        };

        if args.format == Format::Json {
            let real_json = json!({
                "session": if live.session.is_ok() { "ok" } else { "fail" },
                "error": live.session.as_ref().err(),
                "placement": real_placement(&parsed),
                "all_nodes_on": real_all_nodes_on(&parsed),
                "memcpy": parsed.memcpy_map(),
                "copies": parsed.copies,
                "no_cuda_kernel": parsed.no_cuda_kernel.iter().map(|(op, n)| json!({"op": op, "node": n})).collect::<Vec<_>>(),
                "cpu_preferred": parsed.cpu_preferred,
            });
            let v = json!({
                "model": path.display().to_string(),
                "ort_library": {
                    "path": located.path.display().to_string(),
                    "from": located.describe(),
                    "version": version,
                    "cuda_provider": located.has_cuda_provider,
                },
                "simulated": {"ort": bundled.version, "exact": exact},
                "level": opts.level.name(),
                "providers": opts.eps.iter().map(|e| e.name()).collect::<Vec<_>>(),
                "cuda_device": device,
                "cuda_placement": cuda_status,
                "cuda_not_checked_because": if cuda_checked { None } else { cuda_reason.clone() },
                "agree": d.agree,
                "confirmed": if d.agree { diff::confirmations(&d) } else { Vec::new() },
                "diff": d,
                "predicted": placement_json(&path.display().to_string(), &p),
                "real": real_json,
                "notes": notes,
            });
            return (exit, Some(v));
        } else {
            let mut s = format!("verify {}\n", path.display());
            s += &format!(
                "  ORT library   {}, version {version}\n",
                located.describe()
            );
            s += &format!(
                "  simulated     ORT {} ({}) at level {}, providers [{}]\n",
                bundled.version,
                if exact {
                    "same release"
                } else {
                    "nearest bundled release"
                },
                opts.level.name(),
                opts.eps
                    .iter()
                    .map(|e| short(e.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            match &device {
                Some(dv) => {
                    s += &format!(
                        "  CUDA device   {}: {} (compute {}, {} MiB)\n",
                        dv.ordinal, dv.name, dv.compute_capability, dv.memory_mib
                    )
                }
                None => {
                    s += &format!(
                        "  CUDA device   none used: {}\n",
                        cuda_reason.clone().unwrap_or_default()
                    )
                }
            }
            s += &format!(
                "  session       {} (predicted {})\n",
                match &live.session {
                    Ok(()) => "ok".to_string(),
                    Err(e) => format!("failed: {}", e.lines().next().unwrap_or("")),
                },
                match &predicted.session {
                    Ok(()) => "ok".to_string(),
                    Err(e) => format!("failure: {e}"),
                }
            );
            for n in &notes {
                s += &format!("  note: {n}\n");
            }
            s += &human_diff(&d);
            s += &verdict(
                &d,
                cuda_checked,
                &device,
                version,
                ep,
                &cuda_reason,
                live.cuda,
            );
            out(&s);
        }
        (exit, None)
    }

    fn real_placement(l: &log::LiveLog) -> Value {
        let mut m = serde_json::Map::new();
        if l.reports
            .iter()
            .any(|r| matches!(r, log::PlacementReport::Split(_)))
        {
            for r in &l.reports {
                if let log::PlacementReport::Split(blocks) = r {
                    for b in blocks {
                        for (_, name) in &b.nodes {
                            m.insert(name.clone(), Value::String(b.ep.clone()));
                        }
                    }
                }
            }
        }
        Value::Object(m)
    }

    fn real_all_nodes_on(l: &log::LiveLog) -> Value {
        let mut m = serde_json::Map::new();
        for r in &l.reports {
            if let log::PlacementReport::All { ep, count } = r {
                let k = m.get(ep).and_then(Value::as_u64).unwrap_or(0);
                m.insert(ep.clone(), json!(k + *count as u64));
            }
        }
        if m.is_empty() {
            Value::Null
        } else {
            Value::Object(m)
        }
    }

    /// Entries shown per list in human output.
    const LIST_MAX: usize = 25;

    fn human_diff(d: &Diff) -> String {
        let mut s = String::from("\n");
        let w = d
            .graphs
            .iter()
            .map(|g| g.graph.len())
            .max()
            .unwrap_or(0)
            .clamp(12, 40);
        s += &format!("  {:<w$}  {:<34}  {:<20}\n", "graph", "predicted", "real");
        for g in &d.graphs {
            s += &format!(
                "  {:<w$}  {:<34}  {:<20}  {}\n",
                g.graph,
                format!(
                    "{}, {}",
                    counts(&g.predicted_nodes),
                    copies(g.predicted_copies)
                ),
                copies(g.real_copies),
                if g.agree { "agree" } else { "DIFFER" }
            );
        }
        s += &format!(
            "  {:<w$}  {:<34}  {:<20}  {}\n",
            "(all graphs)",
            counts(&d.predicted_totals),
            counts(&d.real_totals),
            if d.predicted_totals == d.real_totals {
                "agree"
            } else {
                "DIFFER"
            }
        );
        if !d.session_agree {
            s += &format!(
                "\n  session outcome differs: predicted {}, real {}\n",
                d.session_predicted.as_deref().unwrap_or("ok"),
                d.session_real.as_deref().unwrap_or("ok")
            );
        }
        if !d.nodes_differ.is_empty() {
            s += &format!(
                "\n  nodes whose provider differs ({}):\n",
                d.nodes_differ.len()
            );
            for n in &d.nodes_differ {
                s += &format!(
                    "    {} `{}` ({}): predicted {}, real {}\n",
                    n.op,
                    n.node,
                    n.graph,
                    short(&n.predicted),
                    short(&n.real)
                );
            }
        }
        for (title, list) in [
            (
                "nodes ORT lists that the prediction lacks",
                &d.real_only_nodes,
            ),
            (
                "predicted nodes ORT does not account for",
                &d.predicted_only_nodes,
            ),
        ] {
            if !list.is_empty() {
                s += &format!("\n  {title} ({}):\n", list.len());
                for n in list.iter().take(LIST_MAX) {
                    s += &format!("    {} `{}` on {}\n", n.op, n.name, short(&n.ep));
                }
                if list.len() > LIST_MAX {
                    s += &format!(
                        "    ... and {} more (--format json lists all)\n",
                        list.len() - LIST_MAX
                    );
                }
            }
        }
        for (title, list) in [
            (
                "copies predicted, not made by ORT",
                &d.copies_predicted_only,
            ),
            ("copies made by ORT, not predicted", &d.copies_real_only),
        ] {
            if !list.is_empty() {
                s += &format!("\n  {title} ({}):\n", list.len());
                for c in list {
                    s += &format!("    {c}\n");
                }
            }
        }
        s
    }

    fn verdict(
        d: &Diff,
        cuda_checked: bool,
        device: &Option<Device>,
        version: &str,
        ep: EpArg,
        cuda_reason: &Option<String>,
        cuda_registered: bool,
    ) -> String {
        let differences = d.nodes_differ.len()
            + d.real_only_nodes.len()
            + d.predicted_only_nodes.len()
            + d.copies_predicted_only.len()
            + d.copies_real_only.len()
            + usize::from(!d.session_agree);
        let mut s = String::from("\n");
        if !d.agree {
            s += &format!(
                "result: DISAGREE ({differences} difference{}) between the prediction and ORT {version}",
                if differences == 1 { "" } else { "s" }
            );
            s += if cuda_checked {
                " with the CUDA EP on the device\n"
            } else if cuda_registered {
                " with the CUDA EP registered (no device confirmed)\n"
            } else {
                " with the CPU EP only\n"
            };
        } else if cuda_checked && d.session_real.is_some() {
            s += &format!(
                "result: AGREE: with ORT {version} and the CUDA EP, session creation fails as predicted (no placement to compare)\n"
            );
        } else if cuda_checked {
            let name = device.as_ref().map(|d| d.name.as_str()).unwrap_or("?");
            s += &format!(
                "result: AGREE: CUDA placement, copies and session outcome confirmed with ORT {version} on {name}\n"
            );
        } else {
            s += &format!(
                "result: AGREE with ORT {version} {}: the model {} as predicted{}\n",
                if cuda_registered {
                    "with the CUDA EP registered"
                } else {
                    "with the CPU EP only"
                },
                if d.session_real.is_none() {
                    "loads and every node has a kernel"
                } else {
                    "fails to load"
                },
                if cuda_registered { "" } else { " on the CPU" }
            );
        }
        if d.agree {
            for line in diff::confirmations(d) {
                s += &format!("  {line}\n");
            }
        }
        if !cuda_checked && ep == CUDA {
            s += &format!(
                "CUDA placement was NOT confirmed: {}\n",
                cuda_reason.as_deref().unwrap_or("no CUDA device was used")
            );
        }
        s
    }
}
