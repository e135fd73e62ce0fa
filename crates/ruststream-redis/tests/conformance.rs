//! The shared conformance suite (`ruststream-conformance`) on Redis: the stream form, the
//! reliable list form and the claiming form. Needs Redis (`RUSTSTREAM_REDIS_URL`, default
//! `redis://127.0.0.1:6379`).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use ruststream_redis::{Claiming, RedisBroker, ReliableList, Settings, Stream, Target};

/// The forms under test.
#[derive(Clone, Copy)]
enum Form {
    Stream,
    ReliableList,
    /// With `min_idle`: how long an entry stays pending before it is taken back.
    Claiming(Duration),
}

/// One form, under a key prefix of the check's own.
struct Redis {
    form: Form,
    prefix: String,
    taken: AtomicUsize,
    /// Addresses handed out, routed as lists on every connection of the list form.
    lists: Mutex<Vec<Address>>,
}

impl Redis {
    fn new(form: Form) -> Self {
        Self {
            form,
            prefix: support::unique_prefix(),
            taken: AtomicUsize::new(0),
            lists: Mutex::new(Vec::new()),
        }
    }
}

impl Harness for Redis {
    fn name(&self) -> &str {
        match self.form {
            Form::Stream => "redis stream",
            Form::ReliableList => "redis reliable list",
            Form::Claiming(_) => "redis claiming",
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
        let lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        for address in lists.iter() {
            broker.route(address.clone(), Target::List);
        }
        Arc::new(broker)
    }

    fn fresh_address(&self) -> Address {
        let address = Address::new(format!(
            "conformance-{}",
            self.taken.fetch_add(1, Ordering::Relaxed)
        ));
        if let Form::ReliableList = self.form {
            let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
            lists.push(address.clone());
        }
        address
    }

    fn mount(&self, address: Address) -> Mount {
        let mount = Mount::new(address);
        // The group forms with their default options: a later service is a new consumer and
        // takes over what an earlier one left unsettled (its lease is released when it
        // stops). The reliable list keeps a stable name: its recovery of a stopped
        // consumer waits for the heartbeat.
        match self.form {
            Form::Stream => mount.option(Stream::new()),
            Form::ReliableList => {
                let block = Duration::from_millis(100);
                mount.option(ReliableList::new().consumer("conformance").block(block))
            }
            Form::Claiming(min_idle) => mount.option(Claiming::new(min_idle)),
        }
    }

    fn capabilities(&self) -> Capabilities {
        match self.form {
            Form::Stream | Form::ReliableList => Capabilities::SETTLES,
            Form::Claiming(min_idle) => Capabilities {
                settles: true,
                requeues: true,
                counts: true,
                delays: true,
                // A longer delay is the runtime's copy.
                max_delay: Some(min_idle),
                dead_letters: false,
            },
        }
    }

    fn quiet(&self) -> Duration {
        match self.form {
            // Longer than a claiming subscription takes to take an entry back.
            Form::Claiming(min_idle) => (min_idle * 5 / 2).max(Duration::from_secs(1)),
            Form::Stream | Form::ReliableList => Duration::from_secs(1),
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
