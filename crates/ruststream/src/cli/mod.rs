//! A command line for every service (feature `cli`): `run` and the dead-letter tools.
//!
//! One call in `main` gives a service its subcommands:
//!
//! * `run` (the default): connects to the broker named by `--broker URL` (or
//!   `RUSTSTREAM_BROKER_URL`; `memory://` by default, see [`connect`](crate::connect)),
//!   builds the service's [`App`] on it and runs it until SIGINT or SIGTERM;
//! * `dead-letters list|show|replay|purge ADDRESS`: the messages waiting at a dead-letter
//!   address, chosen by `--id`, `--reason`, `--from`, `--older-than`, `--newer-than`,
//!   `--limit`; `replay` publishes each copy **before** it removes the dead letter (an
//!   interrupted replay duplicates, never loses), to the original address
//!   (`x-ruststream-dead-letter-from`) or `--to`, with a fresh attempt count and
//!   `x-ruststream-replayed-at`; `replay` and `purge` take `--dry-run`.
//!
//! The dead-letter tools need a broker that offers
//! [`Inspect`](ruststream_core::Inspect) (memory, Redis streams and lists, AMQP queues on
//! RabbitMQ 4). Guide: `docs/cli.md`.
//!
//! ```no_run
//! use ruststream::{App, Mount, ack, Outcome};
//!
//! async fn place(order: String) -> Outcome { ack() }
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     ruststream::cli::main(|broker| {
//!         App::with_broker(broker)
//!             .mount(Mount::new("orders").max_attempts(3).dead_letter("orders.dead"), place)
//!     })
//!     .await
//! }
//! ```

mod args;
mod dead_letters;
mod filter;
#[cfg(feature = "asyncapi")]
mod offline;

use std::ffi::OsString;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches};
use ruststream_core::{Broker, InspectError};

pub use filter::{Filter, parse_age};
pub use ruststream_core::replayed;

use crate::App;
use args::{Command, Line};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The broker could not be opened.
    #[error("{0} (pass --broker URL or set RUSTSTREAM_BROKER_URL)")]
    Connect(#[from] crate::ConnectError),
    /// The broker cannot browse messages.
    #[error(
        "the {broker} broker cannot browse messages: the dead-letter tools need a broker that can (memory, redis, amqp, amqp091, nats)"
    )]
    NoInspect {
        /// The broker's name.
        broker: &'static str,
    },
    /// Browsing or removing failed.
    #[error("{0}")]
    Inspect(#[from] InspectError),
    /// `purge` without a filter and without `--all`.
    #[error(
        "purge without a filter removes every dead letter at {address}: pass --all, or choose with --id, --reason, --from, --older-than, --newer-than"
    )]
    PurgeAll {
        /// The address.
        address: String,
    },
    /// Some dead letters were not replayed (each is named in the report).
    #[error("{failed} dead letter(s) not replayed (see above)")]
    Failed {
        /// How many.
        failed: usize,
    },
    /// The service's run failed.
    #[error("{0}")]
    Run(String),
    /// The service's AsyncAPI document could not be made.
    #[cfg(feature = "asyncapi")]
    #[error("{0}")]
    AsyncApi(#[from] crate::asyncapi::AsyncApiError),
    /// Writing the report failed.
    #[error("cannot write the report: {0}")]
    Io(#[from] std::io::Error),
}

type Build = Box<dyn FnOnce(Arc<dyn Broker>) -> App>;
type RunFn = Box<dyn FnOnce(App) -> Pin<Box<dyn Future<Output = Result<(), String>>>>>;

/// A service's command line: how to build its [`App`] on a broker, and what `run` does
/// with it ([`App::run`] unless [`Cli::run_with`] says otherwise).
///
/// ```no_run
/// use std::process::ExitCode;
/// use ruststream::{App, cli::Cli};
///
/// #[tokio::main]
/// async fn main() -> ExitCode {
///     Cli::new(|broker| App::with_broker(broker))
///         .about("The billing service.")
///         .run_with(|app| async move {
///             let running = app.start().await.map_err(|e| e.to_string())?;
///             // … publish, wait for something …
///             running.stop().await.map_err(|e| e.to_string())
///         })
///         .main()
///         .await
/// }
/// ```
pub struct Cli {
    build: Build,
    run: RunFn,
    about: Option<String>,
    version: Option<String>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("about", &self.about)
            .finish_non_exhaustive()
    }
}

impl Cli {
    /// A command line whose `run` builds the app with `build` and runs it until SIGINT
    /// or SIGTERM.
    pub fn new(build: impl FnOnce(Arc<dyn Broker>) -> App + 'static) -> Self {
        Self {
            build: Box::new(build),
            run: Box::new(|app| {
                Box::pin(async move { app.run().await.map_err(|e| e.to_string()) })
            }),
            about: None,
            version: None,
        }
    }

