//! `cargo onnx-lint explain <RULE>`: a rule's page.

use serde_json::json;

use super::output::out;
use super::settings::UsageError;
use super::{EXIT_OK, Format};
use crate::config;
use crate::rules;

pub fn run(key: &str) -> Result<u8, miette::Report> {
    match rules::find(key) {
        Some(rule) => {
            out(rule.page().trim_end());
            Ok(EXIT_OK)
        }
        None => {
            let hint =
                config::suggest(key, rules::all().into_iter().flat_map(|r| [r.code, r.name]))
                    .map(|c| format!("did you mean `{c}`? "))
                    .unwrap_or_default();
            let known: Vec<String> = rules::all()
                .iter()
                .map(|r| format!("  {}  {}", r.code, r.name))
                .collect();
            Err(UsageError::new(
                format!("no rule `{key}`"),
                Some(format!("{hint}the rules are:\n{}", known.join("\n"))),
            )
            .into())
        }
    }
}

/// `cargo onnx-lint rules` (and `explain` without a rule): every rule with its code, name,
/// default level and what it flags.
pub fn list(format: Format) -> Result<u8, miette::Report> {
    if format == Format::Json {
        let v: Vec<_> = rules::all()
            .iter()
            .map(|r| json!({"code": r.code, "name": r.name, "default": r.default.name(), "summary": r.summary}))
            .collect();
        out(&serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(EXIT_OK);
    }
    let width = rules::all().iter().map(|r| r.name.len()).max().unwrap_or(0);
    for r in rules::all() {
        out(&format!(
            "{}  {:<width$}  {:<5}  {}",
            r.code,
            r.name,
            r.default.name(),
            r.summary
        ));
    }
    out("
`cargo onnx-lint explain <CODE|NAME>` prints a rule's page.");
    Ok(EXIT_OK)
}

/// `rules/README.md`: the index of rules.
pub fn index() -> String {
    let mut s = String::from(
        "# Rules\n\nGenerated from the rules' doc comments by `ONNX_LINT_BLESS=1 cargo test --test it docs`; \
         do not edit by hand.\n\n| code | name | default | what it flags |\n|---|---|---|---|\n",
    );
    for r in rules::all() {
        s.push_str(&format!(
            "| [{}]({}) | {} | {} | {} |\n",
            r.code,
            r.file_name(),
            r.name,
            r.default,
            r.summary
        ));
    }
    s
}
