//! Prometheus metrics: a small registry of atomic counters, rendered as the text
//! exposition format.
//!
//! Hand-rolled rather than the `metrics` facade: every series of a subscription is a
//! field of one struct its middleware holds, so counting is an atomic add with no key
//! lookup, no lock and no allocation on the delivery path, and the crate gains no
//! dependency.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::Address;

use super::names::{PLANS, VERDICTS, plan_kind};

use crate::layer::Subscribed;

mod counting;

pub use counting::MetricsLayer;

/// The upper bounds of the handler-duration histogram, in seconds (OpenTelemetry's
/// defaults for `messaging.process.duration`).
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
/// A service's metrics, served as Prometheus text by [`render`](Metrics::render) (and
/// on `/metrics` by the HTTP endpoint). Cheap to clone; clones share the counts.
///
/// Per subscription (label `messaging_destination_name`): deliveries received, outcomes
/// by verdict, settlements by plan, dead letters the broker moves, decode failures,
/// panics, timeouts, settlement errors,
/// a handler-duration histogram, deliveries in flight, whether it is attached and how
/// often it reattached; retry copies waiting for their delay; per publish destination:
/// messages sent and failed.
///
/// ```
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use ruststream::{App, memory::MemoryBroker, observe::Metrics};
///
/// async fn handle(_: String) {}
/// let metrics = Metrics::new();
/// let broker = MemoryBroker::new();
/// let running = App::new(broker.clone()).metrics(&metrics).mount("orders", handle).start().await?;
/// running.publisher().publish("orders", &"hello").await?;
/// # tokio::time::sleep(std::time::Duration::from_millis(50)).await;
/// let text = metrics.render();
/// assert!(text.contains(r#"messaging_client_consumed_messages_total{messaging_destination_name="orders"} 1"#));
/// running.stop().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Metrics(Arc<Registry>);

#[derive(Default)]
struct Registry {
    subscriptions: Mutex<Vec<Arc<Series>>>,
    destinations: Mutex<Vec<(Address, Arc<Sent>)>>,
}

/// One subscription's series.
struct Series {
    subscribed: Subscribed,
    received: AtomicU64,
    in_flight: AtomicI64,
    verdicts: [AtomicU64; 4],
    plans: [AtomicU64; 11],
    decode_failures: AtomicU64,
    panics: AtomicU64,
    timeouts: AtomicU64,
    short_circuits: AtomicU64,
    settlement_errors: AtomicU64,
    broker_dead_letters: AtomicU64,
    buckets: [AtomicU64; 14],
    duration_nanos: AtomicU64,
    durations: AtomicU64,
}

#[derive(Default)]
struct Sent {
    messages: AtomicU64,
    failures: AtomicU64,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// The layer that counts into these metrics: add it to an app (which
    /// [`App::metrics`](crate::App::metrics) does), a router or a mount. Keep it outside
    /// any layer that settles deliveries before their handler, so that it sees each
    /// delivery it sees settled.
    pub fn layer(&self) -> MetricsLayer {
        MetricsLayer(self.clone())
    }

    fn series(&self, subscribed: &Subscribed) -> Arc<Series> {
        let mut all = lock(&self.0.subscriptions);
        if let Some(series) = all
            .iter()
            .find(|s| s.subscribed.address == subscribed.address)
        {
            return series.clone();
        }
        let series = Arc::new(Series {
            subscribed: subscribed.clone(),
            received: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            verdicts: Default::default(),
            plans: Default::default(),
            decode_failures: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            short_circuits: AtomicU64::new(0),
            settlement_errors: AtomicU64::new(0),
            broker_dead_letters: AtomicU64::new(0),
            buckets: Default::default(),
            duration_nanos: AtomicU64::new(0),
            durations: AtomicU64::new(0),
        });
        all.push(series.clone());
        series
    }

