//! What an operator sees: a service's start with default options logs no ERROR line
//! from lapin (a refusal to the adapter's own queue declarations closes the channel, and
//! lapin logs every channel the server closes at ERROR). Both the first start, which
//! makes the queue and its dead-letter queue, and the next, which finds them; also a
//! service with a handler on its own dead letters.

mod support;

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, OnceLock};

use ruststream_core::{Address, Broker, Setting, SubscribeSpec};
use support::{Rabbit, broker, unique};
use tracing::span;

/// Every ERROR event of the test binary, as `target: fields`.
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Errors {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::ERROR
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={v:?}", f.name()));
            }
        }
        let mut text = Text(event.metadata().target().to_owned());
        event.record(&mut text);
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(text.0);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

fn errors() -> &'static Errors {
    static ERRORS: OnceLock<Errors> = OnceLock::new();
    ERRORS.get_or_init(|| {
        let errors = Errors::default();
        tracing::subscriber::set_global_default(errors.clone()).expect("the only subscriber");
        errors
    })
}

/// The lapin ERROR lines logged so far.
fn lapin_errors() -> Vec<String> {
    errors()
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|line| line.starts_with("lapin"))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_start_with_default_options_logs_no_error() {
    errors();
    starts_log_no_error(None).await;
}

#[tokio::test]
async fn declare_quorum_starts_log_no_error() {
    starts_log_no_error(Some("quorum")).await;
}

/// Two starts of a service on each broker, with `declare` set to `declare`.
async fn starts_log_no_error(declare: Option<&str>) {
    errors();
    for rabbit in [Rabbit::V3, Rabbit::V4] {
        let (queue, dead) = (unique("quiet"), unique("quiet-dead"));
        let spec = || {
            let mut spec = SubscribeSpec::new(queue.as_str());
            spec.declaration.max_attempts = NonZeroU32::new(5);
            spec.declaration.dead_letter = Some(Address::from(dead.as_str()));
            if let Some(kind) = declare {
                spec.options.configure(Setting::new("declare", kind, "url"));
            }
            spec
        };
        for start in ["first", "second"] {
            let broker = broker(rabbit).await;
            let sub = broker.subscribe(spec()).await.expect("subscribes");
            drop(sub);
            broker.close().await;
            let logged = lapin_errors();
            assert!(
                logged.is_empty(),
                "{rabbit:?}, declare {declare:?}, {start} start: lapin logged {logged:#?}"
            );
        }
        support::delete(rabbit, &queue).await;
        support::delete(rabbit, &dead).await;
    }
}

#[tokio::test]
async fn a_request_client_logs_no_error() {
    errors();
    for rabbit in [Rabbit::V3, Rabbit::V4] {
        let broker = broker(rabbit).await;
        let replies = broker
            .replies(unique("replies").as_str().into())
            .await
            .expect("a reply queue");
        drop(replies);
        broker.close().await;
        let logged = lapin_errors();
        assert!(logged.is_empty(), "{rabbit:?}: lapin logged {logged:#?}");
    }
}

/// A service with a handler on its own dead letters, mounted after the mount whose dead
/// letters they are (as mounts start in order), all with default options: the first
/// mount makes the dead-letter queue classic (which the dead-letter tools browse over
/// AMQP 0-9-1), and the second declares it as it was made. Before, the second declared
/// a quorum queue and the broker refused it, which lapin logs at ERROR on every start.
/// Also where the dead-letter queue was made with no arguments at all (by hand, or by an
/// earlier version of this crate).
#[tokio::test]
async fn a_handler_on_the_services_own_dead_letters_logs_no_error() {
    errors();
    for rabbit in [Rabbit::V3, Rabbit::V4] {
        for made_before in [false, true] {
            let (queue, dead) = (unique("own"), unique("own-dead"));
            if made_before {
                support::declare_plain(rabbit, &dead);
            }
            for start in ["first", "second"] {
                let broker = broker(rabbit).await;
                let mut orders = SubscribeSpec::new(queue.as_str());
                orders.declaration.max_attempts = NonZeroU32::new(5);
                orders.declaration.dead_letter = Some(Address::from(dead.as_str()));
                let orders = broker.subscribe(orders).await.expect("subscribes");
                let letters = broker
                    .subscribe(SubscribeSpec::new(dead.as_str()))
                    .await
                    .expect("subscribes");
                assert!(!letters.capabilities.counts, "a classic queue");
                drop((orders, letters));
                broker.close().await;
                let logged = lapin_errors();
                assert!(
                    logged.is_empty(),
                    "{rabbit:?}, made before {made_before}, {start} start: lapin logged {logged:#?}"
                );
            }
            support::delete(rabbit, &queue).await;
            support::delete(rabbit, &dead).await;
        }
    }
}
