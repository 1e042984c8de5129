//! The attributes of every op schema a release bundles (`kernel-tables/attributes/ort-<v>.txt`,
//! written by `tools/kernel-tables/attributes.py` from ORT's own schema registry).
//!
//! ORT verifies each node's attributes against its schema when it loads a model (ONNX's
//! `OpSchema::Verify`): an undeclared attribute fails the load with "Unrecognized attribute", a
//! missing required one with "Required attribute ... is missing".

use crate::sym::SymMap as HashMap;

use crate::sym::Sym;

/// The declared attributes of one schema version: (name, required).
type Declared = Vec<(String, bool)>;
/// (domain, op) → (since, attributes).
type ByOp = HashMap<(Sym, Sym), Vec<(i64, Declared)>>;

/// Attributes per (domain, op, since-version).
#[derive(Debug, Default)]
pub struct SchemaAttributes {
    /// (domain, op) → (since, attributes), by interned names.
    map: ByOp,
    len: usize,
}

/// What `OpSchema::Verify` finds wrong with a node's attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeError {
    /// The schema does not declare the attribute.
    Unrecognized(String),
    /// A required attribute is absent.
    MissingRequired(String),
}

impl SchemaAttributes {
    /// Parses the text form; malformed lines are skipped (the file is generated and checked by
    /// `tests/it/tables.rs`).
    pub fn parse(text: &str) -> Self {
        let mut map = ByOp::default();
        let mut len = 0;
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((head, attrs)) = line.split_once(':') else {
                continue;
            };
            let mut parts = head.split(' ');
            let (Some(domain), Some(op), Some(since)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(since) = since.parse::<i64>() else {
                continue;
            };
            let attrs = attrs
                .split_whitespace()
                .map(|a| match a.strip_suffix('!') {
                    Some(name) => (name.to_string(), true),
                    None => (a.to_string(), false),
                })
                .collect();
            let versions = map.entry((Sym::new(domain), Sym::new(op))).or_default();
            match versions.iter_mut().find(|(v, _)| *v == since) {
                Some(slot) => slot.1 = attrs,
                None => {
                    versions.push((since, attrs));
                    len += 1;
                }
            }
        }
        SchemaAttributes { map, len }
    }

    /// Number of schema versions described.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no schema is described.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The declared attributes of a schema version (`None` when the file does not describe it).
    pub fn get(&self, domain: &str, op: &str, since: i64) -> Option<&[(String, bool)]> {
        // A name never interned is described by no file.
        self.get_of(Sym::get(domain)?, Sym::get(op)?, since)
    }

    /// [`SchemaAttributes::get`] by interned names.
    pub fn get_of(&self, domain: Sym, op: Sym, since: i64) -> Option<&[(String, bool)]> {
        self.map
            .get(&(domain, op))?
            .iter()
            .find(|(v, _)| *v == since)
            .map(|(_, attrs)| attrs.as_slice())
    }

    /// Verifies a node's attribute names as `OpSchema::Verify` does (names starting with `__`
    /// are internal and never checked). `None` when the schema is not described or all is well.
    pub fn verify<'a>(
        &self,
        domain: &str,
        op: &str,
        since: i64,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Option<AttributeError> {
        self.verify_of(Sym::get(domain)?, Sym::get(op)?, since, names)
    }

    /// [`SchemaAttributes::verify`] by interned names.
    pub fn verify_of<'a>(
        &self,
        domain: Sym,
        op: Sym,
        since: i64,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Option<AttributeError> {
        let declared = self.get_of(domain, op, since)?;
        let names: Vec<&str> = names.into_iter().collect();
        for name in &names {
            if name.starts_with("__") {
                continue;
            }
            if !declared.iter().any(|(d, _)| d == name) {
                return Some(AttributeError::Unrecognized((*name).to_string()));
            }
        }
        declared
            .iter()
            .find(|(d, required)| *required && !names.contains(&d.as_str()))
            .map(|(d, _)| AttributeError::MissingRequired(d.clone()))
    }
}
