//! Per-release ONNX Runtime data: kernel registrations of the CUDA and CPU execution providers
//! (with the kernel arguments that live in host memory), the op schema history ORT bundles, and
//! the highest opset ORT accepts per domain.
//!
//! The data lives in `kernel-tables/ort-<version>.toml`, one canonical file per release, generated
//! by `tools/kernel-tables/generate.py` from ORT itself (see `kernel-tables/README.md`). The files
//! are embedded with `include_str!` ([`embedded`]), each with its compact pre-parsed form
//! (`ort-<version>.bin`, [`compact`]); a release's compact form is decoded the first time its
//! [`Bundled::table`] is asked for, and only then.
//!
//! Invariants (checked by `tests/it/tables.rs`):
//! - every embedded table parses, and writing it back ([`format::write`]) gives the same bytes;
//! - its kernels are exactly those ORT enumerated for that release
//!   (`tests/fixtures/kernel-enum/ort-<version>.json.gz`);
//! - no two registrations of one (provider, domain, op) accept the same since-version with the
//!   same type constraints, under ORT's version rule (see [`KernelDef::matches_since`]).
//!
//! Domains: ORT spells the ONNX domain `""`; tables and this API spell it `"ai.onnx"`, and every
//! lookup accepts either.

pub mod attributes;
pub mod compact;
mod embedded;
pub mod format;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use crate::sym::SymMap as FxHashMap;

use miette::Diagnostic;

use crate::sym::Sym;
use thiserror::Error;

pub use format::{show_json, show_json_pretty, write};

/// The ONNX domain as tables spell it.
pub const ONNX_DOMAIN: &str = "ai.onnx";

/// `max_inputs`/`max_outputs` of a schema whose last parameter is variadic (ONNX's `INT_MAX`).
pub const UNBOUNDED: usize = i32::MAX as usize;

/// One release whose table is embedded in the binary.
#[derive(Debug)]
pub struct Bundled {
    /// ORT version, e.g. `1.24.4`.
    pub version: &'static str,
    /// File name of the table's TOML source under `kernel-tables/` (not embedded: the compact
    /// form is its exact parse).
    pub file_name: &'static str,
    /// The embedded compact form of the parsed file (`ort-<version>.bin`, [`compact`]).
    pub compact: &'static [u8],
    /// The embedded attribute list of every op schema (`attributes/ort-<version>.txt`).
    pub attributes_text: &'static str,
    parsed: OnceLock<KernelTable>,
    attributes: OnceLock<attributes::SchemaAttributes>,
}

impl Bundled {
    pub(crate) const fn new(
        version: &'static str,
        file_name: &'static str,
        compact: &'static [u8],
        attributes_text: &'static str,
    ) -> Self {
        Bundled {
            version,
            file_name,
            compact,
            attributes_text,
            parsed: OnceLock::new(),
            attributes: OnceLock::new(),
        }
    }

    /// The attributes of the release's op schemas, parsed on first use.
    pub fn attributes(&'static self) -> &'static attributes::SchemaAttributes {
        self.attributes
            .get_or_init(|| attributes::SchemaAttributes::parse(self.attributes_text))
    }

    /// Whether [`Bundled::table`] has decoded the table already.
    pub fn is_decoded(&self) -> bool {
        self.parsed.get().is_some()
    }

    /// The table, decoded from its compact form on first use and cached for the life of the
    /// process. The compact form is the TOML parsed ahead of time (`tests/it/tables.rs` checks
    /// that it is exactly that), so this is the same table as `format::parse` of the TOML file.
    pub fn table(&'static self) -> &'static KernelTable {
        self.parsed.get_or_init(|| {
            compact::decode(self.compact).expect(
                "embedded compact kernel tables decode: tests/it/tables.rs checks every kernel-tables/*.bin",
            )
        })
    }
}

/// All bundled releases, sorted by version (oldest first).
pub fn bundled() -> &'static [Bundled] {
    &embedded::RELEASES
}

/// The attributes of the op schemas of bundled release `ort` (exact version), if bundled.
pub fn attributes_of(ort: &str) -> Option<&'static attributes::SchemaAttributes> {
    bundled()
        .iter()
        .find(|b| b.version == ort)
        .map(Bundled::attributes)
}

/// The newest bundled release.
pub fn newest() -> &'static Bundled {
    bundled()
        .last()
        .expect("embedded.rs lists at least one release; tests/it/tables.rs checks it")
}

