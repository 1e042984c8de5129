//! `rules/<CODE>-<name>.md` and `rules/README.md` are generated from the rules' doc comments;
//! this test regenerates them and fails on any difference (`ONNX_LINT_BLESS=1` rewrites them).
//! It also checks that every rule's doc has the fixed sections, in order.

use onnx_lint::rules;

use crate::support;

const SECTIONS: [&str; 5] = [
    "## What it does",
    "## Why is this bad?",
    "## Example",
    "## How to fix",
    "## Fix safety",
];

#[test]
fn every_rule_doc_has_the_fixed_sections_in_order() {
    for r in rules::all() {
        let doc = r.doc_text();
        let mut at = 0;
        for s in SECTIONS {
            let Some(pos) = doc[at..].find(s) else {
                panic!(
                    "{} {}: section `{s}` missing or out of order",
                    r.code, r.name
                );
            };
            at += pos + s.len();
        }
    }
}

#[test]
fn rule_pages_are_generated_from_the_doc_comments() {
    let dir = support::repo().join("rules");
    let mut expected: Vec<(String, String)> = rules::all()
        .iter()
        .map(|r| (r.file_name(), r.page()))
        .collect();
    expected.push(("README.md".into(), onnx_lint::cli::explain::index()));
    if std::env::var_os("ONNX_LINT_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &expected {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    for (name, text) in &expected {
        let on_disk = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            &on_disk == text,
            "rules/{name} is stale: run `ONNX_LINT_BLESS=1 cargo test --test it docs`"
        );
    }
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        files,
        expected.len(),
        "rules/ holds a page for a rule that does not exist"
    );
}

#[test]
fn explain_prints_the_page_by_code_or_name() {
    let by_code = support::run_in(&support::repo(), &["explain", "OL101"]);
    let by_name = support::run_in(&support::repo(), &["explain", "registration-gap"]);
    assert_eq!(by_code.code, 0);
    assert_eq!(by_code.stdout, by_name.stdout);
    assert!(by_code.stdout.starts_with("# OL101 registration-gap"));
    let unknown = support::run_in(&support::repo(), &["explain", "OL999"]);
    assert_eq!(unknown.code, 2);
    assert!(unknown.stderr.contains("OL301  shape-fed-reshape"));
}
