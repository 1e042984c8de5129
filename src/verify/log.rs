//! ORT's verbose session-creation log, read back into what ORT actually did: which provider each
//! node went to, which copies it inserted, how many per graph.
//!
//! The line formats are those of `../shared/oracle/ortstub.py` (`parse_log`), which were checked
//! against real `onnxruntime-gpu` on an H200. Lines look like ORT's default sink writes them
//! (`<time> [V:onnxruntime:<id>, <file>:<line> <function>] <message>`); the live session's logger
//! writes them in the same shape (see [`format_line`]), so one parser reads both.

use std::collections::BTreeMap;

/// One execution provider's share of a graph's "Node placements" report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpBlock {
    pub ep: String,
    /// The count ORT printed in the header line.
    pub declared: usize,
    /// `(op type, node name)` as listed under the header.
    pub nodes: Vec<(String, String)>,
}

/// One "Node placements" report: ORT prints one per graph (subgraphs included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementReport {
    /// "All nodes placed on [EP]. Number of nodes: N" (no names are listed).
    All { ep: String, count: usize },
    /// "Node(s) placed on [EP]. Number of nodes: N", then one line per node, per provider.
    Split(Vec<EpBlock>),
}

/// What ORT logged while creating one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveLog {
    pub reports: Vec<PlacementReport>,
    /// Copies per graph, from ORT's "N Memcpy nodes are added to the graph G for EP" warning,
    /// in first-seen order.
    pub memcpy: Vec<(String, usize)>,
    /// "Add MemcpyFromHost after V for CUDAExecutionProvider", ... in log order.
    pub copies: Vec<String>,
    /// "CUDA kernel not found in registries for Op type: OP node name: NAME": `(op, name)`.
    pub no_cuda_kernel: Vec<(String, String)>,
    /// Nodes the CPU-preferred (shape subgraph) pass moved to the CPU.
    pub cpu_preferred: Vec<String>,
}

/// Formats one message from ORT's logging callback the way ORT's default sink prints it, so that
/// [`parse`] reads it. `severity` is ORT's letter (`V`, `I`, `W`, `E`, `F`).
pub fn format_line(severity: char, logid: &str, code_location: &str, message: &str) -> String {
    format!("[{severity}:onnxruntime:{logid}, {code_location}] {message}")
}

/// Removes ANSI colour sequences (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The message part of a sink line: what follows the first `] ` that closes the
/// `[severity:category:id, location]` prefix. Lines without such a prefix are returned whole.
fn split_line(line: &str) -> (&str, &str) {
    // The prefix is `[X:onnxruntime:...]`; find its closing bracket.
    if let Some(start) = line.find("[")
        && line[start..].get(2..3) == Some(":")
        && let Some(end) = line[start..].find("] ")
    {
        let end = start + end;
        return (&line[start + 1..end], &line[end + 2..]);
    }
    ("", line)
}

/// `"[EP]. Number of nodes: N"` after `prefix`, or `None`.
fn placed_on<'a>(message: &'a str, prefix: &str) -> Option<(&'a str, usize)> {
    let rest = message.trim_start().strip_prefix(prefix)?;
    let rest = rest.strip_prefix('[')?;
    let close = rest.find(']')?;
    let ep = &rest[..close];
    let n = rest[close..]
        .strip_prefix("]. Number of nodes: ")?
        .trim()
        .parse()
        .ok()?;
    Some((ep, n))
}

/// Reads ORT's verbose log (one message per line).
pub fn parse(text: &str) -> LiveLog {
    let mut log = LiveLog::default();
    // The provider block being listed, inside the current split report.
    let mut listing = false;
    for raw in text.lines() {
        let line = strip_ansi(raw);
        let (prefix, message) = split_line(&line);
        let in_verify = prefix.ends_with("VerifyEachNodeIsAssignedToAnEp");

        if in_verify && message.trim() == "Node placements" {
            listing = false;
            continue;
        }
        if let Some((ep, n)) = placed_on(message, "All nodes placed on ") {
            log.reports.push(PlacementReport::All {
                ep: ep.to_string(),
                count: n,
            });
            listing = false;
            continue;
        }
        if let Some((ep, n)) = placed_on(message, "Node(s) placed on ") {
            let block = EpBlock {
                ep: ep.to_string(),
                declared: n,
                nodes: Vec::new(),
            };
            // A new report starts unless the last one is a split report still being listed.
            match log.reports.last_mut() {
                Some(PlacementReport::Split(blocks)) if listing => blocks.push(block),
                _ => log.reports.push(PlacementReport::Split(vec![block])),
            }
            listing = true;
            continue;
        }
        if in_verify && listing {
            // "  OpType (node name)": two spaces, then the op, then the name in parentheses.
            let body = message.trim_end();
            if let Some(rest) = body.strip_prefix("  ")
                && let Some(open) = rest.find(" (")
                && rest.ends_with(')')
            {
                let op = rest[..open].trim().to_string();
                let name = rest[open + 2..rest.len() - 1].to_string();
                if let Some(PlacementReport::Split(blocks)) = log.reports.last_mut()
                    && let Some(b) = blocks.last_mut()
                {
                    b.nodes.push((op, name));
                }
                continue;
            }
        }
        if !in_verify {
            listing = false;
        }
        if let Some(m) = memcpy_warning(message) {
            match log.memcpy.iter_mut().find(|(g, _)| *g == m.0) {
                Some((_, k)) => *k += m.1,
                None => log.memcpy.push(m),
            }
            continue;
        }
        if let Some(rest) = message
            .split("CUDA kernel not found in registries for Op type: ")
            .nth(1)
            && let Some((op, name)) = rest.split_once(" node name: ")
        {
            log.no_cuda_kernel
                .push((op.trim().to_string(), name.trim().to_string()));
            continue;
        }
        if let Some(rest) = message
            .split("Force fallback to CPU execution for node: ")
            .nth(1)
        {
            if let Some(name) = rest.split_whitespace().next() {
                log.cpu_preferred.push(name.to_string());
            }
            continue;
        }
        if message.starts_with("Add Memcpy") {
            log.copies.push(message.trim().to_string());
        }
    }
    log
}

