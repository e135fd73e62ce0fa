//! A connection to a form's broker: `ruststream::connect` for the URLs it opens, the
//! adapter's own `connect` for the ones it does not pick (lapin's `amqp://`, which is
//! AMQP 1.0's scheme there, and `nats://`).

use std::sync::Arc;
use std::time::Duration;

use ruststream::core::Broker;
use ruststream_lapin::LapinBroker;
use ruststream_nats::NatsBroker;

use crate::BoxError;
use crate::form::{Form, Server};

/// Connects once.
async fn connect(url: &str, form: Form) -> Result<Arc<dyn Broker>, BoxError> {
    Ok(match form.server() {
        Server::Lapin => Arc::new(LapinBroker::connect(url).await?),
        Server::Nats => Arc::new(NatsBroker::connect(url).await?),
        Server::Memory
        | Server::Redis
        | Server::Amqp
        | Server::Postgres
        | Server::Kafka
        | Server::Mqtt => ruststream::connect(url).await?,
    })
}

/// Connects, trying again for up to 60 s (a restarted process may meet its broker down).
pub(crate) async fn connect_patiently(url: &str, form: Form) -> Result<Arc<dyn Broker>, BoxError> {
    let mut tries = 0;
    loop {
        match connect(url, form).await {
            Ok(broker) => return Ok(broker),
            Err(error) if tries < 120 => {
                tries += 1;
                eprintln!("soak: connect: {error}; trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error),
        }
    }
}
