//! What is still on JetStream at the end of a NATS run, asked of the server's JetStream
//! API, and the clean-up of a run's streams.
//!
//! The streams and consumers are the adapter's defaults: the stream named after the
//! subject, its durable consumer `ruststream-` and the subject (each character a name
//! cannot hold as `_`; the harness's addresses hold none).

use std::time::Duration;

use async_nats::jetstream;

use crate::BoxError;
use crate::consume::dead_letter_of;

/// The adapter's name for a stream or consumer made from `subject`.
fn name_of(subject: &str) -> String {
    subject
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '_',
        })
        .collect()
}

async fn context(url: &str) -> Result<jetstream::Context, BoxError> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await?;
    Ok(jetstream::new(client))
}

/// Messages not yet delivered to, or delivered and not acknowledged by, the consumer of
/// the address and of its dead letter (`num_pending + num_ack_pending`; a message
/// waiting out a `-NAK` delay is among the second).
pub(crate) async fn pending(url: &str, address: &str) -> Result<u64, BoxError> {
    let js = context(url).await?;
    let mut total = 0;
    for subject in [address.to_owned(), dead_letter_of(address)] {
        let stream = js.get_stream(name_of(&subject)).await?;
        let info = stream
            .consumer_info(format!("ruststream-{}", name_of(&subject)))
            .await?;
        total += info.num_pending + info.num_ack_pending as u64;
    }
    Ok(total)
}

/// Deletes the run's two streams (and so their consumers).
pub(crate) async fn clean(url: &str, address: &str) -> Result<(), BoxError> {
    let js = context(url).await?;
    for subject in [address.to_owned(), dead_letter_of(address)] {
        js.delete_stream(name_of(&subject)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_adapter() {
        assert_eq!(name_of("soak-nats-kill-1-2"), "soak-nats-kill-1-2");
        assert_eq!(name_of("orders.eu"), "orders_eu");
    }
}