    /// The service's version, as its AsyncAPI document gives it (a service passes its
    /// own: `env!("CARGO_PKG_VERSION")`).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// The one-line description `--help` starts with.
    pub fn about(mut self, about: impl Into<String>) -> Self {
        self.about = Some(about.into());
        self
    }

    /// What `run` does with the built app instead of [`App::run`]; an error ends the
    /// process with status 1 and the error's text.
    pub fn run_with<F, E>(mut self, run: impl FnOnce(App) -> F + 'static) -> Self
    where
        F: Future<Output = Result<(), E>> + 'static,
        E: std::fmt::Display,
    {
        self.run = Box::new(move |app| {
            let running = run(app);
            Box::pin(async move { running.await.map_err(|e| e.to_string()) })
        });
        self
    }

    /// Reads the process's arguments and carries out the command; the exit status says
    /// how it went (0 done, 1 failed, 2 a bad command line).
    pub async fn main(self) -> ExitCode {
        self.main_from(std::env::args_os()).await
    }

    /// [`Cli::main`] with the arguments given (the first is the program's name).
    pub async fn main_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let name = program_name();
        let mut command = Line::command().name(name.clone()).bin_name(name.clone());
        if let Some(about) = &self.about {
            command = command.about(about.clone());
        }
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        if let Some(url) = args
            .get(1)
            .and_then(|a| a.to_str())
            .filter(|a| a.contains("://"))
        {
            eprintln!("{name}: the broker is an option now: {name} --broker {url}");
            return ExitCode::from(2);
        }
        let line = command
            .try_get_matches_from(args)
            .and_then(|matches| Line::from_arg_matches(&matches));
        let line = match line {
            Ok(line) => line,
            Err(error) => {
                let _ = error.print();
                return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
            }
        };
        match self.execute(line).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{name}: {error}");
                ExitCode::FAILURE
            }
        }
    }

    async fn execute(self, line: Line) -> Result<(), CliError> {
        let broker = match (&line.command, crate::connect(&line.broker).await) {
            (_, Ok(broker)) => broker,
            // The document needs no broker: its URL is the server, and the facts of the
            // subscriptions come from a broker only where one answers.
            #[cfg(feature = "asyncapi")]
            (Some(Command::Asyncapi { .. }), Err(error)) => {
                eprintln!("note: {error}; the document is made without the broker's facts");
                Arc::new(offline::Offline::new(&line.broker))
            }
            (_, Err(error)) => return Err(error.into()),
        };
        let result = match line.command.unwrap_or(Command::Run) {
            Command::Run => {
                let app = (self.build)(broker.clone());
                return (self.run)(app).await.map_err(CliError::Run);
            }
            Command::DeadLetters(command) => {
                if broker.name() == "memory" {
                    eprintln!(
                        "note: memory:// holds only this process's messages; point --broker (or RUSTSTREAM_BROKER_URL) at the service's broker"
                    );
                }
                // Not locked across the awaits: a broker's client logging to stdout from
                // another thread (lapin does, on a channel the broker closed) would wait
                // on the lock for ever, and the command with it.
                let mut out = std::io::stdout();
                dead_letters::run(broker.as_ref(), command, &mut out).await
            }
            #[cfg(feature = "asyncapi")]
            Command::Asyncapi { format, out } => {
                let app = (self.build)(broker.clone());
                let info = crate::asyncapi::AsyncApiInfo {
                    version: self.version.unwrap_or_else(|| "0.0.0".into()),
                    server: Some(crate::connect::server(&line.broker)?),
                    ..crate::asyncapi::AsyncApiInfo::default()
                };
                match app.asyncapi_string(&info, format) {
                    Ok(text) => match out {
                        Some(path) => std::fs::write(path, text).map_err(CliError::Io),
                        None => {
                            use std::io::Write as _;
                            std::io::stdout()
                                .lock()
                                .write_all(text.as_bytes())
                                .map_err(CliError::Io)
                        }
                    },
                    Err(error) => Err(error.into()),
                }
            }
        };
        broker.close().await;
        result
    }
}

/// The executable's file name, as `--help` shows it.
fn program_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|p| {
            std::path::Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "service".to_owned())
}

/// The command line with `run` building the app with `build` and running it until
/// SIGINT or SIGTERM: `Cli::new(build).main()`.
pub async fn main(build: impl FnOnce(Arc<dyn Broker>) -> App + 'static) -> ExitCode {
    Cli::new(build).main().await
}
