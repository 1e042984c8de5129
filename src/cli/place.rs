//! `cargo onnx-lint place <MODEL>...`: what ORT would do with a model.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::output::{self, out};
use super::{EXIT_ERROR, EXIT_OK, EpArg, Format, OptLevelArg, SharedArgs};
use crate::memcpy::Direction;
use crate::model;
use crate::placer::{self, Decision, OptLevel, Options, Outcome, Placement};
use crate::tables::{self, Ep};

pub fn options(shared: &SharedArgs) -> Options {
    Options {
        eps: match shared.ep.unwrap_or(EpArg::Cuda) {
            EpArg::Cuda => vec![Ep::Cuda, Ep::Cpu],
            EpArg::Cpu => vec![Ep::Cpu],
        },
        level: match shared.opt_level.unwrap_or(OptLevelArg::All) {
            OptLevelArg::Disable => OptLevel::Disable,
            OptLevelArg::Basic => OptLevel::Basic,
            OptLevelArg::Extended => OptLevel::Extended,
            OptLevelArg::All => OptLevel::All,
        },
    }
}

/// Resolves `--ort` (default: the newest bundled release).
pub fn release(shared: &SharedArgs) -> Result<&'static tables::Bundled, tables::TableError> {
    match &shared.ort {
        Some(spec) => tables::resolve(spec),
        None => Ok(tables::newest()),
    }
}

pub fn run(models: &[PathBuf], shared: &SharedArgs) -> u8 {
    let bundled = match release(shared) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}", output::render_report(&miette::Report::new(e)));
            return EXIT_ERROR;
        }
    };
    let table = bundled.table();
    let options = options(shared);
    let mut exit = EXIT_OK;
    let mut records = Vec::new();
    for (i, path) in models.iter().enumerate() {
        // Loaded and placed within the whole-model budget (`cli/budget.rs`).
        let (owned, opts) = (path.clone(), options.clone());
        let placed = super::budget::bounded(path, move || {
            let m = model::load(&owned)?;
            let p = placer::place(&m, table, &opts);
            Ok((m, p))
        });
        let (m, p) = match placed {
            Ok(mp) => mp,
            Err(e) => {
                eprintln!("{}", output::render_report(&miette::Report::new(e)));
                exit = EXIT_ERROR;
                continue;
            }
        };
        match shared.format {
            Format::Json => records.push(placement_json(&path.display().to_string(), &p)),
            _ => out(&placement_human(&path.display().to_string(), &p)),
        }
        if i + 1 == models.len() {
            // The process ends soon after the last model: freeing its graph (hundreds of
            // thousands of small allocations on a large model, ~5% of `place`) is wasted work.
            // Earlier models are dropped so that memory stays bounded over many models.
            std::mem::forget((m, p));
        }
    }
    if shared.format == Format::Json {
        let v = if records.len() == 1 {
            records.pop().unwrap_or(Value::Null)
        } else {
            Value::Array(records)
        };
        out(&serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    exit
}

/// Every live node of every graph with its provider, in the order ORT's "Node placements" log
/// prints them (`VerifyEachNodeIsAssignedToAnEp`): each graph's subgraphs before the graph
/// itself (it recurses while it walks the nodes), and within a graph one block per provider,
/// the blocks in reverse order of each provider's first node (ORT groups them in an
/// `unordered_map`, whose libstdc++ iteration runs newest key first; checked with the oracle).
fn node_placements(p: &Placement) -> Vec<(&str, Ep)> {
    fn visit<'p>(p: &'p Placement, gi: usize, out: &mut Vec<(&'p str, Ep)>) {
        let mut blocks: Vec<(Ep, Vec<&'p str>)> = Vec::new();
        for (_, n) in p.session.graphs[gi].live_nodes() {
            if let Some(ep) = n.ep {
                match blocks.iter_mut().find(|(e, _)| *e == ep) {
                    Some((_, names)) => names.push(n.name.as_str()),
                    None => blocks.push((ep, vec![n.name.as_str()])),
                }
            }
            for (_, sg) in &n.subgraphs {
                visit(p, *sg, out);
            }
        }
        for (ep, names) in blocks.into_iter().rev() {
            out.extend(names.into_iter().map(|n| (n, ep)));
        }
    }
    let mut nodes = Vec::new();
    if !p.session.graphs.is_empty() {
        visit(p, 0, &mut nodes);
    }
    nodes
}

/// The `place --format json` record of `design.md`, with the oracle's field names.
pub fn placement_json(model: &str, p: &Placement) -> Value {
    let (session, error) = match &p.outcome {
        Outcome::Ok => ("ok", Value::Null),
        Outcome::LoadFail(e)
        | Outcome::NoKernel(e)
        | Outcome::InitFail(e)
        | Outcome::PartitionFail(e) => ("fail", Value::String(e.clone())),
    };
    let mut placement = Map::new();
    let mut all_nodes_on = Value::Null;
    if p.outcome.placed() {
        let nodes = node_placements(p);
        let first = nodes.first().map(|(_, ep)| *ep);
        if let Some(ep) = first.filter(|ep| nodes.iter().all(|(_, e)| e == ep)) {
            all_nodes_on = json!({ ep.name(): nodes.len() });
        } else {
            // A name logged twice keeps the later line's provider, as the oracle's parser does.
            for (name, ep) in &nodes {
                placement.insert(name.to_string(), Value::String(ep.name().into()));
            }
        }
    }
    let mut memcpy = Map::new();
    for (g, n) in p.memcpy_counts() {
        memcpy.insert(g, json!(n));
    }
    json!({
        "model": model,
        "ort": p.ort,
        "level": p.level.name(),
        "session": session,
        "error": error,
        "placement": placement,
        "all_nodes_on": all_nodes_on,
        "memcpy": memcpy,
        "copies": p.copies.iter().map(|c| c.log_line()).collect::<Vec<_>>(),
    })
}

/// A summary per graph: nodes per provider, copies with value, producer and consumers.
pub fn placement_human(model: &str, p: &Placement) -> String {
    let mut s = format!("{model}: ORT {} at level {}", p.ort, p.level.name());
    match &p.outcome {
        Outcome::Ok => s += ": session ok\n",
        Outcome::LoadFail(e) | Outcome::NoKernel(e) | Outcome::PartitionFail(e) => {
            s += &format!(": session creation fails\n  {e}\n");
            return s;
        }
        // Nodes are placed and copies inserted before the kernel refuses its node.
        Outcome::InitFail(e) => s += &format!(": session creation fails after placement\n  {e}\n"),
    }
    for (gi, g) in p.session.graphs.iter().enumerate() {
        let (mut cuda, mut cpu, mut inserted) = (0, 0, 0);
        for (ni, n) in g.live_nodes() {
            match (n.ep, p.decisions.get(&(gi, ni))) {
                (_, Some(Decision::Inserted)) => inserted += 1,
                (Some(Ep::Cuda), _) => cuda += 1,
                (Some(Ep::Cpu), _) => cpu += 1,
                _ => {}
            }
        }
        let copies: Vec<_> = p.copies.iter().filter(|c| c.graph == gi).collect();
        s += &format!(
            "  graph `{}`: {cuda} nodes on CUDA, {cpu} on CPU, {} cop{}\n",
            g.name,
            copies.len(),
            if copies.len() == 1 { "y" } else { "ies" }
        );
        let _ = inserted;
        for c in copies {
            let dir = match c.direction {
                Direction::FromHost => "MemcpyFromHost after",
                Direction::ToHost => "MemcpyToHost before",
            };
            s += &format!("    {dir} `{}`\n", c.value);
        }
    }
    s
}