/// Finds a bundled release: `1.24.4` exactly, or `1.24` (or `1`) for the newest bundled release
/// with that prefix. A leading `v` is accepted.
pub fn resolve(spec: &str) -> Result<&'static Bundled, TableError> {
    let unknown = || TableError::UnknownRelease {
        spec: spec.to_string(),
        bundled: bundled()
            .iter()
            .map(|b| b.version)
            .collect::<Vec<_>>()
            .join(", "),
    };
    let want = parse_version(spec.trim().trim_start_matches('v')).ok_or_else(unknown)?;
    if want.is_empty() || want.len() > 3 {
        return Err(unknown());
    }
    bundled()
        .iter()
        .rev()
        .find(|b| parse_version(b.version).is_some_and(|have| have.starts_with(&want)))
        .ok_or_else(unknown)
}

/// Numeric components of a dotted version, or `None` when one is not a number.
pub(crate) fn parse_version(v: &str) -> Option<Vec<u64>> {
    v.split('.').map(|c| c.parse().ok()).collect()
}

/// Errors of this module.
#[derive(Debug, Error, Diagnostic)]
pub enum TableError {
    #[error("unknown ORT release `{spec}`")]
    #[diagnostic(
        code(onnx_lint::tables::unknown_release),
        help("bundled releases: {bundled}; give one of them, or a prefix such as `1.24`")
    )]
    UnknownRelease { spec: String, bundled: String },

    #[error("kernel table {file} is invalid: {message}")]
    #[diagnostic(code(onnx_lint::tables::invalid))]
    Invalid { file: String, message: String },
}

/// An execution provider with kernel rows in the tables: the key of its rows (and of a node's
/// assignment). What a provider claims beyond its rows lives in `providers/`, one folder
/// each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ep {
    Cuda,
    Cpu,
}

impl Ep {
    /// Every provider with rows, in the order of the enum.
    pub const ALL: [Ep; 2] = [Ep::Cuda, Ep::Cpu];

    /// ORT's name for the provider.
    pub fn name(self) -> &'static str {
        match self {
            Ep::Cuda => "CUDAExecutionProvider",
            Ep::Cpu => "CPUExecutionProvider",
        }
    }

    /// The provider named `name` (ORT's spelling).
    pub fn from_name(name: &str) -> Option<Ep> {
        match name {
            "CUDAExecutionProvider" => Some(Ep::Cuda),
            "CPUExecutionProvider" => Some(Ep::Cpu),
            _ => None,
        }
    }
}

impl fmt::Display for Ep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a table came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseInfo {
    /// ORT version.
    pub ort: String,
    /// File name of the `onnxruntime-gpu` wheel that was enumerated.
    pub wheel: String,
    /// sha256 of that wheel.
    pub sha256: String,
    /// Generator name and version.
    pub generator: String,
    /// Date of generation (ISO 8601).
    pub date: String,
}

/// Type constraints (or type parameters): name and allowed type strings (ORT's spelling,
/// sorted), sorted by name. Shared: many registrations have the same list, and a placement keeps
/// a copy of the kernel of every node, which then costs a reference count instead of a dozen
/// strings.
pub type TypeConstraints = std::sync::Arc<[(String, Vec<String>)]>;

/// One kernel registration, as ORT reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDef {
    pub ep: Ep,
    /// `ai.onnx` for the ONNX domain.
    pub domain: String,
    pub op: String,
    /// First since-version the kernel was registered for.
    pub since: i64,
    /// Last since-version of a versioned registration; `None` when open-ended (`since+`).
    pub until: Option<i64>,
    /// Type constraints: name and allowed type strings (ORT's spelling, sorted), sorted by name.
    pub types: TypeConstraints,
    /// Input positions the kernel reads from host memory (CUDA kernels only).
    pub cpu_inputs: Vec<usize>,
    /// Output positions the kernel writes to host memory (CUDA kernels only).
    pub cpu_outputs: Vec<usize>,
    /// Where `cpu_inputs`/`cpu_outputs` come from: keys of the table's `[memory]` section joined
    /// by `+` (e.g. `doc+probe`); `None` when nothing is declared and nothing was probed.
    pub mem_source: Option<String>,
}

impl KernelDef {
    /// ORT's version rule (`VerifyVersion`): an open-ended registration matches only a node whose
    /// since-version equals its start; a versioned one matches any since-version in its range.
    pub fn matches_since(&self, since: i64) -> bool {
        match self.until {
            None => self.since == since,
            Some(until) => self.since <= since && since <= until,
        }
    }

    /// The allowed types of constraint `name`, if the kernel has that constraint.
    pub fn allowed(&self, name: &str) -> Option<&[String]> {
        self.types
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_slice())
    }

    /// Version range as ORT's docs print it: `13+`, `[7, 12]`, `9`.
    pub fn range_label(&self) -> String {
        match self.until {
            None => format!("{}+", self.since),
            Some(u) if u == self.since => format!("{u}"),
            Some(u) => format!("[{}, {u}]", self.since),
        }
    }
}

