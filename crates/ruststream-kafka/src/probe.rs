//! Reaching the cluster at connect: a client of its own asks for the cluster's metadata,
//! and gives up as soon as librdkafka says every bootstrap server is down (each refused
//! the connection), or a server refused the client (its TLS handshake, its SASL
//! credentials or mechanism), naming why, instead of waiting out the metadata timeout
//! while librdkafka logs each failed try at ERROR.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::cluster::Cluster;
use crate::error::ConnectError;

/// How long the cluster may take to answer before connecting fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// How long each ask for metadata waits before the errors seen meanwhile are looked at.
const STEP: Duration = Duration::from_millis(250);

/// The probe client's context: librdkafka's lines at debug; its global errors kept, and
/// whether every bootstrap server is down, or one refused the client.
#[derive(Default)]
struct Quiet {
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// What the last failed try said (the one that explains an "all brokers down").
    last: Option<String>,
    down: bool,
    /// A server answered and refused the client (TLS or SASL).
    refused: bool,
}

/// Why the cluster was not reached.
#[derive(Debug)]
enum Failure {
    /// librdkafka refused the configuration (a client certificate that cannot be
    /// loaded, say).
    Config(KafkaError),
    /// No server answered.
    Unreachable(String),
    /// A server answered and refused the client (TLS or SASL).
    Refused(String),
}

impl ClientContext for Quiet {
    fn log(&self, _: RDKafkaLogLevel, facility: &str, line: &str) {
        tracing::debug!(target: "librdkafka", "{facility} {line}");
        // A failed TLS handshake is not always raised as an error event (seen with
        // several clients in one process: none within 10 s), but librdkafka always
        // logs it.
        if facility == "FAIL" && line.contains("SSL handshake failed") {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            seen.down = true;
            seen.refused = true;
            seen.last = Some(line.to_owned());
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(target: "librdkafka", %error, reason, "while connecting");
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::AllBrokersDown) => seen.down = true,
            Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SSL) => {
                seen.down = true;
                seen.refused = true;
                seen.last = Some(reason.to_owned());
            }
            _ => seen.last = Some(reason.to_owned()),
        }
    }
}

impl ConsumerContext for Quiet {}

/// Reaches `cluster` (off the runtime's threads), choosing its SASL mechanism where the
/// URL did not: the strongest this build speaks, else, where the broker refuses it, the
/// strongest of those the broker offers. The cluster as it is to be used from now on.
pub(crate) async fn reach(mut cluster: Cluster) -> Result<Cluster, ConnectError> {
    loop {
        let tried = cluster.clone();
        let answer = tokio::task::spawn_blocking(move || try_once(&tried))
            .await
            .map_err(|_| ConnectError::Url("connecting was cut off".into()))?;
        let servers = cluster.servers().to_owned();
        let reason = match answer {
            Ok(()) => return Ok(cluster),
            Err(Failure::Config(error)) => return Err(ConnectError::Kafka(error)),
            Err(Failure::Unreachable(reason)) => {
                return Err(ConnectError::Unreachable { servers, reason });
            }
            Err(Failure::Refused(reason)) => reason,
        };
        match cluster.negotiate(&reason) {
            // Chosen once: the next refusal finds the mechanism set and ends here.
            Ok(Some(mechanism)) => {
                tracing::debug!(
                    mechanism = mechanism.name(),
                    "kafka: the SASL mechanism the broker offers"
                );
            }
            Ok(_) => return Err(ConnectError::Refused { servers, reason }),
            Err(reason) => return Err(ConnectError::Refused { servers, reason }),
        }
    }
}

/// Whether `cluster` answers: `Err` with why not, at once where every bootstrap server
/// refused the connection or one refused the client, else after [`PATIENCE`]. Blocking.
fn try_once(cluster: &Cluster) -> Result<(), Failure> {
    let client: BaseConsumer<Quiet> = cluster
        .config()
        .create_with_context(Quiet::default())
        .map_err(Failure::Config)?;
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
                let reason = seen.last.clone().unwrap_or(error);
                return Err(if seen.refused {
                    Failure::Refused(reason)
                } else {
                    Failure::Unreachable(reason)
                });
            }
        }
        if started.elapsed() >= PATIENCE {
            // What librdkafka said last, where it said anything: why no answer came.
            let seen = client
                .context()
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let why = seen.last.as_deref().unwrap_or(&error);
            return Err(Failure::Unreachable(format!(
                "no answer within {}s ({why})",
                PATIENCE.as_secs()
            )));
        }
    }
}
