//! `cargo onnx-lint tables [list | show <ORT>]`: the bundled releases and their kernel tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{EXIT_OK, Format, TablesAction};
use crate::tables::{self, KernelDef, TableError};

/// Runs the `tables` command; prints and returns the exit code.
pub fn run(action: Option<&TablesAction>, format: Format) -> Result<u8, miette::Report> {
    match action {
        None | Some(TablesAction::List) => {
            emit(&list(format));
            Ok(EXIT_OK)
        }
        Some(TablesAction::Show { ort }) => {
            let text = show(ort, format).map_err(miette::Report::new)?;
            emit(&text);
            Ok(EXIT_OK)
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// The bundled releases: one line each (human), or `{"releases": [...], "newest": ...}` (JSON).
pub fn list(format: Format) -> String {
    let newest = tables::newest().version;
    if format == Format::Json {
        let releases: Vec<_> = tables::bundled()
            .iter()
            .map(|b| serde_json::json!({"ort": b.version, "file": b.file_name}))
            .collect();
        let v = serde_json::json!({"releases": releases, "newest": newest});
        return format!("{v:#}\n");
    }
    let mut out = String::from("Bundled ORT releases:\n");
    for b in tables::bundled() {
        let mark = if b.version == newest {
            "  (newest)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {:<8} kernel-tables/{}{mark}",
            b.version, b.file_name
        );
    }
    out
}

/// One release's table: the design.md JSON value, or a summary with one line per op (human).
pub fn show(spec: &str, format: Format) -> Result<String, TableError> {
    let bundled = tables::resolve(spec)?;
    let t = bundled.table();
    if format == Format::Json {
        return Ok(format!("{}\n", tables::show_json_pretty(t)));
    }
    let r = t.release();
    let mut out = String::new();
    let _ = writeln!(out, "ORT {}", r.ort);
    let _ = writeln!(out, "source: {} sha256:{}", r.wheel, r.sha256);
    let _ = writeln!(out, "generated: {}, {}", r.generator, r.date);
    let opsets: Vec<String> = t.opsets().iter().map(|(d, v)| format!("{d} {v}")).collect();
    let _ = writeln!(out, "highest opsets: {}", opsets.join(", "));
    // (provider, domain, op) -> rows, in canonical order.
    let mut ops: BTreeMap<(&str, &str, &str), Vec<&KernelDef>> = BTreeMap::new();
    for k in t.iter_kernels() {
        ops.entry((k.ep.name(), &k.domain, &k.op))
            .or_default()
            .push(k);
    }
    // Every provider the table has rows of, in `providers::ALL`'s order.
    for ep in crate::providers::ALL.iter().map(|p| p.ep) {
        let n = t.iter_kernels().filter(|k| k.ep == ep).count();
        if n == 0 {
            continue;
        }
        let n_ops = ops.keys().filter(|(e, _, _)| *e == ep.name()).count();
        let _ = writeln!(out, "\n{ep}: {n} registrations of {n_ops} ops");
        for ((_, domain, op), rows) in ops.iter().filter(|((e, _, _), _)| *e == ep.name()) {
            let _ = writeln!(out, "  {domain:<22} {op:<34} {}", op_summary(rows));
        }
    }
    Ok(out)
}

/// `23+ [21, 22] ...` with host-memory arguments of the newest row, e.g. `(host: in 1)`.
fn op_summary(rows: &[&KernelDef]) -> String {
    let mut ranges: Vec<String> = Vec::new();
    for k in rows {
        let label = k.range_label();
        if !ranges.contains(&label) {
            ranges.push(label);
        }
    }
    let mut s = ranges.join(" ");
    if let Some(k) = rows.first()
        && (!k.cpu_inputs.is_empty() || !k.cpu_outputs.is_empty())
    {
        let mut host = Vec::new();
        if !k.cpu_inputs.is_empty() {
            host.push(format!("in {}", join(&k.cpu_inputs)));
        }
        if !k.cpu_outputs.is_empty() {
            host.push(format!("out {}", join(&k.cpu_outputs)));
        }
        let _ = write!(s, "  (host: {})", host.join("; "));
    }
    s
}

fn join(xs: &[usize]) -> String {
    xs.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
