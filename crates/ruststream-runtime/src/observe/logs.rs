//! Logs set up by one call: `tracing-subscriber`, human-readable or JSON.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event (the default).
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Logs could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// The filter did not parse.
    #[error("log filter: {0}")]
    Filter(String),
    /// A global subscriber was set up before.
    #[error("logs already set up")]
    AlreadySet,
}

/// Sets up the process's logs to standard error: the filter from `RUST_LOG` (default
/// `info`), JSON where `RUSTSTREAM_LOG_FORMAT=json`, human-readable lines otherwise,
/// coloured only where standard error is a terminal and `NO_COLOR` is not set.
///
/// The framework writes broker URLs only with their passwords replaced
/// ([`redact`](ruststream_core::redact)).
///
/// ```no_run
/// ruststream::observe::init_logs().expect("logs set up once");
/// ```
pub fn init_logs() -> Result<(), LogsError> {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let format = match std::env::var("RUSTSTREAM_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        _ => LogFormat::Human,
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    init(format, &filter, std::io::stderr, ansi)
}

/// Sets up the process's logs: `format`, events that `filter` (`RUST_LOG` syntax: `info`,
/// `ruststream=debug,warn`…) lets through, written to `writer` (`std::io::stderr`, or a
/// test's buffer).
///
/// ```no_run
/// use ruststream::observe::{LogFormat, init_logs_with};
///
/// init_logs_with(LogFormat::Json, "ruststream=debug,info", std::io::stdout).expect("once");
/// ```
pub fn init_logs_with<W>(format: LogFormat, filter: &str, writer: W) -> Result<(), LogsError>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    // A writer that is not known to be a terminal gets no colour codes.
    init(format, filter, writer, false)
}

fn init<W>(format: LogFormat, filter: &str, writer: W, ansi: bool) -> Result<(), LogsError>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(filter).map_err(|e| LogsError::Filter(e.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    let set = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    set.map_err(|_| LogsError::AlreadySet)
}
