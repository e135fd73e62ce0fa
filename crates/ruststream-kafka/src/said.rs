//! What librdkafka says, logged as the other adapters log a connection they lose: once.
//!
//! While the cluster is away, librdkafka reports each failed try of each client (a
//! producer, every consumer, each delay mover) as a global error and a log line, and
//! rdkafka's default logs both at ERROR: a 12-second outage of a service with two mounts
//! logged 74 ERROR lines. The adapter reconnects through librdkafka on its own, so a
//! transport failure is a WARN, at most once a minute for each client, and the rest is
//! at debug; any other error librdkafka reports stays an ERROR.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// How often a client warns that the cluster does not answer.
const EVERY: Duration = Duration::from_secs(60);

/// One client's reports.
#[derive(Debug)]
pub(crate) struct Said {
    client: &'static str,
    warned: Mutex<Option<Instant>>,
}

impl Said {
    /// The reports of a client called `client` in the logs (`producer`, `consumer`).
    pub(crate) fn new(client: &'static str) -> Self {
        Self {
            client,
            warned: Mutex::new(None),
        }
    }

    /// A line librdkafka logs: a failed connection (`FAIL`) at debug, the rest at its
    /// level.
    pub(crate) fn log(&self, level: RDKafkaLogLevel, facility: &str, line: &str) {
        let client = self.client;
        if facility == "FAIL" {
            tracing::debug!(target: "librdkafka", client, "{facility} {line}");
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", client, "{facility} {line}");
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", client, "{facility} {line}");
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", client, "{facility} {line}");
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", client, "{facility} {line}");
            }
        }
    }

    /// A global error librdkafka reports.
    pub(crate) fn error(&self, error: &KafkaError, reason: &str) {
        let client = self.client;
        if !is_transport(error) {
            tracing::error!(client, %error, reason, "kafka: librdkafka reports an error");
        } else if self.first_in_a_while() {
            tracing::warn!(client, %error, reason,
                "kafka: the cluster does not answer; librdkafka tries again (said once a minute)");
        } else {
            tracing::debug!(client, %error, reason, "kafka: the cluster does not answer");
        }
    }

    /// Whether a client's transport failure is the first for [`EVERY`]: then it is said.
    pub(crate) fn first_in_a_while(&self) -> bool {
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if warned.is_some_and(|at| now.duration_since(at) < EVERY) {
            return false;
        }
        *warned = Some(now);
        true
    }
}

/// Whether `error` says the cluster cannot be reached (a connection refused or lost, no
/// broker up, a name that does not resolve), which librdkafka retries by itself.
pub(crate) fn is_transport(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::Resolve
                | RDKafkaErrorCode::NetworkException
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::BrokerNotAvailable
                | RDKafkaErrorCode::LeaderNotAvailable
        )
    )
}

/// The context of the clients that need nothing else: the producer, a delay mover.
pub(crate) struct Plain(pub(crate) Said);

impl ClientContext for Plain {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, line: &str) {
        self.0.log(level, facility, line);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.0.error(&error, reason);
    }
}

impl ConsumerContext for Plain {}

#[cfg(test)]
mod tests {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode;

    use super::{Said, is_transport};

    #[test]
    fn a_transport_failure_is_said_once_a_minute() {
        let said = Said::new("test");
        assert!(said.first_in_a_while());
        assert!(!said.first_in_a_while());
        let down = KafkaError::Global(RDKafkaErrorCode::AllBrokersDown);
        assert!(is_transport(&down));
        assert!(!is_transport(&KafkaError::Global(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
    }
}
