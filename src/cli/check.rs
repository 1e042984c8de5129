//! The default command: lint model files and folders.

use std::path::{Path, PathBuf};

use miette::Diagnostic;

use super::output::{self, ErrorJson, ExternalFileJson, ModelSummaryJson, ProblemJson};
use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, Format, SharedArgs};
use crate::model::{self, LoadError, Model, ProblemLevel};

/// Expands folders into the `*.onnx` files below them, sorted; files are taken as given.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = walkdir::WalkDir::new(p)
                .follow_links(false)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "onnx")
                })
                .map(|e| e.into_path())
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

pub fn run(paths: &[PathBuf], shared: &SharedArgs) -> u8 {
    if paths.is_empty() {
        eprintln!(
            "error: no model given; pass model files or folders (cargo workspace discovery is not available yet)"
        );
        return EXIT_ERROR;
    }
    let files = match expand_paths(paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{}", output::render_report(&miette::Report::new(e)));
            return EXIT_ERROR;
        }
    };
    if files.is_empty() {
        eprintln!("error: no `*.onnx` files under {}", join_paths(paths));
        return EXIT_ERROR;
    }
    let mut exit = EXIT_OK;
    let mut json = Vec::new();
    for file in &files {
        let loaded = model::load(file);
        let worst = match &loaded {
            Err(_) => EXIT_ERROR,
            Ok(m) if m.problems.iter().any(|p| p.level == ProblemLevel::Error) => EXIT_FINDINGS,
            Ok(_) => EXIT_OK,
        };
        exit = exit.max(worst);
        match shared.format {
            Format::Json => json.push(summary_json(file, &loaded)),
            _ => print_human(file, loaded),
        }
    }
    if shared.format == Format::Json {
        let text = if json.len() == 1 {
            serde_json::to_string_pretty(&json[0])
        } else {
            serde_json::to_string_pretty(&json)
        };
        match text {
            Ok(t) => output::out(&t),
            Err(e) => {
                eprintln!("error: cannot serialise the summary: {e}");
                return EXIT_ERROR;
            }
        }
    }
    exit
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_human(file: &Path, loaded: Result<Model, LoadError>) {
    let m = match loaded {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{}", output::render_report(&miette::Report::new(e)));
            return;
        }
    };
    output::out(&summary_line(&m));
    for p in &m.problems {
        let level = match p.level {
            ProblemLevel::Error => "error",
            ProblemLevel::Warning => "warning",
        };
        let node = p
            .node
            .map(|n| format!(" (node `{}`)", m.node(n).name))
            .unwrap_or_default();
        output::out(&format!("  {level}[{}]: {}{node}", p.code, p.message));
    }
    let _ = file;
}

/// `path: ir 8, opsets ai.onnx 17 + com.microsoft 1; 1234 nodes in 3 graphs; 56 initializers (12.3 MiB); external data: ...`
pub fn summary_line(m: &Model) -> String {
    let s = m.stats();
    let opsets = m
        .opsets
        .iter()
        .map(|(d, v)| format!("{d} {v}"))
        .collect::<Vec<_>>()
        .join(" + ");
    let mut line = format!(
        "{}: ir {}, opsets {}; {} nodes in {} graph{}",
        m.path.display(),
        m.proto.ir_version(),
        if opsets.is_empty() {
            "none".into()
        } else {
            opsets
        },
        s.nodes,
        s.graphs,
        if s.graphs == 1 { "" } else { "s" },
    );
    if s.functions > 0 {
        line += &format!(", {} local functions", s.functions);
    }
    line += &format!(
        "; {} initializers ({})",
        s.initializers,
        output::human_bytes(s.initializer_bytes)
    );
    if !s.external_files.is_empty() {
        let files = s
            .external_files
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        line += &format!(
            "; external data: {} in {} file{} ({files})",
            output::human_bytes(s.external_bytes),
            s.external_files.len(),
            if s.external_files.len() == 1 { "" } else { "s" }
        );
    }
    line
}

fn summary_json(file: &Path, loaded: &Result<Model, LoadError>) -> ModelSummaryJson {
    match loaded {
        Err(e) => ModelSummaryJson {
            model: file.display().to_string(),
            ok: false,
            error: Some(ErrorJson {
                code: e.code().map(|c| c.to_string()).unwrap_or_default(),
                message: e.to_string(),
            }),
            ir_version: None,
            opsets: Default::default(),
            nodes: 0,
            graphs: 0,
            functions: 0,
            initializers: 0,
            initializer_bytes: 0,
            external_bytes: 0,
            external_files: Vec::new(),
            problems: Vec::new(),
        },
        Ok(m) => {
            let s = m.stats();
            ModelSummaryJson {
                model: file.display().to_string(),
                ok: !m.problems.iter().any(|p| p.level == ProblemLevel::Error),
                error: None,
                ir_version: Some(m.proto.ir_version()),
                opsets: m.opsets.iter().cloned().collect(),
                nodes: s.nodes,
                graphs: s.graphs,
                functions: s.functions,
                initializers: s.initializers,
                initializer_bytes: s.initializer_bytes,
                external_bytes: s.external_bytes,
                external_files: s
                    .external_files
                    .into_iter()
                    .map(|(location, tensors)| ExternalFileJson { location, tensors })
                    .collect(),
                problems: m
                    .problems
                    .iter()
                    .map(|p| ProblemJson {
                        level: match p.level {
                            ProblemLevel::Error => "error",
                            ProblemLevel::Warning => "warning",
                        },
                        code: p.code,
                        message: p.message.clone(),
                        node: p.node.map(|n| m.node(n).name.clone()),
                    })
                    .collect(),
            }
        }
    }
}
