//! Acks of one channel coalesced: `basic.ack multiple=true` over a run of settled tags.
//!
//! RabbitMQ's cost per message is mostly per frame, and a quorum queue applies every ack
//! through its log: one `basic.ack` covering a run of delivery tags costs the broker
//! about what one ack costs. The channel's delivery tags are 1, 2, 3, … (every delivery
//! on it comes from its one consumer), so an ack with `multiple=true` of tag `T` settles
//! every unsettled tag up to `T`. It is sent only where every tag up to `T` is either an
//! ack waiting here or already settled by a frame that was written (a `basic.nack` or
//! `basic.reject` of its own, an earlier ack): never over a delivery still being handled
//! or one whose other settlement is not on the wire yet.
//!
//! Acks wait while a flush is under way and go out together in the next one: a flush
//! takes every waiting ack, sends one `multiple=true` frame for the run that starts just
//! above the settled floor and one plain `basic.ack` for each ack above a gap (a
//! delivery still in hand: nothing waits for it), and resolves each ack's `Settling` once
//! the frame that covers it is written. A flush starts as soon as an ack arrives and none
//! is under way, after yielding once so that the acks of the same moment join it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use lapin::Channel;
use lapin::options::BasicAckOptions;
use ruststream_core::AckError;
use tokio::sync::oneshot;

type Waiter = oneshot::Sender<Result<(), AckError>>;

/// The acks of one channel.
#[derive(Debug)]
pub(crate) struct AckBatch {
    channel: Channel,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Every tag up to here is settled on the wire.
    floor: u64,
    /// Tags above the floor settled on the wire (by a frame of their own).
    settled: BTreeSet<u64>,
    /// Acks waiting for a flush, by tag.
    waiting: BTreeMap<u64, Waiter>,
    /// A flush is under way (it takes what arrives meanwhile).
    flushing: bool,
    /// Acks wait until [`AckBatch::release`] (the consumer is being cancelled).
    held: bool,
}

impl State {
    fn settle(&mut self, tag: u64) {
        if tag > self.floor {
            self.settled.insert(tag);
        }
        while self.settled.remove(&(self.floor + 1)) {
            self.floor += 1;
        }
    }
}

impl AckBatch {
    pub(crate) fn new(channel: Channel) -> Self {
        Self {
            channel,
            state: Mutex::new(State::default()),
        }
    }

    pub(crate) fn channel(&self) -> &Channel {
        &self.channel
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Acks `tag`: the result comes once the frame covering it is written.
    pub(crate) fn ack(
        self: &Arc<Self>,
        tag: u64,
    ) -> impl Future<Output = Result<(), AckError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = self.lock();
            state.waiting.insert(tag, tx);
            !std::mem::replace(&mut state.flushing, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).flush());
        }
        async move { rx.await.unwrap_or(Err(AckError::Disconnected)) }
    }

    /// Acks wait from now on until [`release`](Self::release): while the consumer is
    /// being cancelled, an ack would give RabbitMQ credit for deliveries that can arrive
    /// after cancel-ok, when lapin no longer takes them (they would come back counted
    /// when the channel closes).
    pub(crate) fn hold(&self) {
        self.lock().held = true;
    }

    /// Acks go out again; those that waited are flushed.
    pub(crate) fn release(self: &Arc<Self>) {
        let start = {
            let mut state = self.lock();
            state.held = false;
            !state.waiting.is_empty() && !std::mem::replace(&mut state.flushing, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).flush());
        }
    }

    /// `tag` was settled by a frame of its own, now written.
    pub(crate) fn settled(&self, tag: u64) {
        self.lock().settle(tag);
    }

    async fn flush(self: Arc<Self>) {
        tokio::task::yield_now().await;
        loop {
            let (run, single) = {
                let mut state = self.lock();
                if state.waiting.is_empty() || state.held {
                    state.flushing = false;
                    return;
                }
                let waiting = std::mem::take(&mut state.waiting);
                let mut run = Vec::new();
                let mut end = state.floor;
                let mut single = Vec::new();
                for (tag, waiter) in waiting {
                    // Settled tags between the floor and this one are part of the run.
                    while state.settled.contains(&(end + 1)) {
                        end += 1;
                    }
                    if tag == end + 1 && single.is_empty() {
                        end = tag;
                        run.push(waiter);
                    } else {
                        single.push((tag, waiter));
                    }
                }
                ((end, run), single)
            };
            let (end, run) = run;
            if !run.is_empty() {
                let options = BasicAckOptions { multiple: true };
                let sent = self.channel.basic_ack(end, options).await;
                let result = crate::acker::failed(&self.channel, sent);
                if result.is_ok() {
                    let mut state = self.lock();
                    state.settled.retain(|&t| t > end);
                    state.floor = state.floor.max(end);
                    state.settle(end);
                }
                for waiter in run {
                    let _ = waiter.send(result.clone());
                }
            }
            for (tag, waiter) in single {
                let sent = self
                    .channel
                    .basic_ack(tag, BasicAckOptions::default())
                    .await;
                let result = crate::acker::failed(&self.channel, sent);
                if result.is_ok() {
                    self.settled(tag);
                }
                let _ = waiter.send(result);
            }
        }
    }
}
