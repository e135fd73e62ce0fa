//! Offsets a subscription's fetch passed over, said at debug under this module's target
//! (`ruststream_kafka::gap`).
//!
//! A consumer reads a partition's offsets in order, and on Kafka the only ones it does
//! not see are records compacted away, transaction markers and aborted transactions'
//! records. A broker that hands out a later batch before an earlier one is readable
//! makes the consumer go on past records it stores and acknowledges (nisshi 0.8.1,
//! docs/kafka.md): the group then commits past them and nothing reads them. Saying
//! where the fetch passed over tells such a record apart from one the subscription read
//! and lost (`ruststream-soak` reads it so).

/// The fetch of `topic`'s `partition` handed over `to` where `from` was next: the
/// offsets `from..to` were not read.
pub(crate) fn passed_over(topic: &str, partition: i32, from: i64, to: i64) {
    tracing::debug!(
        topic,
        partition,
        from,
        to,
        "kafka: the fetch passed over offsets"
    );
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

    /// Each event's target and its fields (the message aside) as text, as a subscriber
    /// sees them.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    struct Fields(Vec<String>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() != "message" {
                self.0.push(format!("{}={value:?}", field.name()));
            }
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Seen {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut fields = Fields(Vec::new());
            event.record(&mut fields);
            let line = format!("{} {}", event.metadata().target(), fields.0.join(" "));
            let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            seen.push(line);
        }
    }

    /// What `ruststream-soak` (`gaps.rs`) and the `fetch_gap` example read of the event:
    /// its target and the names of its fields.
    #[test]
    fn a_gap_is_said_under_its_target_with_its_bounds() {
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry().with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            super::passed_over("orders", 2, 2023, 2124);
        });
        let seen = seen.0.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(
            *seen,
            ["ruststream_kafka::gap topic=\"orders\" partition=2 from=2023 to=2124"]
        );
    }
}
