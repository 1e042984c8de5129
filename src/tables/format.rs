//! The table file format (`kernel-tables/README.md` describes it): parsing, the canonical
//! writer, and the JSON shape of `tables show --format json` (design.md).
//!
//! [`write`] defines canonical: sections in a fixed order, keys and rows sorted, one line per
//! kernel registration and per schema version. `tools/kernel-tables/generate.py` writes the
//! same bytes; `tests/it/tables.rs` checks that every embedded file round-trips.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    Ep, FormalParam, KernelDef, KernelTable, OpSchema, ParamOption, ReleaseInfo, TableError,
    UNBOUNDED,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    release: RawRelease,
    opsets: BTreeMap<String, i64>,
    memory: BTreeMap<String, String>,
    typesets: BTreeMap<String, Vec<String>>,
    kernels: BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<RawKernel>>>>,
    schemas: BTreeMap<String, BTreeMap<String, Vec<RawSchema>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRelease {
    ort: String,
    /// The package the table was enumerated from, when it is not `onnxruntime-gpu` at `ort`
    /// (a provider's own package, a plugin, the CPU-only `onnxruntime`), and its version.
    package: Option<String>,
    version: Option<String>,
    wheel: String,
    sha256: String,
    generator: String,
    date: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    since: i64,
    until: Option<i64>,
    types: BTreeMap<String, String>,
    #[serde(default)]
    cpu_inputs: Vec<usize>,
    #[serde(default)]
    cpu_outputs: Vec<usize>,
    mem: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchema {
    since: i64,
    #[serde(default)]
    deprecated: bool,
    inputs: Vec<String>,
    outputs: Vec<String>,
    types: BTreeMap<String, String>,
    n_inputs: Option<[usize; 2]>,
    n_outputs: Option<[usize; 2]>,
}

/// Parses a table file. `file` only names the file in errors.
pub fn parse(file: &str, text: &str) -> Result<KernelTable, TableError> {
    let invalid = |message: String| TableError::Invalid {
        file: file.to_string(),
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let resolve =
        |types: BTreeMap<String, String>| -> Result<Vec<(String, Vec<String>)>, TableError> {
            types
                .into_iter()
                .map(|(name, value)| match value.strip_prefix('@') {
                    Some(set) => match raw.typesets.get(set) {
                        Some(list) => Ok((name, list.clone())),
                        None => Err(invalid(format!("unknown type set `@{set}`"))),
                    },
                    None => Ok((name, vec![value])),
                })
                .collect()
        };

    let mut kernels = Vec::new();
    for (ep_name, domains) in raw.kernels {
        let ep = Ep::from_name(&ep_name)
            .ok_or_else(|| invalid(format!("unknown execution provider `{ep_name}`")))?;
        for (domain, ops) in domains {
            for (op, rows) in ops {
                for row in rows {
                    kernels.push(KernelDef {
                        ep,
                        domain: domain.clone(),
                        op: op.clone(),
                        since: row.since,
                        until: row.until,
                        types: resolve(row.types)?.into(),
                        cpu_inputs: row.cpu_inputs,
                        cpu_outputs: row.cpu_outputs,
                        mem_source: row.mem,
                    });
                }
            }
        }
    }

    let mut schemas = Vec::new();
    for (domain, ops) in raw.schemas {
        for (op, rows) in ops {
            for row in rows {
                let param_list = |list: &[String]| -> Result<Vec<FormalParam>, TableError> {
                    list.iter()
                        .map(|p| {
                            parse_param(p).ok_or_else(|| {
                                invalid(format!("bad formal parameter `{p}` in {op}"))
                            })
                        })
                        .collect()
                };
                let inputs = param_list(&row.inputs)?;
                let outputs = param_list(&row.outputs)?;
                let [min_inputs, max_inputs] =
                    row.n_inputs.unwrap_or_else(|| arity_bounds(&inputs));
                let [min_outputs, max_outputs] =
                    row.n_outputs.unwrap_or_else(|| arity_bounds(&outputs));
                schemas.push(OpSchema {
                    domain: domain.clone(),
                    name: op.clone(),
                    since: row.since,
                    deprecated: row.deprecated,
                    inputs,
                    outputs,
                    type_constraints: resolve(row.types)?.into(),
                    min_inputs,
                    max_inputs,
                    min_outputs,
                    max_outputs,
                });
            }
        }
    }

    let release = ReleaseInfo {
        ort: raw.release.ort,
        package: raw.release.package,
        version: raw.release.version,
        wheel: raw.release.wheel,
        sha256: raw.release.sha256,
        generator: raw.release.generator,
        date: raw.release.date,
    };
    Ok(KernelTable::new(
        release,
        raw.opsets,
        raw.memory,
        raw.typesets,
        kernels,
        schemas,
    ))
}

/// `"X: T"` single, `"B?: T"` optional, `"inputs*1: T"` variadic with minimum arity 1; a `~` after
/// the marker means heterogeneous.
fn parse_param(s: &str) -> Option<FormalParam> {
    let (head, type_str) = s.split_once(": ")?;
    let (head, homogeneous) = match head.strip_suffix('~') {
        Some(h) => (h, false),
        None => (head, true),
    };
    let (name, option, min_arity) = if let Some(name) = head.strip_suffix('?') {
        (name, ParamOption::Optional, 0)
    } else if let Some((name, n)) = head.rsplit_once('*')
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        (name, ParamOption::Variadic, n.parse().ok()?)
    } else {
        (head, ParamOption::Single, 1)
    };
    if name.is_empty() {
        return None;
    }
    Some(FormalParam {
        name: name.to_string(),
        type_str: type_str.to_string(),
        option,
        homogeneous,
        min_arity,
    })
}

/// ONNX's `OpSchema::Finalize` count of (min, max) arguments for a parameter list.
fn arity_bounds(params: &[FormalParam]) -> [usize; 2] {
    let (mut lo, mut hi) = (0, 0);
    for p in params {
        match p.option {
            ParamOption::Single => {
                hi += 1;
                lo = hi;
            }
            ParamOption::Optional => hi += 1,
            ParamOption::Variadic => {
                lo = hi + p.min_arity;
                hi = UNBOUNDED;
            }
        }
    }
    [lo, hi]
}

fn param_str(p: &FormalParam) -> String {
    let mut s = p.name.clone();
    match p.option {
        ParamOption::Single => {}
        ParamOption::Optional => s.push('?'),
        ParamOption::Variadic => {
            let _ = write!(s, "*{}", p.min_arity);
        }
    }
    if !p.homogeneous {
        s.push('~');
    }
    s.push_str(": ");
    s.push_str(&p.type_str);
    s
}

fn is_bare(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn key(s: &str) -> String {
    if is_bare(s) { s.to_string() } else { quote(s) }
}

fn int_list(xs: &[usize]) -> String {
    let items: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

fn str_list<S: AsRef<str>>(xs: &[S]) -> String {
    let items: Vec<String> = xs.iter().map(|x| quote(x.as_ref())).collect();
    format!("[{}]", items.join(", "))
}

struct Writer<'a> {
    names: HashMap<&'a [String], &'a str>,
}

impl<'a> Writer<'a> {
    fn new(t: &'a KernelTable) -> Self {
        let names = t
            .typesets
            .iter()
            .map(|(n, list)| (list.as_slice(), n.as_str()))
            .collect();
        Writer { names }
    }

    fn types(&self, types: &[(String, Vec<String>)]) -> String {
        if types.is_empty() {
            return "{}".to_string();
        }
        let items: Vec<String> = types
            .iter()
            .map(|(n, list)| {
                let value = match list.as_slice() {
                    [one] => one.clone(),
                    // A list without a type set cannot come from a parsed file; spelling it
                    // `@?` makes the canonical test fail instead of panicking here.
                    _ => format!(
                        "@{}",
                        self.names.get(list.as_slice()).copied().unwrap_or("?")
                    ),
                };
                format!("{} = {}", key(n), quote(&value))
            })
            .collect();
        format!("{{ {} }}", items.join(", "))
    }

    fn kernel_row(&self, k: &KernelDef) -> String {
        let mut parts = vec![format!("since = {}", k.since)];
        if let Some(u) = k.until {
            parts.push(format!("until = {u}"));
        }
        parts.push(format!("types = {}", self.types(&k.types)));
        if !k.cpu_inputs.is_empty() {
            parts.push(format!("cpu_inputs = {}", int_list(&k.cpu_inputs)));
        }
        if !k.cpu_outputs.is_empty() {
            parts.push(format!("cpu_outputs = {}", int_list(&k.cpu_outputs)));
        }
        if let Some(m) = &k.mem_source {
            parts.push(format!("mem = {}", quote(m)));
        }
        format!("{{ {} }}", parts.join(", "))
    }

    fn schema_row(&self, s: &OpSchema) -> String {
        let mut parts = vec![format!("since = {}", s.since)];
        if s.deprecated {
            parts.push("deprecated = true".to_string());
        }
        let ins: Vec<String> = s.inputs.iter().map(param_str).collect();
        let outs: Vec<String> = s.outputs.iter().map(param_str).collect();
        parts.push(format!("inputs = {}", str_list(&ins)));
        parts.push(format!("outputs = {}", str_list(&outs)));
        parts.push(format!("types = {}", self.types(&s.type_constraints)));
        if arity_bounds(&s.inputs) != [s.min_inputs, s.max_inputs] {
            parts.push(format!(
                "n_inputs = {}",
                int_list(&[s.min_inputs, s.max_inputs])
            ));
        }
        if arity_bounds(&s.outputs) != [s.min_outputs, s.max_outputs] {
            parts.push(format!(
                "n_outputs = {}",
                int_list(&[s.min_outputs, s.max_outputs])
            ));
        }
        format!("{{ {} }}", parts.join(", "))
    }
}

/// Writes `table` canonically.
pub fn write(t: &KernelTable) -> String {
    let w = Writer::new(t);
    let r = &t.release;
    let mut out = String::with_capacity(512 * 1024);
    let _ = writeln!(
        out,
        "# ONNX Runtime {}: kernel registrations and op schemas, as ORT itself reports them.",
        r.ort
    );
    out.push_str(
        "# Generated by tools/kernel-tables/generate.py; do not edit by hand. Format: kernel-tables/README.md.\n",
    );
    out.push_str("\n[release]\n");
    let _ = writeln!(out, "ort = {}", quote(&r.ort));
    for (k, v) in [("package", &r.package), ("version", &r.version)] {
        if let Some(v) = v {
            let _ = writeln!(out, "{k} = {}", quote(v));
        }
    }
    for (k, v) in [
        ("wheel", &r.wheel),
        ("sha256", &r.sha256),
        ("generator", &r.generator),
        ("date", &r.date),
    ] {
        let _ = writeln!(out, "{k} = {}", quote(v));
    }
    out.push_str("\n[opsets]\n");
    for (d, v) in &t.opsets {
        let _ = writeln!(out, "{} = {v}", quote(d));
    }
    out.push_str("\n[memory]\n");
    for (k, v) in &t.memory_sources {
        let _ = writeln!(out, "{} = {}", key(k), quote(v));
    }
    out.push_str("\n[typesets]\n");
    for (k, v) in &t.typesets {
        let _ = writeln!(out, "{} = {}", key(k), str_list(v));
    }

    // Kernels: provider, domain, op by name; rows by since and until descending, then types.
    let mut rows: Vec<(&KernelDef, String)> =
        t.kernels.iter().map(|k| (k, w.types(&k.types))).collect();
    rows.sort_by(|(a, at), (b, bt)| {
        let until = |k: &KernelDef| k.until.unwrap_or(i64::from(i32::MAX));
        (a.ep.name(), &a.domain, &a.op, -a.since, -until(a), at).cmp(&(
            b.ep.name(),
            &b.domain,
            &b.op,
            -b.since,
            -until(b),
            bt,
        ))
    });
    let mut group: Option<(&str, &str)> = None;
    let mut op: Option<&str> = None;
    for (k, _) in &rows {
        if group != Some((k.ep.name(), k.domain.as_str())) {
            if op.is_some() {
                out.push_str("]\n");
            }
            let _ = write!(out, "\n[kernels.{}.{}]\n", k.ep.name(), quote(&k.domain));
            group = Some((k.ep.name(), k.domain.as_str()));
            op = None;
        }
        if op != Some(k.op.as_str()) {
            if op.is_some() {
                out.push_str("]\n");
            }
            let _ = writeln!(out, "{} = [", key(&k.op));
            op = Some(k.op.as_str());
        }
        let _ = writeln!(out, "  {},", w.kernel_row(k));
    }
    if op.is_some() {
        out.push_str("]\n");
    }

    // Schemas: domain, op by name; versions by since descending.
    let mut schemas: Vec<&OpSchema> = t.schemas.iter().collect();
    schemas.sort_by(|a, b| (&a.domain, &a.name, -a.since).cmp(&(&b.domain, &b.name, -b.since)));
    let mut domain: Option<&str> = None;
    let mut op: Option<&str> = None;
    for s in schemas {
        if domain != Some(s.domain.as_str()) {
            if op.is_some() {
                out.push_str("]\n");
            }
            let _ = write!(out, "\n[schemas.{}]\n", quote(&s.domain));
            domain = Some(s.domain.as_str());
            op = None;
        }
        if op != Some(s.name.as_str()) {
            if op.is_some() {
                out.push_str("]\n");
            }
            let _ = writeln!(out, "{} = [", key(&s.name));
            op = Some(s.name.as_str());
        }
        let _ = writeln!(out, "  {},", w.schema_row(s));
    }
    if op.is_some() {
        out.push_str("]\n");
    }
    out
}

/// The value `tables show <ORT> --format json` prints (design.md). Its maps are sorted by key;
/// [`show_json_pretty`] prints the fields in design.md's order.
pub fn show_json(t: &KernelTable) -> Value {
    serde_json::to_value(show_doc(t)).unwrap_or(Value::Null)
}

/// `tables show --format json` output: [`show_json`] pretty-printed, fields in design.md's order.
pub fn show_json_pretty(t: &KernelTable) -> String {
    serde_json::to_string_pretty(&show_doc(t)).unwrap_or_default()
}

fn show_doc(t: &KernelTable) -> impl Serialize + '_ {
    #[derive(Serialize)]
    struct Show<'a> {
        ort: &'a str,
        onnx_opset: &'a BTreeMap<String, i64>,
        source: String,
        kernels: Vec<Kernel<'a>>,
    }
    #[derive(Serialize)]
    struct Kernel<'a> {
        ep: &'static str,
        domain: &'a str,
        op: &'a str,
        since: i64,
        until: Option<i64>,
        types: BTreeMap<&'a str, &'a [String]>,
        cpu_inputs: &'a [usize],
        cpu_outputs: &'a [usize],
    }
    let r = &t.release;
    Show {
        ort: &r.ort,
        onnx_opset: &t.opsets,
        source: format!("{} sha256:{}", r.wheel, r.sha256),
        kernels: t
            .kernels
            .iter()
            .map(|k| Kernel {
                ep: k.ep.name(),
                domain: &k.domain,
                op: &k.op,
                since: k.since,
                until: k.until,
                types: k
                    .types
                    .iter()
                    .map(|(n, l)| (n.as_str(), l.as_slice()))
                    .collect(),
                cpu_inputs: &k.cpu_inputs,
                cpu_outputs: &k.cpu_outputs,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip() {
        for s in [
            "X: T",
            "B?: tensor(int64)",
            "inputs*1: T",
            "v_initial*0~: V",
            "outputs...*1: T",
        ] {
            let p = parse_param(s).expect("parses");
            assert_eq!(param_str(&p), s);
        }
        let p = parse_param("v_initial*0~: V").expect("parses");
        assert_eq!(p.option, ParamOption::Variadic);
        assert_eq!(p.min_arity, 0);
        assert!(!p.homogeneous);
        assert_eq!(parse_param("no separator"), None);
    }
}