    fn sent(&self, to: &Address) -> Arc<Sent> {
        let mut all = lock(&self.0.destinations);
        if let Some((_, sent)) = all.iter().find(|(a, _)| a == to) {
            return sent.clone();
        }
        let sent = Arc::new(Sent::default());
        all.push((to.clone(), sent.clone()));
        sent
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let subscriptions = lock(&self.0.subscriptions).clone();
        let destinations = lock(&self.0.destinations).clone();
        let mut out = String::with_capacity(4096);
        let sub = |s: &Series| label(&s.subscribed.address);
        let counter = |out: &mut String, name: &str, help: &str, get: &dyn Fn(&Series) -> u64| {
            header(out, name, help, "counter");
            for s in &subscriptions {
                let _ = writeln!(out, "{name}{{{}}} {}", sub(s), get(s));
            }
        };
        counter(
            &mut out,
            "messaging_client_consumed_messages_total",
            "Deliveries received.",
            &|s| load(&s.received),
        );
        header(
            &mut out,
            "ruststream_outcomes_total",
            "What handlers and failure policies asked for, by verdict.",
            "counter",
        );
        for s in &subscriptions {
            for (verdict, n) in VERDICTS.iter().zip(&s.verdicts) {
                let _ = writeln!(
                    out,
                    "ruststream_outcomes_total{{{},verdict=\"{verdict}\"}} {}",
                    sub(s),
                    load(n)
                );
            }
        }
        header(
            &mut out,
            "ruststream_settlements_total",
            "Settlements carried out, by plan (a copy's kind where there is one, else what became of the original); a copy not published or a settlement refused counts in ruststream_settlement_errors_total instead.",
            "counter",
        );
        for s in &subscriptions {
            for (plan, n) in PLANS.iter().zip(&s.plans) {
                let _ = writeln!(
                    out,
                    "ruststream_settlements_total{{{},plan=\"{plan}\"}} {}",
                    sub(s),
                    load(n)
                );
            }
        }
        counter(
            &mut out,
            "ruststream_broker_dead_letters_total",
            "Retries at the cap on a queue that dead-letters itself: the broker moves each to the dead letter (they count as plan=\"requeue\" above).",
            &|s| load(&s.broker_dead_letters),
        );
        counter(
            &mut out,
            "ruststream_settlement_errors_total",
            "Settlements the broker did not take (or copies not published).",
            &|s| load(&s.settlement_errors),
        );
        counter(
            &mut out,
            "ruststream_decode_failures_total",
            "Payloads that did not decode.",
            &|s| load(&s.decode_failures),
        );
        counter(
            &mut out,
            "ruststream_panics_total",
            "Handlers that panicked.",
            &|s| load(&s.panics),
        );
        counter(
            &mut out,
            "ruststream_timeouts_total",
            "Handlers cancelled at the mount's time limit.",
            &|s| load(&s.timeouts),
        );
        counter(
            &mut out,
            "ruststream_short_circuits_total",
            "Deliveries a middleware settled before their handler.",
            &|s| load(&s.short_circuits),
        );
        counter(
            &mut out,
            "ruststream_reconnects_total",
            "Times the subscription was attached again after losing its broker.",
            &|s| s.subscribed.attached.reconnects(),
        );
        header(
            &mut out,
            "ruststream_in_flight",
            "Deliveries received and not yet settled.",
            "gauge",
        );
        for s in &subscriptions {
            let _ = writeln!(
                out,
                "ruststream_in_flight{{{}}} {}",
                sub(s),
                s.in_flight.load(Ordering::Relaxed).max(0)
            );
        }
        header(
            &mut out,
            "ruststream_attached",
            "Whether the subscription is attached to its broker (1) or reconnecting (0).",
            "gauge",
        );
        for s in &subscriptions {
            let _ = writeln!(
                out,
                "ruststream_attached{{{}}} {}",
                sub(s),
                u8::from(s.subscribed.attached.is_attached())
            );
        }
        header(
            &mut out,
            "messaging_process_duration_seconds",
            "How long handlers ran (those that returned an outcome).",
            "histogram",
        );
        for s in &subscriptions {
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(&s.buckets) {
                cumulative += load(n);
                let _ = writeln!(
                    out,
                    "messaging_process_duration_seconds_bucket{{{},le=\"{bound}\"}} {cumulative}",
                    sub(s)
                );
            }
            let count = load(&s.durations);
            let seconds = Duration::from_nanos(load(&s.duration_nanos)).as_secs_f64();
            let _ = writeln!(
                out,
                "messaging_process_duration_seconds_bucket{{{},le=\"+Inf\"}} {count}",
                sub(s)
            );
            let _ = writeln!(
                out,
                "messaging_process_duration_seconds_sum{{{}}} {seconds}",
                sub(s)
            );
            let _ = writeln!(
                out,
                "messaging_process_duration_seconds_count{{{}}} {count}",
                sub(s)
            );
        }
        header(
            &mut out,
            "ruststream_delayed_copies",
            "Retry copies and held deliveries of the subscription waiting in the process for their delay.",
            "gauge",
        );
        for s in &subscriptions {
            let _ = writeln!(
                out,
                "ruststream_delayed_copies{{{}}} {}",
                sub(s),
                s.subscribed.delayed()
            );
        }
        header(
            &mut out,
            "messaging_client_sent_messages_total",
            "Messages the service's publisher sent.",
            "counter",
        );
        for (to, sent) in &destinations {
            let _ = writeln!(
                out,
                "messaging_client_sent_messages_total{{{}}} {}",
                label(to),
                load(&sent.messages)
            );
        }
        header(
            &mut out,
            "ruststream_publish_failures_total",
            "Publishes the broker did not take.",
            "counter",
        );
        for (to, sent) in &destinations {
            let _ = writeln!(
                out,
                "ruststream_publish_failures_total{{{}}} {}",
                label(to),
                load(&sent.failures)
            );
        }
        out
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn load(n: &AtomicU64) -> u64 {
    n.load(Ordering::Relaxed)
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The destination label, its value escaped as the exposition format asks.
fn label(address: &Address) -> String {
    let mut value = String::with_capacity(address.as_str().len());
    for c in address.as_str().chars() {
        match c {
            '\\' => value.push_str("\\\\"),
            '"' => value.push_str("\\\""),
            '\n' => value.push_str("\\n"),
            c => value.push(c),
        }
    }
    format!("messaging_destination_name=\"{value}\"")
}

#[cfg(test)]
mod tests {
    use ruststream_core::Address;

    use super::label;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            label(&Address::new("a\"b\\c\nd")),
            r#"messaging_destination_name="a\"b\\c\nd""#
        );
    }
}
