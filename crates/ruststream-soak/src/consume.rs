//! The consumers: the service under test and the dead-letter consumer.
//!
//! The service's handler fails on purpose: of every 100 calls it panics on 1 (the mount's
//! panic policy is `Policy::Retry`), returns `retry()` on 15 and `retry_after(50ms)` on
//! 15, and acks the rest, after recording the id durably. The mount declares
//! `max_attempts(5)` and a dead letter, whose consumer records every id it receives.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ruststream::core::DEAD_LETTER_ATTEMPT;
use ruststream::{App, Attempt, Headers, Mount, Outcome, Policy, State, ack, retry, retry_after};
use serde::{Deserialize, Serialize};

use crate::connect::connect_patiently;
use crate::form::Form;
use crate::record::{EventLog, Kind};

/// The message the producer publishes.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Numbered {
    pub(crate) id: u64,
}

/// The cap every scenario's mount declares.
pub(crate) const MAX_ATTEMPTS: u32 = 5;

/// The delay of a `retry_after`.
pub(crate) const DELAY: Duration = Duration::from_millis(50);

/// The dead letter of `address`.
pub(crate) fn dead_letter_of(address: &str) -> String {
    format!("{address}-dead")
}

/// A handler's shared state: its event log and its dice.
#[derive(Clone)]
pub(crate) struct Soak {
    log: Arc<EventLog>,
    dice: Arc<Mutex<u64>>,
}

impl Soak {
    pub(crate) fn new(log: EventLog) -> Self {
        let seed = crate::record::now_ms() ^ (u64::from(std::process::id()) << 32) | 1;
        Self {
            log: Arc::new(log),
            dice: Arc::new(Mutex::new(seed)),
        }
    }

    /// A number in `0..100` (xorshift64).
    fn roll(&self) -> u64 {
        let mut x = self.dice.lock().unwrap_or_else(|e| e.into_inner());
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x % 100
    }

    fn note(&self, kind: Kind, id: u64, attempt: u32) {
        if let Err(error) = self.log.note(kind, id, attempt) {
            // Without its record the run cannot be counted: stop here, unsettled.
            eprintln!("soak: cannot write the event log: {error}");
            std::process::exit(3);
        }
    }
}

/// The service's handler.
async fn handle(Attempt(attempt): Attempt, State(soak): State<Soak>, message: Numbered) -> Outcome {
    let roll = soak.roll();
    let id = message.id;
    if roll < 1 {
        soak.note(Kind::Panic, id, attempt);
        std::panic::panic_any(PlannedPanic);
    }
    if roll < 16 {
        soak.note(Kind::Retry, id, attempt);
        return retry();
    }
    if roll < 31 {
        soak.note(Kind::Delayed, id, attempt);
        return retry_after(DELAY);
    }
    soak.note(Kind::Handled, id, attempt);
    ack()
}

/// The dead-letter consumer's handler: tells the runtime's dead letters (they carry
/// `x-ruststream-dead-letter-attempt`) from what the broker moved there itself.
async fn handle_dead(State(soak): State<Soak>, headers: Headers, message: Numbered) -> Outcome {
    let kind = if headers.get_str(DEAD_LETTER_ATTEMPT).is_some() {
        Kind::Dead
    } else {
        Kind::BrokerDead
    };
    soak.note(kind, message.id, 1);
    ack()
}

/// The payload of the handler's planned panics, which the panic hook keeps quiet about.
struct PlannedPanic;

/// Keeps the planned panics out of stderr; any other panic is printed as usual.
pub(crate) fn quiet_planned_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<PlannedPanic>().is_none() {
            default(info);
        }
    }));
}

/// The service under test, mounted on `address` of `form`.
pub(crate) fn service(app: App, form: Form, address: &str, soak: Soak) -> App {
    let mount = Mount::new(address.to_owned())
        .max_attempts(MAX_ATTEMPTS)
        .dead_letter(dead_letter_of(address))
        .on_panic(Policy::Retry);
    app.state(soak).mount(form.configure(mount), handle)
}

/// The dead-letter consumer of `address`'s dead letter.
pub(crate) fn dead_service(app: App, form: Form, address: &str, soak: Soak) -> App {
    let mount = Mount::new(dead_letter_of(address));
    app.state(soak)
        .mount(form.configure_dead(mount), handle_dead)
}

/// Runs one consumer process until SIGTERM: the service (`dead == false`) or the
/// dead-letter consumer. It writes `<log>.ready` once it has subscribed.
pub(crate) async fn run(
    url: &str,
    form: Form,
    address: &str,
    dead: bool,
    log: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    quiet_planned_panics();
    let url = match form.url_query() {
        Some(query) if url.contains('?') => format!("{url}&{query}"),
        Some(query) => format!("{url}?{query}"),
        None => url.to_owned(),
    };
    let broker = connect_patiently(&url, form).await?;
    let soak = Soak::new(EventLog::create(log)?);
    let app = App::with_broker(broker).name(if dead { "soak-dead" } else { "soak" });
    let app = if dead {
        dead_service(app, form, address, soak)
    } else {
        service(app, form, address, soak)
    };
    let ready = log.with_extension("ready");
    app.on_start(move || {
        let _ = std::fs::write(ready, b"");
    })
    .run()
    .await?;
    Ok(())
}