/// How many arguments a formal parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamOption {
    Single,
    Optional,
    Variadic,
}

/// A formal input or output of an op schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormalParam {
    pub name: String,
    /// A type parameter of the schema (`T`) or a literal type (`tensor(int64)`).
    pub type_str: String,
    pub option: ParamOption,
    /// For variadic parameters: whether all arguments must have the same type.
    pub homogeneous: bool,
    /// Minimum number of arguments: 1 for `Single`, 0 for `Optional`, the schema's minimum for
    /// `Variadic` (derived from ORT's reported minimum argument count; checked against ONNX).
    pub min_arity: usize,
}

/// One version of an op schema, as the ORT release bundles it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpSchema {
    /// `ai.onnx` for the ONNX domain.
    pub domain: String,
    pub name: String,
    pub since: i64,
    /// ORT treats a node that resolves to a deprecated schema as having no schema.
    pub deprecated: bool,
    pub inputs: Vec<FormalParam>,
    pub outputs: Vec<FormalParam>,
    /// Type parameters and their allowed type strings (sorted), sorted by name.
    pub type_constraints: TypeConstraints,
    pub min_inputs: usize,
    /// [`UNBOUNDED`] when the last input is variadic.
    pub max_inputs: usize,
    pub min_outputs: usize,
    /// [`UNBOUNDED`] when the last output is variadic.
    pub max_outputs: usize,
}

impl OpSchema {
    /// The allowed types of type parameter `name`.
    pub fn allowed(&self, name: &str) -> Option<&[String]> {
        self.type_constraints
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_slice())
    }
}

/// Positions of one (domain, op) in the kernel and schema vectors.
#[derive(Debug, Default, Clone)]
struct OpIndex {
    /// Per provider (`Ep as usize`), its rows of the op.
    kernels: [Range<usize>; Ep::ALL.len()],
    schemas: Range<usize>,
}

/// One release's data. Built by [`format::parse`]; lookups are hash-map based, by interned
/// (domain, op).
#[derive(Debug)]
pub struct KernelTable {
    release: ReleaseInfo,
    opsets: BTreeMap<String, i64>,
    memory_sources: BTreeMap<String, String>,
    typesets: BTreeMap<String, Vec<String>>,
    /// Canonical order: provider name, domain, op, then rows as the file lists them.
    kernels: Vec<KernelDef>,
    /// Sorted by domain, op, then since ascending.
    schemas: Vec<OpSchema>,
    index: FxHashMap<(Sym, Sym), OpIndex>,
    /// `release.ort`'s major and minor, parsed once (asked per node by transformers).
    version: Option<(u64, u64)>,
}

/// Maps ORT's `""` to `ai.onnx`.
pub fn normalize_domain(domain: &str) -> &str {
    if domain.is_empty() {
        ONNX_DOMAIN
    } else {
        domain
    }
}

impl KernelTable {
    fn new(
        release: ReleaseInfo,
        opsets: BTreeMap<String, i64>,
        memory_sources: BTreeMap<String, String>,
        typesets: BTreeMap<String, Vec<String>>,
        mut kernels: Vec<KernelDef>,
        mut schemas: Vec<OpSchema>,
    ) -> KernelTable {
        // Stable sorts: rows keep the file's order within one (provider, domain, op).
        kernels
            .sort_by(|a, b| (a.ep.name(), &a.domain, &a.op).cmp(&(b.ep.name(), &b.domain, &b.op)));
        schemas.sort_by(|a, b| (&a.domain, &a.name, a.since).cmp(&(&b.domain, &b.name, b.since)));
        let mut index: FxHashMap<(Sym, Sym), OpIndex> = FxHashMap::default();
        let mut start = 0;
        while start < kernels.len() {
            let k = &kernels[start];
            let end = start
                + kernels[start..]
                    .iter()
                    .take_while(|x| x.ep == k.ep && x.domain == k.domain && x.op == k.op)
                    .count();
            let entry = index
                .entry((Sym::new(&k.domain), Sym::new(&k.op)))
                .or_default();
            entry.kernels[k.ep as usize] = start..end;
            start = end;
        }
        let mut start = 0;
        while start < schemas.len() {
            let s = &schemas[start];
            let end = start
                + schemas[start..]
                    .iter()
                    .take_while(|x| x.domain == s.domain && x.name == s.name)
                    .count();
            index
                .entry((Sym::new(&s.domain), Sym::new(&s.name)))
                .or_default()
                .schemas = start..end;
            start = end;
        }
        KernelTable {
            version: Self::parse_version(&release.ort),
            release,
            opsets,
            memory_sources,
            typesets,
            kernels,
            schemas,
            index,
        }
    }

