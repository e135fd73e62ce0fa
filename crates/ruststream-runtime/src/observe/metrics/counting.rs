//! The layer that counts: the middleware around each mount adds to its subscription's
//! series, the one around the publisher to its destination's.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ruststream_core::{Address, Declaration, Delivery, Message, PublishError, Verdict};

use super::{BUCKETS, Metrics, Series, plan_kind};
use crate::layer::{Layer, Middleware, PublishLayer, PublishMiddleware, Subscribed, Visit};
use crate::outcome::Outcome;
use crate::settled::{Cause, SettleError, Settled};

/// The layer that counts into a [`Metrics`] (around mounts, and around the publisher).
#[derive(Clone)]
pub struct MetricsLayer(pub(super) Metrics);

impl std::fmt::Debug for MetricsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsLayer").finish_non_exhaustive()
    }
}

impl Layer for MetricsLayer {
    fn layer(&self, subscribed: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(Counting(Arc::new(Counted {
            series: self.0.series(subscribed),
            dead_letters_itself: subscribed.capabilities().dead_letters,
            declared: subscribed.declared.clone(),
        })))
    }
}

impl PublishLayer for MetricsLayer {
    fn layer(&self) -> Arc<dyn PublishMiddleware> {
        Arc::new(Sending(self.0.clone()))
    }
}

/// The middleware of one subscription: counts each delivery as it comes, and follows it
/// with the subscription's one shared [`Counted`] (an `Arc` clone: no allocation).
struct Counting(Arc<Counted>);

/// What a subscription's deliveries are counted into.
struct Counted {
    series: Arc<Series>,
    /// The subscription's queue dead-letters a retry at its cap (the broker moves it).
    dead_letters_itself: bool,
    /// The mount's cap and dead letter.
    declared: Declaration,
}

impl Middleware for Counting {
    fn visit(&self, _: &Delivery) -> Option<Arc<dyn Visit>> {
        Some(self.0.clone())
    }

    fn before(&self, _: &Delivery) -> Option<Outcome> {
        let series = &self.0.series;
        series.received.fetch_add(1, Ordering::Relaxed);
        series.in_flight.fetch_add(1, Ordering::Relaxed);
        None
    }
}

impl Visit for Counted {
    fn settled(&self, settled: &Settled) {
        let series = &self.series;
        series.in_flight.fetch_sub(1, Ordering::Relaxed);
        // The histogram counts the handlers that returned an outcome.
        if let (Cause::Handler, Some(elapsed)) = (settled.cause(), settled.elapsed()) {
            let seconds = elapsed.as_secs_f64();
            if let Some(i) = BUCKETS.iter().position(|bound| seconds <= *bound) {
                series.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
            let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
            series.duration_nanos.fetch_add(nanos, Ordering::Relaxed);
            series.durations.fetch_add(1, Ordering::Relaxed);
        }
        let verdict = match settled.verdict() {
            Verdict::Ack => 0,
            Verdict::Drop => 1,
            Verdict::Retry => 2,
            Verdict::RetryAfter(_) => 3,
        };
        series.verdicts[verdict].fetch_add(1, Ordering::Relaxed);
        // A plan with a copy counts once the copy went out: a dead letter or retry copy
        // that was not published is a settlement error instead.
        if !matches!(settled.error(), Some(SettleError::Copy(_))) {
            series.plans[plan_kind(settled.plan())].fetch_add(1, Ordering::Relaxed);
        }
        let cause = match settled.cause() {
            Cause::Decode(_) => Some(&series.decode_failures),
            Cause::Panic(_) => Some(&series.panics),
            Cause::Timeout(_) => Some(&series.timeouts),
            Cause::Layer => Some(&series.short_circuits),
            _ => None,
        };
        if let Some(counter) = cause {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if !settled.is_ok() {
            series.settlement_errors.fetch_add(1, Ordering::Relaxed);
        } else if self.dead_letters_itself
            && crate::plan_log::broker_dead_letters(
                settled.verdict(),
                settled.attempt(),
                &self.declared,
            )
        {
            series.broker_dead_letters.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct Sending(Metrics);

impl PublishMiddleware for Sending {
    fn before(&self, _: &Address, _: &mut Message) {}

    fn after(&self, to: &Address, result: &Result<(), PublishError>) {
        let sent = self.0.sent(to);
        let counter = if result.is_ok() {
            &sent.messages
        } else {
            &sent.failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