/// "N Memcpy nodes are added to the graph G for EP. ..." → `(G, N)`.
fn memcpy_warning(message: &str) -> Option<(String, usize)> {
    let (n, rest) = message.split_once(" Memcpy nodes are added to the graph ")?;
    let n = n.trim().parse().ok()?;
    let (graph, _) = rest.rsplit_once(" for ")?;
    Some((graph.to_string(), n))
}

impl LiveLog {
    /// Copies per graph as a map (for JSON).
    pub fn memcpy_map(&self) -> BTreeMap<String, usize> {
        self.memcpy.iter().cloned().collect()
    }

    /// Nodes per provider over every report, Memcpy nodes included (ORT counts them).
    pub fn totals(&self) -> BTreeMap<String, usize> {
        let mut t = BTreeMap::new();
        for r in &self.reports {
            match r {
                PlacementReport::All { ep, count } => *t.entry(ep.clone()).or_default() += count,
                PlacementReport::Split(blocks) => {
                    for b in blocks {
                        *t.entry(b.ep.clone()).or_default() += b.nodes.len().max(b.declared);
                    }
                }
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_split_report() {
        let text = "\
2026-11-29 10:52:56.555672201 [V:onnxruntime:, session_state.cc:1578 VerifyEachNodeIsAssignedToAnEp] Node placements
2026-11-29 10:52:56.555679011 [V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 2
2026-11-29 10:52:56.555 [V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   Gather (/m/Gather)
2026-11-29 10:52:56.555 [V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   Unsqueeze (a (b))
2026-11-29 10:52:56.555 [V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CUDAExecutionProvider]. Number of nodes: 1
2026-11-29 10:52:56.555 [V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   MatMul ()
";
        let log = parse(text);
        assert_eq!(log.reports.len(), 1);
        let PlacementReport::Split(blocks) = &log.reports[0] else {
            unreachable!("split report expected")
        };
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].nodes[1], ("Unsqueeze".into(), "a (b)".into()));
        assert_eq!(blocks[1].nodes, vec![("MatMul".into(), String::new())]);
    }

    #[test]
    fn reads_copies_and_counts() {
        let text = "\
[I:onnxruntime:, transformer_memcpy.cc:393 AddCopyNode] Add MemcpyFromHost after x_out for CUDAExecutionProvider
[W:onnxruntime:, transformer_memcpy.cc:111 ApplyImpl] 1 Memcpy nodes are added to the graph main graph for CUDAExecutionProvider. It might have negative impact
[V:onnxruntime:, session_state.cc:1578 VerifyEachNodeIsAssignedToAnEp] Node placements
[V:onnxruntime:, session_state.cc:1581 VerifyEachNodeIsAssignedToAnEp]  All nodes placed on [CUDAExecutionProvider]. Number of nodes: 12
";
        let log = parse(text);
        assert_eq!(
            log.copies,
            vec!["Add MemcpyFromHost after x_out for CUDAExecutionProvider"]
        );
        assert_eq!(log.memcpy, vec![("main graph".to_string(), 1)]);
        assert_eq!(
            log.reports,
            vec![PlacementReport::All {
                ep: "CUDAExecutionProvider".into(),
                count: 12
            }]
        );
    }

    #[test]
    fn formatted_callback_lines_parse_like_sink_lines() {
        let line = format_line(
            'V',
            "",
            "session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp",
            " Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
        );
        let node = format_line(
            'V',
            "",
            "session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp",
            "  Shape (s)",
        );
        let log = parse(&format!("{line}\n{node}\n"));
        assert_eq!(
            log.reports,
            vec![PlacementReport::Split(vec![EpBlock {
                ep: "CPUExecutionProvider".into(),
                declared: 1,
                nodes: vec![("Shape".into(), "s".into())]
            }])]
        );
    }

    #[test]
    fn strips_colours() {
        assert_eq!(strip_ansi("\u{1b}[1;31mred\u{1b}[m x"), "red x");
    }
}
