//! A test double for a destination: publishes through `inner` and records each message's
//! payload in order, after failing the first `failures` publishes of any payload that
//! contains `failing`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

/// The payloads published, in order, by every clone.
pub type Log = Arc<Mutex<Vec<(usize, String)>>>;

pub struct Recording {
    pub inner: Arc<dyn Publish>,
    pub log: Log,
    /// Tells the relays sharing a log apart.
    pub relay: usize,
    pub failing: Option<String>,
    pub failures: AtomicUsize,
    pub delay: Duration,
    /// Publishes from this many on never finish (a broker that stopped answering).
    pub stall_after: usize,
    pub started: AtomicUsize,
}

impl Recording {
    pub fn new(inner: Arc<dyn Publish>, log: Log, relay: usize) -> Self {
        Self {
            inner,
            log,
            relay,
            failing: None,
            failures: AtomicUsize::new(0),
            delay: Duration::ZERO,
            stall_after: usize::MAX,
            started: AtomicUsize::new(0),
        }
    }

    pub fn failing(mut self, payload: &str, times: usize) -> Self {
        self.failing = Some(payload.to_owned());
        self.failures = AtomicUsize::new(times);
        self
    }

    pub fn stall_after(mut self, publishes: usize) -> Self {
        self.stall_after = publishes;
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

pub fn payloads(log: &Log) -> Vec<String> {
    let log = log.lock().unwrap_or_else(PoisonError::into_inner);
    log.iter().map(|(_, p)| p.clone()).collect()
}

impl Publish for Recording {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            let payload = String::from_utf8_lossy(&message.payload).into_owned();
            let fails = self.failing.as_deref().is_some_and(|f| payload.contains(f))
                && self
                    .failures
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if fails {
                return Err(PublishError {
                    address: to.to_string(),
                    kind: PublishErrorKind::Refused("the destination is down".to_owned()),
                    message,
                });
            }
            if self.started.fetch_add(1, Ordering::SeqCst) >= self.stall_after {
                std::future::pending::<()>().await;
            }
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            self.inner.publish(to, message).await?;
            self.log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((self.relay, payload));
            Ok(())
        })
    }
}
