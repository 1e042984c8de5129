//! The list of output formats. `Format` (the value of every `--format`/`--output-format`), the
//! values clap offers each command and the dispatch to each format's [`Emitter`] all come from
//! the one list below: adding a format is its file and one line here.

use clap::builder::{PossibleValuesParser, TypedValueParser};

use super::emitter::Emitter;
use super::report::{FixOptions, Printing};
use super::{github, human, json, sarif};

/// Declares `Format` from the list: `Variant => "name", emitter;` (`#[default]` on one).
macro_rules! formats {
    ($($(#[$attr:meta])* $variant:ident => $name:literal, $emitter:expr;)+) => {
        /// An output format (`--format`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub enum Format {
            $($(#[$attr])* $variant,)+
        }

        impl Format {
            /// Every format, in the order of the list (and of `--help`).
            pub const ALL: &'static [Format] = &[$(Format::$variant,)+];

            /// Its `--format` value.
            pub fn name(self) -> &'static str {
                match self {
                    $(Format::$variant => $name,)+
                }
            }

            /// How it renders each report.
            pub fn emitter(self) -> &'static dyn Emitter {
                match self {
                    $(Format::$variant => &$emitter,)+
                }
            }
        }
    };
}

formats! {
    #[default]
    Human => "human", human::Human;
    Json => "json", json::Json;
    Sarif => "sarif", sarif::Sarif;
    Github => "github", github::Github;
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The reports a format may render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The lint report (the default command).
    Lint,
    /// The lint report with `--statistics`.
    Statistics,
    /// The `--fix`/`--diff` report.
    Fix,
    /// `place`.
    Place,
    /// The data listings of `tables`, `rules` and `verify`.
    Listing,
}

impl Format {
    /// The format of a `--format` value.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// Whether this format renders `report`.
    pub fn renders(self, report: Report) -> bool {
        let e = self.emitter();
        match report {
            Report::Lint => e.lint(&Printing::default()).is_some(),
            Report::Statistics => e
                .lint(&Printing {
                    statistics: true,
                    ..Printing::default()
                })
                .is_some(),
            Report::Fix => e.fix(&FixOptions::default()).is_some(),
            Report::Place => e.place().is_some(),
            Report::Listing => e.listings(),
        }
    }

    /// The formats that render `report`, in the list's order.
    pub fn rendering(report: Report) -> Vec<Format> {
        Format::ALL
            .iter()
            .copied()
            .filter(|f| f.renders(report))
            .collect()
    }

    /// clap's parser of the `--format` of a command that prints `report`: it offers (and
    /// accepts) the formats that render it.
    pub fn parser(report: Report) -> impl TypedValueParser<Value = Format> {
        let names: Vec<&'static str> = Format::rendering(report)
            .into_iter()
            .map(Format::name)
            .collect();
        PossibleValuesParser::new(names)
            .map(|name: String| Format::from_name(&name).unwrap_or_default())
    }

    /// The usage error of a format asked for a report it does not render: what it cannot do,
    /// and the formats that can.
    pub fn refusal(self, report: Report) -> String {
        let names: Vec<&str> = Format::rendering(report)
            .into_iter()
            .map(Format::name)
            .collect();
        let choice = match names.split_last() {
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => "none".into(),
        };
        match report {
            Report::Statistics => {
                format!("--statistics prints a table: use it with --format {choice}")
            }
            Report::Lint => format!("--format {self} has no lint report: use --format {choice}"),
            Report::Fix => {
                format!("--format {self} has no report of --fix or --diff: use --format {choice}")
            }
            Report::Place => {
                format!("--format {self} has no `place` report: use --format {choice}")
            }
            Report::Listing => format!("--format {self} lists nothing: use --format {choice}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_has_a_unique_name_and_renders_something() {
        for (i, f) in Format::ALL.iter().enumerate() {
            assert_eq!(Format::from_name(f.name()), Some(*f));
            assert!(
                Format::ALL[..i].iter().all(|g| g.name() != f.name()),
                "{f} listed twice"
            );
            let reports = [Report::Lint, Report::Fix, Report::Place, Report::Listing];
            assert!(
                reports.iter().any(|r| f.renders(*r)),
                "{f} renders no report"
            );
        }
    }

    #[test]
    fn refusals_name_the_formats_that_can() {
        assert_eq!(
            Format::Sarif.refusal(Report::Statistics),
            "--statistics prints a table: use it with --format human or json"
        );
        assert!(!Format::Sarif.renders(Report::Place));
        assert_eq!(
            Format::Sarif.refusal(Report::Place),
            "--format sarif has no `place` report: use --format human or json"
        );
    }
}