    /// `ort`'s major and minor when every part of it is a number.
    fn parse_version(ort: &str) -> Option<(u64, u64)> {
        let mut parts = ort.split('.').map(|c| c.parse::<u64>().ok());
        let (Some(Some(a)), Some(Some(b))) = (parts.next(), parts.next()) else {
            return None;
        };
        parts.all(|c| c.is_some()).then_some((a, b))
    }

    fn op_index(&self, domain: &str, op: &str) -> Option<&OpIndex> {
        // A name never interned is in no table.
        self.op_index_of(Sym::get(normalize_domain(domain))?, Sym::get(op)?)
    }

    fn op_index_of(&self, domain: Sym, op: Sym) -> Option<&OpIndex> {
        let domain = if domain.is_empty() {
            Sym::AI_ONNX
        } else {
            domain
        };
        self.index.get(&(domain, op))
    }

    /// Provenance of the table.
    pub fn release(&self) -> &ReleaseInfo {
        &self.release
    }

    /// Whether this table's release is `major.minor` or later (ORT changes behaviour between
    /// minor releases; patch releases never did for anything the placer simulates).
    pub fn release_at_least(&self, major: u64, minor: u64) -> bool {
        self.version.is_some_and(|v| v >= (major, minor))
    }

    /// Highest opset ORT accepts for `domain` (`""` and `ai.onnx` both mean ONNX).
    pub fn max_opset(&self, domain: &str) -> Option<i64> {
        self.opsets.get(normalize_domain(domain)).copied()
    }

    /// Highest accepted opset per domain.
    pub fn opsets(&self) -> &BTreeMap<String, i64> {
        &self.opsets
    }

    /// The `[memory]` section: source key -> description.
    pub fn memory_sources(&self) -> &BTreeMap<String, String> {
        &self.memory_sources
    }

    /// The named type sets of the file.
    pub fn typesets(&self) -> &BTreeMap<String, Vec<String>> {
        &self.typesets
    }

    /// Registrations of `op` for `ep`, in the file's order (since descending). Empty when none.
    pub fn kernels(&self, ep: Ep, domain: &str, op: &str) -> &[KernelDef] {
        match self.op_index(domain, op) {
            Some(ix) => &self.kernels[ix.kernels[ep as usize].clone()],
            None => &[],
        }
    }

    /// [`KernelTable::kernels`] by interned names (the session's; no string is hashed).
    pub fn kernels_of(&self, ep: Ep, domain: Sym, op: Sym) -> &[KernelDef] {
        match self.op_index_of(domain, op) {
            Some(ix) => &self.kernels[ix.kernels[ep as usize].clone()],
            None => &[],
        }
    }

    /// Every version of the op's schema, sorted by since ascending. Empty when unknown.
    pub fn schemas(&self, domain: &str, op: &str) -> &[OpSchema] {
        match self.op_index(domain, op) {
            Some(ix) => &self.schemas[ix.schemas.clone()],
            None => &[],
        }
    }

    /// [`KernelTable::schemas`] by interned names.
    pub fn schemas_of(&self, domain: Sym, op: Sym) -> &[OpSchema] {
        match self.op_index_of(domain, op) {
            Some(ix) => &self.schemas[ix.schemas.clone()],
            None => &[],
        }
    }

    /// [`KernelTable::schema`] by interned names.
    pub fn schema_of(&self, domain: Sym, op: Sym, opset: i64) -> Option<&OpSchema> {
        self.schemas_of(domain, op)
            .iter()
            .rev()
            .find(|s| s.since <= opset)
    }

    /// The schema a node of `op` resolves to under `opset` for its domain: the one with the
    /// greatest since-version not above `opset` (ORT's registry lookup). A deprecated schema is
    /// returned as such; ORT treats a node resolving to it as having no schema, so callers check
    /// [`OpSchema::deprecated`].
    pub fn schema(&self, domain: &str, op: &str, opset: i64) -> Option<&OpSchema> {
        self.schemas(domain, op)
            .iter()
            .rev()
            .find(|s| s.since <= opset)
    }

    /// Every kernel registration, in canonical order.
    pub fn iter_kernels(&self) -> impl Iterator<Item = &KernelDef> {
        self.kernels.iter()
    }

    /// Every schema, sorted by domain, op and since.
    pub fn iter_schemas(&self) -> impl Iterator<Item = &OpSchema> {
        self.schemas.iter()
    }
}
