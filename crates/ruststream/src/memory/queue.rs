//! One queue of the memory broker: ready messages, messages out for delivery, waiters.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::task::Waker;

use ruststream_core::{Address, Message};

use super::lock;

/// A message stored in a queue with the number of times it was delivered.
pub(super) struct Stored {
    pub(super) message: Message,
    pub(super) deliveries: u32,
}

enum Slot {
    Free {
        generation: u32,
    },
    Out {
        generation: u32,
        consumer: u64,
        stored: Stored,
    },
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

pub(super) struct Queue {
    address: Address,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    ready: VecDeque<Stored>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    unsettled: usize,
    delayed: usize,
    waiters: Vec<Waker>,
    closed: bool,
    next_consumer: u64,
    consumers: usize,
}

/// A message handed to a consumer: what it needs to build a delivery.
pub(super) struct Taken {
    pub(super) message: Message,
    pub(super) deliveries: u32,
    pub(super) slot: u32,
    pub(super) generation: u32,
}

pub(super) enum Poll {
    Taken(Taken),
    Empty,
    Closed,
}

impl Queue {
    pub(super) fn new(address: Address) -> Self {
        Self {
            address,
            state: Mutex::new(State::default()),
        }
    }

    pub(super) fn address(&self) -> &Address {
        &self.address
    }

    pub(super) fn new_consumer(&self) -> u64 {
        let mut state = lock(&self.state);
        state.next_consumer += 1;
        state.consumers += 1;
        state.next_consumer
    }

    pub(super) fn push(&self, message: Message, deliveries: u32) {
        let waiters = {
            let mut state = lock(&self.state);
            state.ready.push_back(Stored {
                message,
                deliveries,
            });
            std::mem::take(&mut state.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    /// Takes the next ready message for `consumer`; `track` keeps it until settled.
    pub(super) fn take(&self, consumer: u64, track: bool, waker: &Waker) -> Poll {
        let mut state = lock(&self.state);
        if state.closed {
            return Poll::Closed;
        }
        let Some(mut stored) = state.ready.pop_front() else {
            if !state.waiters.iter().any(|w| w.will_wake(waker)) {
                state.waiters.push(waker.clone());
            }
            return Poll::Empty;
        };
        stored.deliveries += 1;
        let deliveries = stored.deliveries;
        if !track {
            return Poll::Taken(Taken {
                message: stored.message,
                deliveries,
                slot: u32::MAX,
                generation: 0,
            });
        }
        let message = stored.message.clone();
        let out = |generation| Slot::Out {
            generation,
            consumer,
            stored,
        };
        let (slot, generation) = match state.free.pop() {
            Some(slot) => {
                let entry = &mut state.slots[slot as usize];
                let generation = match entry {
                    Slot::Free { generation } => generation.wrapping_add(1),
                    // Never: a slot on the free list is free.
                    Slot::Out { .. } => 0,
                };
                *entry = out(generation);
                (slot, generation)
            }
            None => {
                let slot = u32::try_from(state.slots.len()).unwrap_or(u32::MAX);
                state.slots.push(out(0));
                (slot, 0)
            }
        };
        state.unsettled += 1;
        Poll::Taken(Taken {
            message,
            deliveries,
            slot,
            generation,
        })
    }

    /// Removes a message out for delivery; `None` if it is no longer out (its
    /// consumer went away and it was handed back).
    pub(super) fn finish(&self, slot: u32, generation: u32) -> Option<Stored> {
        let mut state = lock(&self.state);
        let entry = state.slots.get_mut(slot as usize)?;
        match entry {
            Slot::Out { generation: g, .. } if *g == generation => {}
            _ => return None,
        }
        let Slot::Out { stored, .. } = std::mem::replace(entry, Slot::Free { generation }) else {
            return None;
        };
        state.free.push(slot);
        state.unsettled -= 1;
        Some(stored)
    }

    /// Hands every message out to `consumer` back to the front of the queue, in order,
    /// as `consumer` goes away.
    pub(super) fn release(&self, consumer: u64) {
        let waiters = {
            let mut state = lock(&self.state);
            state.consumers -= 1;
            let mut back = Vec::new();
            for (index, entry) in state.slots.iter_mut().enumerate() {
                if let Slot::Out {
                    consumer: c,
                    generation,
                    ..
                } = entry
                    && *c == consumer
                {
                    let generation = *generation;
                    if let Slot::Out { stored, .. } =
                        std::mem::replace(entry, Slot::Free { generation })
                    {
                        back.push((index, stored));
                    }
                }
            }
            for (index, stored) in back.into_iter().rev() {
                state.free.push(u32::try_from(index).unwrap_or(u32::MAX));
                state.unsettled -= 1;
                state.ready.push_front(stored);
            }
            std::mem::take(&mut state.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    pub(super) fn delay_started(&self) {
        lock(&self.state).delayed += 1;
    }

    pub(super) fn delay_ended(&self, stored: Stored) {
        let waiters = {
            let mut state = lock(&self.state);
            state.delayed -= 1;
            state.ready.push_back(stored);
            std::mem::take(&mut state.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    pub(super) fn close(&self) {
        let waiters = {
            let mut state = lock(&self.state);
            state.closed = true;
            std::mem::take(&mut state.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        let state = lock(&self.state);
        Snapshot {
            address: self.address.clone(),
            ready: state.ready.len(),
            unsettled: state.unsettled,
            delayed: state.delayed,
            consumers: state.consumers,
        }
    }

    pub(super) fn ready_messages(&self) -> Vec<Message> {
        lock(&self.state)
            .ready
            .iter()
            .map(|s| s.message.clone())
            .collect()
    }
}
