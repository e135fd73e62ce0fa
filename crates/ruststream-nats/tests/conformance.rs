//! The shared conformance suite (`ruststream-conformance`) on NATS with JetStream, each
//! form with its **default** options: the JetStream form (a durable pull consumer on a
//! stream the adapter creates for the subject) and the core NATS form (at most once).
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`, default `nats://127.0.0.1:4222`).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use ruststream_nats::Core;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    JetStream,
    Core,
}

/// One form, under subjects of the check's own.
struct Nats {
    form: Form,
    prefix: String,
    taken: AtomicUsize,
    handed: Mutex<Vec<Address>>,
}

impl Nats {
    fn new(form: Form) -> Self {
        Self {
            form,
            prefix: support::unique(match form {
                Form::JetStream => "js",
                Form::Core => "core",
            }),
            taken: AtomicUsize::new(0),
            handed: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        // The streams the adapter made for this check's subjects are named after them.
        support::delete_streams(&self.prefix.replace('.', "_"));
    }
}

impl Harness for Nats {
    fn name(&self) -> &str {
        match self.form {
            Form::JetStream => "nats jetstream",
            Form::Core => "nats core",
        }
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        let broker = support::broker().await;
        // A publish to a core subject nobody on this connection subscribes to (the
        // producer's) goes out with core NATS, not to a stream.
        if self.form == Form::Core {
            let handed = self.handed.lock().unwrap_or_else(PoisonError::into_inner);
            for address in handed.iter() {
                broker.core(address.clone());
            }
        }
        Arc::new(broker)
    }

    fn fresh_address(&self) -> Address {
        let n = self.taken.fetch_add(1, Ordering::Relaxed);
        let address = Address::new(format!("{}.{n}", self.prefix));
        self.handed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(address.clone());
        address
    }

    fn mount(&self, address: Address) -> Mount {
        match self.form {
            Form::JetStream => Mount::new(address),
            // The form under test, not a tuning: at most once.
            Form::Core => Mount::new(address).option(Core::new()),
        }
    }

    /// NATS headers are text.
    fn binary_headers(&self) -> bool {
        false
    }

    /// A JetStream subscription drains at a graceful stop; core NATS has nothing to.
    fn drains(&self) -> bool {
        self.form == Form::JetStream
    }

    /// JetStream stores a publish whose `Nats-Msg-Id` (the adapter's, from the
    /// `message-id`) it stored within its duplicate window (2 min) once.
    fn drops_repeated_publishes(&self) -> bool {
        self.form == Form::JetStream
    }

    /// A subject a sealed stream holds: JetStream refuses a publish to it at once. (A
    /// subject no stream holds will not do: the adapter makes a stream for a dead letter
    /// that has none.)
    fn unpublishable_address(&self) -> Option<Address> {
        match self.form {
            Form::JetStream => {
                let n = self.taken.fetch_add(1, Ordering::Relaxed);
                let subject = format!("{}.sealed{n}", self.prefix);
                support::sealed_stream(&subject);
                Some(Address::new(subject))
            }
            Form::Core => None,
        }
    }

    fn capabilities(&self) -> Capabilities {
        match self.form {
            Form::JetStream => Capabilities {
                settles: true,
                requeues: true,
                counts: true,
                delays: Some(ruststream_core::Capabilities::ANY_DELAY),
                dead_letters: false,
                moves: false,
            },
            Form::Core => Capabilities::NONE,
        }
    }
}

mod jetstream {
    ruststream_conformance::conformance_tests!(super::Nats::new(super::Form::JetStream));
}

mod core {
    // SPEC §2: a form that does not settle answers `ack()` with `AckError::Unsupported`
    // (logged); the suite expects exactly that where the form does not settle.
    ruststream_conformance::conformance_tests!(super::Nats::new(super::Form::Core));
}
