//! Reaching the cluster at connect: a client of its own asks for the cluster's metadata,
//! and gives up as soon as librdkafka says every bootstrap server is down (each refused
//! the connection) or the credentials were refused, naming why, instead of waiting out
//! the metadata timeout while librdkafka logs each failed try at ERROR.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// How long the cluster may take to answer before connecting fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// How long each ask for metadata waits before the errors seen meanwhile are looked at.
const STEP: Duration = Duration::from_millis(250);

/// The probe client's context: librdkafka's lines at debug; its global errors kept, and
/// whether every bootstrap server is down (or refused the client's credentials).
#[derive(Default)]
struct Quiet {
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// What the last failed try said (the one that explains an "all brokers down").
    last: Option<String>,
    down: bool,
}

impl ClientContext for Quiet {
    fn log(&self, _: RDKafkaLogLevel, facility: &str, line: &str) {
        tracing::debug!(target: "librdkafka", "{facility} {line}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(target: "librdkafka", %error, reason, "while connecting");
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::AllBrokersDown) => seen.down = true,
            Some(RDKafkaErrorCode::Authentication) => {
                seen.down = true;
                seen.last = Some(reason.to_owned());
            }
            _ => seen.last = Some(reason.to_owned()),
        }
    }
}

impl ConsumerContext for Quiet {}

/// Whether the cluster at `servers` answers: `Err` with why not, at once where every
/// bootstrap server refused the connection, else after [`PATIENCE`]. Blocking.
pub(crate) fn reach(servers: &str) -> Result<(), String> {
    let client: BaseConsumer<Quiet> = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create_with_context(Quiet::default())
        .map_err(|error| error.to_string())?;
    let started = Instant::now();
    loop {
        let asked = client.fetch_metadata(None, STEP);
        let error = match asked {
            Ok(_) => return Ok(()),
            Err(error) => error.to_string(),
        };
        // Serves the client's events: its global errors reach the context.
        let _ = client.poll(Duration::ZERO);
        {
            let seen = client
                .context()
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if seen.down {
                return Err(seen.last.clone().unwrap_or(error));
            }
        }
        if started.elapsed() >= PATIENCE {
            return Err(format!(
                "no answer within {}s ({error})",
                PATIENCE.as_secs()
            ));
        }
    }
}
