//! Layers that bound handling: how many handlers run at once, how many start per second.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::Delivery;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{Handling, Layer, Middleware, Subscribed};

/// At most `n` handlers run at once across every subscription the layer is added to
/// (one bound shared by them all: added to the app, it bounds the whole service).
///
/// A handler past the bound waits for a permit before its future runs; the mount's
/// [`timeout`](crate::Mount::timeout) counts the wait.
///
/// ```
/// use ruststream::{Mount, Router, layer::ConcurrencyLimit};
///
/// async fn handle(_: String) {}
/// let router = Router::new()
///     .mount(Mount::new("a").workers(16), handle)
///     .mount(Mount::new("b").workers(16), handle)
///     .layer(ConcurrencyLimit::new(8)); // 8 at once over a and b together
/// # let _ = router;
/// ```
#[derive(Clone, Debug)]
pub struct ConcurrencyLimit(Arc<Semaphore>);

impl ConcurrencyLimit {
    /// At most `n` at once (`0` is taken as `1`).
    pub fn new(n: usize) -> Self {
        Self(Arc::new(Semaphore::new(n.max(1))))
    }
}

impl Layer for ConcurrencyLimit {
    fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(self.clone())
    }
}

impl Middleware for ConcurrencyLimit {
    fn wraps(&self) -> bool {
        true
    }

    fn around(&self, _: &Delivery, handling: Handling) -> Handling {
        let permits = self.0.clone();
        Box::pin(async move {
            // The semaphore is never closed: a permit always comes.
            let _permit = permits.acquire_owned().await;
            handling.await
        })
    }
}

/// At most `rate` handler starts per second on average, with bursts of up to `burst`
/// (a token bucket), across every subscription the layer is added to.
///
/// A handler without a token waits for one before its future runs.
///
/// ```
/// use ruststream::{Mount, layer::RateLimit};
///
/// let mount = Mount::new("emails").layer(RateLimit::new(50.0, 10)); // 50/s, bursts of 10
/// # let _ = mount;
/// ```
#[derive(Clone, Debug)]
pub struct RateLimit(Arc<Bucket>);

#[derive(Debug)]
struct Bucket {
    per_token: Duration,
    burst: u32,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    at: Instant,
}

impl RateLimit {
    /// `rate` starts per second on average (at least one per hour), up to `burst` at
    /// once (`0` is taken as `1`).
    pub fn new(rate: f64, burst: u32) -> Self {
        let rate = if rate.is_finite() && rate > 1.0 / 3600.0 {
            rate
        } else {
            1.0 / 3600.0
        };
        let burst = burst.max(1);
        Self(Arc::new(Bucket {
            per_token: Duration::from_secs_f64(1.0 / rate),
            burst,
            state: Mutex::new(BucketState {
                tokens: f64::from(burst),
                at: Instant::now(),
            }),
        }))
    }
}

impl Bucket {
    /// Takes a token: how long to wait for it (zero if there was one).
    fn take(&self) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let refilled =
            now.saturating_duration_since(state.at).as_secs_f64() / self.per_token.as_secs_f64();
        state.tokens = (state.tokens + refilled).min(f64::from(self.burst));
        state.at = now;
        // Taken now even if owed: waiters line up one token apart.
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            Duration::ZERO
        } else {
            self.per_token.mul_f64(-state.tokens)
        }
    }
}

impl Layer for RateLimit {
    fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(self.clone())
    }
}

impl Middleware for RateLimit {
    fn wraps(&self) -> bool {
        true
    }

    fn around(&self, _: &Delivery, handling: Handling) -> Handling {
        let bucket = self.0.clone();
        Box::pin(async move {
            let wait = bucket.take();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            handling.await
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RateLimit;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_gives_a_burst_then_one_token_per_period() {
        let limit = RateLimit::new(10.0, 3);
        let waits: Vec<Duration> = (0..5).map(|_| limit.0.take()).collect();
        assert_eq!(&waits[..3], &[Duration::ZERO; 3], "the burst");
        assert_eq!(waits[3], Duration::from_millis(100));
        assert_eq!(waits[4], Duration::from_millis(200), "waiters line up");
        tokio::time::advance(Duration::from_secs(1)).await;
        // 10 tokens came in, 2 were owed: the bucket is full again (3).
        assert_eq!(limit.0.take(), Duration::ZERO);
    }
}
