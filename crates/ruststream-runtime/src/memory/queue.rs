//! One queue of the memory broker: ready messages, counts, waiters.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Waker;

use ruststream_core::{Address, Message};

use super::lock;

/// A message waiting in a queue, with the number of times it was delivered before and
/// its place in the queue's order.
pub(super) struct Stored {
    pub(super) message: Message,
    pub(super) deliveries: u32,
    pub(super) seq: u64,
}

impl Stored {
    /// A new message; it gets its place when pushed.
    pub(super) fn new(message: Message) -> Self {
        Self {
            message,
            deliveries: 0,
            seq: 0,
        }
    }
}

/// Where a message goes back into a queue.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// At the back, as a new message (published, requeued).
    Back,
    /// Where it was, before every later message (handed back unsettled).
    Kept,
}

/// Counts of one queue at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The queue's address.
    pub address: Address,
    /// Messages waiting for a consumer.
    pub ready: usize,
    /// Messages delivered and not yet settled.
    pub unsettled: usize,
    /// Messages waiting for a native delay to pass.
    pub delayed: usize,
    /// Subscriptions consuming from the queue.
    pub consumers: usize,
}

impl Snapshot {
    /// Nothing waiting, out, or delayed.
    pub fn is_empty(&self) -> bool {
        self.ready == 0 && self.unsettled == 0 && self.delayed == 0
    }
}

/// A queue. A delivered message is not kept here: its [`Delivery`](ruststream_core::Delivery)
/// carries it, and gives it back when it is requeued or dropped unsettled.
pub(super) struct Queue {
    address: Address,
    state: Mutex<State>,
    unsettled: AtomicUsize,
}

#[derive(Default)]
struct State {
    ready: VecDeque<Stored>,
    delayed: usize,
    waiters: Vec<Waker>,
    consumers: usize,
    next_seq: u64,
}

impl State {
    fn insert(&mut self, mut stored: Stored, place: Place) {
        match place {
            Place::Back => {
                self.next_seq += 1;
                stored.seq = self.next_seq;
                self.ready.push_back(stored);
            }
            Place::Kept => {
                let at = self.ready.partition_point(|s| s.seq < stored.seq);
                self.ready.insert(at, stored);
            }
        }
    }
}

impl Queue {
    pub(super) fn new(address: Address) -> Self {
        Self {
            address,
            state: Mutex::new(State::default()),
            unsettled: AtomicUsize::new(0),
        }
    }

    pub(super) fn address(&self) -> &Address {
        &self.address
    }

    pub(super) fn add_consumer(&self) {
        lock(&self.state).consumers += 1;
    }

    pub(super) fn remove_consumer(&self) {
        lock(&self.state).consumers -= 1;
    }

    fn wake(waiters: Vec<Waker>) {
        waiters.into_iter().for_each(Waker::wake);
    }

    /// Puts a message in the queue at `place`.
    pub(super) fn push(&self, stored: Stored, place: Place) {
        let waiters = {
            let mut state = lock(&self.state);
            state.insert(stored, place);
            std::mem::take(&mut state.waiters)
        };
        Self::wake(waiters);
    }

    /// Takes the next ready message, or registers `waker` for the next push; `track`
    /// counts it as unsettled until [`Self::settled`].
    #[inline]
    pub(super) fn take(&self, track: bool, waker: &Waker) -> Option<Stored> {
        let mut state = lock(&self.state);
        let Some(mut stored) = state.ready.pop_front() else {
            if !state.waiters.iter().any(|w| w.will_wake(waker)) {
                state.waiters.push(waker.clone());
            }
            return None;
        };
        drop(state);
        stored.deliveries += 1;
        if track {
            self.unsettled.fetch_add(1, Ordering::AcqRel);
        }
        Some(stored)
    }

    /// A delivered message was settled (or handed back).
    pub(super) fn settled(&self) {
        self.unsettled.fetch_sub(1, Ordering::AcqRel);
    }

    pub(super) fn delay_started(&self) {
        lock(&self.state).delayed += 1;
    }

    pub(super) fn delay_ended(&self, stored: Stored) {
        let waiters = {
            let mut state = lock(&self.state);
            state.delayed -= 1;
            state.insert(stored, Place::Back);
            std::mem::take(&mut state.waiters)
        };
        Self::wake(waiters);
    }

    /// Wakes every waiting consumer, to look again (their connection closed).
    pub(super) fn wake_all(&self) {
        let waiters = std::mem::take(&mut lock(&self.state).waiters);
        Self::wake(waiters);
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        let state = lock(&self.state);
        Snapshot {
            address: self.address.clone(),
            ready: state.ready.len(),
            unsettled: self.unsettled.load(Ordering::Acquire),
            delayed: state.delayed,
            consumers: state.consumers,
        }
    }

    /// Up to `max` ready messages with their sequence numbers, oldest first.
    pub(super) fn browse(&self, max: usize) -> Vec<(u64, Message)> {
        lock(&self.state)
            .ready
            .iter()
            .take(max)
            .map(|s| (s.seq, s.message.clone()))
            .collect()
    }

    /// Removes the ready messages with these sequence numbers; how many there were.
    pub(super) fn remove(&self, seqs: &[u64]) -> usize {
        let mut state = lock(&self.state);
        let before = state.ready.len();
        state.ready.retain(|s| !seqs.contains(&s.seq));
        before - state.ready.len()
    }

    pub(super) fn ready_messages(&self) -> Vec<Message> {
        lock(&self.state)
            .ready
            .iter()
            .map(|s| s.message.clone())
            .collect()
    }
}
