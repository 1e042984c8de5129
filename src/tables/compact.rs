//! A compact binary form of a parsed table, embedded next to the TOML so that loading a release
//! costs a decode (about 1 ms) instead of a TOML parse (15–40 ms; `cargo bench --bench tables`).
//!
//! The TOML stays the source of truth (style.md's "escape hatch"): `kernel-tables/ort-<v>.bin`
//! is [`encode`] of the parsed `ort-<v>.toml`, and `tests/it/tables.rs` regenerates every file and
//! fails on any byte of difference (`ONNX_LINT_BLESS=1 cargo test --test it tables` rewrites them)
//! and checks that [`decode`] gives back a table that writes the TOML's exact bytes.
//!
//! Layout: a magic and format version, then a string table (every distinct string once), then
//! the table's fields in declaration order. Integers are LEB128 varints (signed ones zig-zagged);
//! strings are indices into the string table.

use std::collections::{BTreeMap, HashMap};

use super::{
    Ep, FormalParam, KernelDef, KernelTable, OpSchema, ParamOption, ReleaseInfo, TypeConstraints,
};

const MAGIC: &[u8; 8] = b"OLKT\x00\x00\x00\x01";

/// The compact bytes of `table`. Deterministic: the same table gives the same bytes.
pub fn encode(table: &KernelTable) -> Vec<u8> {
    let mut e = Encoder::default();
    let r = &table.release;
    for s in [&r.ort, &r.wheel, &r.sha256, &r.generator, &r.date] {
        e.str(s);
    }
    e.uint(table.opsets.len());
    for (d, v) in &table.opsets {
        e.str(d);
        e.int(*v);
    }
    e.uint(table.memory_sources.len());
    for (k, v) in &table.memory_sources {
        e.str(k);
        e.str(v);
    }
    e.uint(table.typesets.len());
    for (k, v) in &table.typesets {
        e.str(k);
        e.strs(v);
    }
    e.uint(table.kernels.len());
    for k in &table.kernels {
        // The provider's position in `Ep::ALL` (its discriminant).
        e.uint(k.ep as usize);
        e.str(&k.domain);
        e.str(&k.op);
        e.int(k.since);
        e.opt_int(k.until);
        e.types(&k.types);
        e.uints(&k.cpu_inputs);
        e.uints(&k.cpu_outputs);
        match &k.mem_source {
            None => e.uint(0),
            Some(s) => {
                e.uint(1);
                e.str(s);
            }
        }
    }
    e.uint(table.schemas.len());
    for s in &table.schemas {
        e.str(&s.domain);
        e.str(&s.name);
        e.int(s.since);
        e.uint(usize::from(s.deprecated));
        for params in [&s.inputs, &s.outputs] {
            e.uint(params.len());
            for p in params {
                e.str(&p.name);
                e.str(&p.type_str);
                e.uint(match p.option {
                    ParamOption::Single => 0,
                    ParamOption::Optional => 1,
                    ParamOption::Variadic => 2,
                });
                e.uint(usize::from(p.homogeneous));
                e.uint(p.min_arity);
            }
        }
        e.types(&s.type_constraints);
        for n in [s.min_inputs, s.max_inputs, s.min_outputs, s.max_outputs] {
            e.uint(n);
        }
    }
    let mut out = MAGIC.to_vec();
    put_uint(&mut out, e.strings.len() as u64);
    for s in &e.strings {
        put_uint(&mut out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
    out.extend_from_slice(&e.body);
    out
}

#[derive(Default)]
struct Encoder {
    strings: Vec<String>,
    ids: HashMap<String, usize>,
    body: Vec<u8>,
}

fn put_uint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

impl Encoder {
    fn uint(&mut self, v: usize) {
        put_uint(&mut self.body, v as u64);
    }
    fn int(&mut self, v: i64) {
        put_uint(&mut self.body, ((v << 1) ^ (v >> 63)) as u64);
    }
    fn opt_int(&mut self, v: Option<i64>) {
        match v {
            None => self.uint(0),
            Some(v) => {
                self.uint(1);
                self.int(v);
            }
        }
    }
    fn str(&mut self, s: &str) {
        let id = match self.ids.get(s) {
            Some(&id) => id,
            None => {
                let id = self.strings.len();
                self.strings.push(s.to_string());
                self.ids.insert(s.to_string(), id);
                id
            }
        };
        self.uint(id);
    }
    fn strs(&mut self, v: &[String]) {
        self.uint(v.len());
        for s in v {
            self.str(s);
        }
    }
    fn uints(&mut self, v: &[usize]) {
        self.uint(v.len());
        for &n in v {
            self.uint(n);
        }
    }
    fn types(&mut self, v: &[(String, Vec<String>)]) {
        self.uint(v.len());
        for (name, allowed) in v {
            self.str(name);
            self.strs(allowed);
        }
    }
}

/// The table encoded in `bytes`, or why it cannot be read.
pub fn decode(bytes: &[u8]) -> Result<KernelTable, String> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("not a compact kernel table (bad magic or format version)")?;
    let mut d = Decoder {
        bytes: rest,
        strings: Vec::new(),
        types_seen: HashMap::new(),
    };
    let n = d.len()?;
    let mut strings = Vec::with_capacity(n);
    for _ in 0..n {
        let len = d.len()?;
        let raw = d.take(len)?;
        strings.push(std::str::from_utf8(raw).map_err(|e| e.to_string())?);
    }
    d.strings = strings;
    let release = ReleaseInfo {
        ort: d.string()?,
        wheel: d.string()?,
        sha256: d.string()?,
        generator: d.string()?,
        date: d.string()?,
    };
    let mut opsets = BTreeMap::new();
    for _ in 0..d.len()? {
        opsets.insert(d.string()?, d.int()?);
    }
    let mut memory_sources = BTreeMap::new();
    for _ in 0..d.len()? {
        memory_sources.insert(d.string()?, d.string()?);
    }
    let mut typesets = BTreeMap::new();
    for _ in 0..d.len()? {
        typesets.insert(d.string()?, d.strings()?);
    }
    let n = d.len()?;
    let mut kernels = Vec::with_capacity(n);
    for _ in 0..n {
        kernels.push(KernelDef {
            ep: {
                let tag = d.uint()?;
                *Ep::ALL
                    .get(tag)
                    .ok_or_else(|| format!("bad provider tag {tag}"))?
            },
            domain: d.string()?,
            op: d.string()?,
            since: d.int()?,
            until: d.opt_int()?,
            types: d.types()?,
            cpu_inputs: d.uints()?,
            cpu_outputs: d.uints()?,
            mem_source: match d.uint()? {
                0 => None,
                _ => Some(d.string()?),
            },
        });
    }
    let n = d.len()?;
    let mut schemas = Vec::with_capacity(n);
    for _ in 0..n {
        let domain = d.string()?;
        let name = d.string()?;
        let since = d.int()?;
        let deprecated = d.uint()? != 0;
        let inputs = d.params()?;
        let outputs = d.params()?;
        let type_constraints = d.types()?;
        schemas.push(OpSchema {
            domain,
            name,
            since,
            deprecated,
            inputs,
            outputs,
            type_constraints,
            min_inputs: d.uint()?,
            max_inputs: d.uint()?,
            min_outputs: d.uint()?,
            max_outputs: d.uint()?,
        });
    }
    if !d.bytes.is_empty() {
        return Err(format!("{} trailing bytes", d.bytes.len()));
    }
    Ok(KernelTable::new(
        release,
        opsets,
        memory_sources,
        typesets,
        kernels,
        schemas,
    ))
}

struct Decoder<'a> {
    bytes: &'a [u8],
    strings: Vec<&'a str>,
    /// Type constraint lists decoded so far, by their encoded bytes: most registrations share
    /// one of a few hundred lists, decoded once.
    types_seen: HashMap<&'a [u8], TypeConstraints>,
}

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err("truncated".into());
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, tail) = self.bytes.split_first().ok_or("truncated")?;
            self.bytes = tail;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    fn uint(&mut self) -> Result<usize, String> {
        usize::try_from(self.u64()?).map_err(|e| e.to_string())
    }
    /// A count: never more than the bytes left (each element takes at least one).
    fn len(&mut self) -> Result<usize, String> {
        let n = self.uint()?;
        if n > self.bytes.len() {
            return Err("count exceeds the data".into());
        }
        Ok(n)
    }
    fn int(&mut self) -> Result<i64, String> {
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    fn opt_int(&mut self) -> Result<Option<i64>, String> {
        Ok(match self.uint()? {
            0 => None,
            _ => Some(self.int()?),
        })
    }
    fn string(&mut self) -> Result<String, String> {
        let id = self.uint()?;
        self.strings
            .get(id)
            .map(|s| s.to_string())
            .ok_or_else(|| format!("string index {id} out of range"))
    }
    fn strings(&mut self) -> Result<Vec<String>, String> {
        let n = self.len()?;
        (0..n).map(|_| self.string()).collect()
    }
    fn uints(&mut self) -> Result<Vec<usize>, String> {
        let n = self.len()?;
        (0..n).map(|_| self.uint()).collect()
    }
    fn types(&mut self) -> Result<TypeConstraints, String> {
        // Skip over the list first: its bytes are the key of a list already decoded.
        let start = self.bytes;
        let n = self.len()?;
        for _ in 0..n {
            self.uint()?;
            let m = self.len()?;
            for _ in 0..m {
                self.uint()?;
            }
        }
        let span = &start[..start.len() - self.bytes.len()];
        if let Some(t) = self.types_seen.get(span) {
            return Ok(t.clone());
        }
        let rest = std::mem::replace(&mut self.bytes, span);
        let n = self.len()?;
        let list: Result<Vec<(String, Vec<String>)>, String> = (0..n)
            .map(|_| Ok((self.string()?, self.strings()?)))
            .collect();
        self.bytes = rest;
        let list: TypeConstraints = list?.into();
        self.types_seen.insert(span, list.clone());
        Ok(list)
    }
    fn params(&mut self) -> Result<Vec<FormalParam>, String> {
        let n = self.len()?;
        (0..n)
            .map(|_| {
                Ok(FormalParam {
                    name: self.string()?,
                    type_str: self.string()?,
                    option: match self.uint()? {
                        0 => ParamOption::Single,
                        1 => ParamOption::Optional,
                        2 => ParamOption::Variadic,
                        other => return Err(format!("bad parameter option {other}")),
                    },
                    homogeneous: self.uint()? != 0,
                    min_arity: self.uint()?,
                })
            })
            .collect()
    }
}
