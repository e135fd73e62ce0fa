//! The command line, as clap reads it.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use super::filter::{Filter, parse_age};

/// A ruststream service.
#[derive(Debug, Parser)]
#[command(after_help = "Without a command the service runs (the same as `run`).")]
pub(crate) struct Line {
    /// The broker's URL (the schemes this build opens are listed below); before or after
    /// the command.
    #[arg(
        long,
        long_help = broker_help(),
        global = true,
        env = "RUSTSTREAM_BROKER_URL",
        hide_env_values = true,
        default_value = "memory://",
        value_name = "URL"
    )]
    pub(crate) broker: String,

    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// The `--broker` help: the schemes this build opens.
fn broker_help() -> String {
    format!(
        "The broker's URL, before or after the command. This build opens: {}",
        crate::connect::schemes().join(", ")
    )
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the service on the broker until SIGINT or SIGTERM (the default command).
    Run,
    /// List, show, replay or purge the messages waiting at a dead-letter address.
    #[command(subcommand)]
    DeadLetters(DeadLetters),
    /// Print the service's AsyncAPI 3.0 document, made from what it mounts and
    /// publishes on the broker given (its URL, without the password, is the server).
    #[cfg(feature = "asyncapi")]
    Asyncapi {
        /// The document's format: json or yaml.
        #[arg(long, default_value = "json", value_name = "FORMAT")]
        format: crate::asyncapi::Format,
        /// Write the document to FILE instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum DeadLetters {
    /// One line per dead letter: id, age, reason, attempt, original address, error.
    List(Select),
    /// Every header and the payload of each dead letter chosen.
    Show(Select),
    /// Publish each dead letter chosen back to its original address (or --to), then
    /// remove it: the copy is published first, so an interrupted replay duplicates and
    /// never loses. The copy has no retry count and no dead-letter headers (its attempt
    /// is 1 again) and carries x-ruststream-replayed-at.
    Replay {
        #[command(flatten)]
        select: Select,
        /// Publish to this address instead of each message's original address.
        #[arg(long, value_name = "ADDRESS")]
        to: Option<String>,
        /// Say what would be replayed, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove the dead letters chosen, for good.
    Purge {
        #[command(flatten)]
        select: Select,
        /// Purge every dead letter at the address when no filter is given.
        #[arg(long)]
        all: bool,
        /// Say what would be removed, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Which dead letters: the address and the filters.
#[derive(Debug, Args)]
pub(crate) struct Select {
    /// The dead-letter address (a Redis stream or list, an AMQP queue, a memory queue).
    pub(crate) address: String,
    /// Only this id (as `list` shows it); may be given several times.
    #[arg(long = "id", value_name = "ID")]
    pub(crate) ids: Vec<String>,
    /// Only this reason: retry, decode, panic or timeout; may be given several times.
    #[arg(long = "reason", value_name = "REASON")]
    pub(crate) reasons: Vec<String>,
    /// Only those dead-lettered from this address; may be given several times.
    #[arg(long = "from", value_name = "ADDRESS")]
    pub(crate) from: Vec<String>,
    /// Only those dead-lettered at least this long ago (500ms, 30s, 15m, 2h, 7d).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub(crate) older_than: Option<Duration>,
    /// Only those dead-lettered at most this long ago.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub(crate) newer_than: Option<Duration>,
    /// At most this many (list and show: 100 unless given; replay and purge: all).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Read at most this many messages of the address, oldest first, to filter.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub(crate) scan: usize,
}

impl Select {
    pub(crate) fn filter(&self) -> Filter {
        Filter {
            ids: self.ids.clone(),
            reasons: self.reasons.clone(),
            from: self.from.clone(),
            older_than: self.older_than,
            newer_than: self.newer_than,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Line::command().debug_assert();
    }

    #[test]
    fn run_is_the_default_and_the_broker_is_global() {
        let line = Line::try_parse_from(["svc"]).expect("parses");
        assert!(line.command.is_none());
        let line = Line::try_parse_from(["svc", "--broker", "redis://h"]).expect("parses");
        assert_eq!(line.broker, "redis://h");
        let line = Line::try_parse_from([
            "svc",
            "dead-letters",
            "replay",
            "dead",
            "--reason",
            "decode",
            "--reason",
            "panic",
            "--older-than",
            "2h",
            "--dry-run",
            "--broker",
            "amqp://h",
        ])
        .expect("parses");
        assert_eq!(line.broker, "amqp://h");
        let Some(Command::DeadLetters(DeadLetters::Replay {
            select,
            dry_run,
            to,
        })) = line.command
        else {
            panic!("not a replay");
        };
        assert!(dry_run);
        assert_eq!(to, None);
        assert_eq!(select.address, "dead");
        assert_eq!(select.filter().reasons, ["decode", "panic"]);
        assert_eq!(select.older_than, Some(Duration::from_secs(7200)));
    }

    #[test]
    fn a_bad_age_names_the_form() {
        let error = Line::try_parse_from(["svc", "dead-letters", "list", "d", "--older-than", "2"])
            .expect_err("no unit");
        assert!(error.to_string().contains("30s, 15m"), "{error}");
    }
}
