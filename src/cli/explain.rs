//! `cargo onnx-lint explain <RULE>`: a rule's page.

use super::output::out;
use super::{EXIT_ERROR, EXIT_OK};
use crate::rules;

pub fn run(key: &str) -> u8 {
    match rules::find(key) {
        Some(rule) => {
            out(rule.page().trim_end());
            EXIT_OK
        }
        None => {
            let known: Vec<String> = rules::all()
                .iter()
                .map(|r| format!("  {}  {}", r.code, r.name))
                .collect();
            eprintln!(
                "error: no rule `{key}`; the rules are:\n{}",
                known.join("\n")
            );
            EXIT_ERROR
        }
    }
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
