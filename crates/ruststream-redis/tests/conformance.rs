//! The shared conformance suite (`ruststream-conformance`) on Redis, every form with its
//! default options: the stream (with the default in-process delayed retry and with
//! `DurableZset`), claiming, the reliable list, the plain list, Pub/Sub and pattern
//! Pub/Sub. Needs Redis (`RUSTSTREAM_REDIS_URL`, default `redis://127.0.0.1:6379`).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use ruststream_redis::{
    Claiming, DelayedRetry, List, Pattern, PubSub, RedisBroker, ReliableList, Settings, Stream,
    Target,
};

/// The forms under test.
#[derive(Clone, Copy)]
enum Form {
    Stream,
    /// A stream whose `retry_after` goes through a sorted set in Redis.
    DurableZset,
    ReliableList,
    /// With `min_idle`: how long an entry stays pending before it is taken back.
    Claiming(Duration),
    List,
    PubSub,
    Pattern,
}

/// One form, under a key prefix of the check's own.
struct Redis {
    form: Form,
    prefix: String,
    taken: AtomicUsize,
    /// Addresses handed out, routed as lists (channels) on every connection of the list
    /// (Pub/Sub) forms.
    lists: Mutex<Vec<Address>>,
    /// An address routed as a pattern on every connection: a publish to it is refused.
    unpublishable: Mutex<Option<Address>>,
}

impl Redis {
    fn new(form: Form) -> Self {
        Self {
            form,
            prefix: support::unique_prefix(),
            taken: AtomicUsize::new(0),
            lists: Mutex::new(Vec::new()),
            unpublishable: Mutex::new(None),
        }
    }
}

impl Harness for Redis {
    fn name(&self) -> &str {
        match self.form {
            Form::Stream => "redis stream",
            Form::DurableZset => "redis stream, DurableZset",
            Form::ReliableList => "redis reliable list",
            Form::Claiming(_) => "redis claiming",
            Form::List => "redis list",
            Form::PubSub => "redis pub/sub",
            Form::Pattern => "redis pattern pub/sub",
        }
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        let settings = Settings::default().key_prefix(self.prefix.clone());
        let broker = match RedisBroker::connect_with(&support::url(), settings).await {
            Ok(broker) => broker,
            Err(error) => panic!("no Redis at {}: {error}", support::url()),
        };
        // Publishing to an address nobody on this connection consumes (a dead letter, a
        // handler's onward address) must reach the list, not a stream of the same name.
        let target = match self.form {
            Form::PubSub | Form::Pattern => Target::Channel,
            _ => Target::List,
        };
        let lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        for address in lists.iter() {
            broker.route(address.clone(), target);
        }
        if let Some(address) = &*self
            .unpublishable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            broker.route(address.clone(), Target::Pattern);
        }
        Arc::new(broker)
    }

    fn fresh_address(&self) -> Address {
        let address = Address::new(format!(
            "conformance-{}",
            self.taken.fetch_add(1, Ordering::Relaxed)
        ));
        if let Form::ReliableList | Form::List | Form::PubSub | Form::Pattern = self.form {
            let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
            lists.push(address.clone());
        }
        address
    }

    fn mount(&self, address: Address) -> Mount {
        let mount = Mount::new(address);
        // Every form with its default options: a later service is a new consumer and
        // takes over what an earlier one left unsettled (a group consumer's lease is
        // released when it stops; a reliable list hands back what it held on a stop).
        match self.form {
            Form::Stream => mount.option(Stream::new()),
            Form::DurableZset => {
                mount.option(Stream::new().delayed_retry(DelayedRetry::DurableZset))
            }
            Form::ReliableList => mount.option(ReliableList::new()),
            Form::Claiming(min_idle) => mount.option(Claiming::new(min_idle)),
            Form::List => mount.option(List::new()),
            Form::PubSub => mount.option(PubSub::new()),
            // The address is a pattern without wildcards: it matches its own channel,
            // where the suite publishes, and its retry copies go there too.
            Form::Pattern => {
                let own = mount.address().clone();
                mount.option(Pattern::new()).retry_to(own)
            }
        }
    }

    /// An address routed as a pattern: Redis cannot publish to one.
    fn unpublishable_address(&self) -> Option<Address> {
        let address = Address::new(format!(
            "unpublishable-{}",
            self.taken.fetch_add(1, Ordering::Relaxed)
        ));
        *self
            .unpublishable
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(address.clone());
        Some(address)
    }

    fn capabilities(&self) -> Capabilities {
        match self.form {
            Form::Stream | Form::ReliableList => Capabilities::SETTLES,
            Form::DurableZset => Capabilities {
                delays: Some(Capabilities::ANY_DELAY),
                ..Capabilities::SETTLES
            },
            Form::List | Form::PubSub | Form::Pattern => Capabilities::NONE,
            Form::Claiming(min_idle) => Capabilities {
                settles: true,
                requeues: true,
                counts: true,
                // A longer delay is the runtime's copy.
                delays: Some(min_idle),
                dead_letters: false,
                moves: false,
            },
        }
    }

    /// A claiming subscription drains at a graceful stop: the server counts what a read
    /// hands over, so what was read is handled rather than left counted.
    fn drains(&self) -> bool {
        matches!(self.form, Form::Claiming(_))
    }

    fn quiet(&self) -> Duration {
        match self.form {
            // Longer than a claiming subscription takes to take an entry back.
            Form::Claiming(min_idle) => (min_idle * 5 / 2).max(Duration::from_secs(1)),
            _ => Duration::from_secs(1),
        }
    }
}

mod stream {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::Stream));
}

mod reliable_list {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::ReliableList));
}

mod claiming {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::Claiming(
        std::time::Duration::from_secs(1)
    )));
}

/// `min_idle` shorter than the suite's `retry_after` delay (500 ms): the delay is the
/// runtime's copy.
mod claiming_short_min_idle {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::Claiming(
        std::time::Duration::from_millis(200)
    )));
}

mod stream_durable_zset {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::DurableZset));
}

mod list {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::List));
}

mod pubsub {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::PubSub));
}

mod pattern {
    ruststream_conformance::conformance_tests!(super::Redis::new(super::Form::Pattern));
}
