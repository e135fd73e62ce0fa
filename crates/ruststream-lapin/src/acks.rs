//! A channel's acks coalesced: one `basic.ack multiple=true` over a run of settled tags.
//!
//! RabbitMQ's cost per message is mostly per frame, and a quorum queue applies each ack
//! through its log: one `basic.ack` covering a run of delivery tags costs the broker
//! about what one ack costs. A channel's delivery tags are 1, 2, 3, … (every delivery on
//! it comes from its one consumer), and `basic.ack` with `multiple=true` and tag `T`
//! settles every delivery up to `T` the broker still holds. So it is sent only where
//! every tag up to `T` is either an ack waiting here or already settled by a frame that
//! was written (a `basic.nack` or `basic.reject` of its own, an earlier ack): never over
//! a delivery still being handled, nor over one whose other settlement is not on the
//! wire yet. And `T` itself is always a waiting ack, never a tag the broker no longer
//! holds (RabbitMQ closes the channel on an unknown tag, and every unsettled delivery
//! comes back).
//!
//! A flush starts when an ack arrives and none is under way. It gathers first: it
//! yields while the tasks that are ready (handlers finishing, a sequential loop taking
//! what is buffered) add acks, then waits up to [`HOLD`] for a run of [`RUN`] acks, or
//! of as many as can wait at once where that is fewer (`n` workers each wait for their
//! own ack: `n - 1`). Then it takes every waiting ack and sends one `multiple=true` frame
//! for the run just above what is settled, and a plain `basic.ack` for each ack above a
//! gap (a delivery still in hand: nothing waits for it). Each ack's `Settling` resolves
//! once the frame covering it is written; acks arriving meanwhile go in the next flush.
//! Every frame passes the channel's [`Gate`], counted by the deliveries it settles.
//! Once the channel is [`Lost`], every ack still waiting (or whose frame is not written
//! yet) ends as `Disconnected` at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lapin::Channel;
use lapin::options::BasicAckOptions;
use ruststream_core::AckError;
use tokio::sync::{Notify, oneshot};

use crate::gate::Gate;
use crate::lost::Lost;

type Waiter = oneshot::Sender<Result<(), AckError>>;

/// A flush waits for up to this many acks to share its frame …
const RUN: usize = 64;
/// … for this long at most.
const HOLD: Duration = Duration::from_millis(1);

/// How many acks a flush waits for: [`RUN`], but never more than can wait at once, nor
/// more than a quarter of the prefetch (RabbitMQ sends on while a run gathers only with
/// room left in the prefetch). The runtime holds at most `in_flight` deliveries, and one
/// of them may be in its handler while the rest wait for their acks (a sequential loop
/// lets `in_flight - 1` trail; `n` workers each wait for their own).
fn run_for(in_flight: usize, prefetch: u16) -> usize {
    RUN.min(in_flight.saturating_sub(1))
        .min(usize::from(prefetch) / 4)
        .max(1)
}

/// Up to how many times a flush yields for the acks of the same moment to join it.
const GATHER_YIELDS: usize = 8;

/// The acks of one channel.
#[derive(Debug)]
pub(crate) struct Acks {
    channel: Channel,
    gate: Arc<Gate>,
    lost: Arc<Lost>,
    state: Mutex<State>,
    /// How many waiting acks a flush waits for (see [`Acks::gather`]).
    run: usize,
    /// Told when `run` acks wait.
    enough: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Every tag up to here is settled on the wire.
    floor: u64,
    /// Tags above the floor settled on the wire by frames of their own.
    settled: BTreeSet<u64>,
    /// Acks waiting for a flush, by tag.
    waiting: BTreeMap<u64, Waiter>,
    /// A flush is under way (it takes what arrives meanwhile).
    flushing: bool,
}

impl State {
    /// `tag`'s settlement was written.
    fn settle(&mut self, tag: u64) {
        if tag > self.floor {
            self.settled.insert(tag);
        }
        self.raise();
    }

    /// Every tag up to `end` is settled (a `multiple=true` ack was written).
    fn cover(&mut self, end: u64) {
        self.floor = self.floor.max(end);
        self.raise();
    }

    fn raise(&mut self) {
        let floor = self.floor;
        self.settled.retain(|&t| t > floor);
        while self.settled.remove(&(self.floor + 1)) {
            self.floor += 1;
        }
    }
}

/// What one flush sends: a `multiple=true` ack up to `end` for the first `run` waiting
/// acks, then a plain ack for each of `single`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    end: Option<u64>,
    run: usize,
    single: Vec<u64>,
}

/// The frames for the `waiting` tags (ascending), with every tag up to `floor` and
/// those in `settled` already settled on the wire.
fn plan(floor: u64, settled: &BTreeSet<u64>, waiting: impl IntoIterator<Item = u64>) -> Plan {
    let mut plan = Plan::default();
    // The highest tag the run covers so far, settled tags included.
    let mut reach = floor;
    for tag in waiting {
        if plan.single.is_empty() {
            while settled.contains(&(reach + 1)) {
                reach += 1;
            }
            if tag == reach + 1 {
                reach = tag;
                plan.end = Some(tag);
                plan.run += 1;
                continue;
            }
        }
        plan.single.push(tag);
    }
    plan
}

impl Acks {
    /// The acks of `channel`, passing `gate`, given up once `lost`, for a consumer whose
    /// handlers hold at most `in_flight` deliveries at once.
    pub(crate) fn new(
        channel: Channel,
        gate: Arc<Gate>,
        lost: Arc<Lost>,
        in_flight: usize,
        prefetch: u16,
    ) -> Self {
        Self {
            channel,
            gate,
            lost,
            run: run_for(in_flight, prefetch),
            state: Mutex::new(State::default()),
            enough: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Acks `tag`: resolves once the frame covering it is written.
    pub(crate) fn ack(
        self: &Arc<Self>,
        tag: u64,
    ) -> impl Future<Output = Result<(), AckError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = self.lock();
            state.waiting.insert(tag, tx);
            if state.waiting.len() == self.run {
                self.enough.notify_one();
            }
            !std::mem::replace(&mut state.flushing, true)
        };
        if start {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(Arc::clone(self).flush())),
                Err(_) => {
                    let mut state = self.lock();
                    state.flushing = false;
                    if let Some(waiter) = state.waiting.remove(&tag) {
                        let _ = waiter.send(Err(AckError::Refused(
                            "settled outside a tokio runtime".to_owned(),
                        )));
                    }
                }
            }
        }
        async move { rx.await.unwrap_or(Err(AckError::Disconnected)) }
    }

    /// `tag` was settled by a frame of its own (`basic.nack`, `basic.reject`), now
    /// written: acks above it may cover it.
    pub(crate) fn settled(&self, tag: u64) {
        self.lock().settle(tag);
    }

    async fn flush(self: Arc<Self>) {
        loop {
            {
                let mut state = self.lock();
                if self.lost.is_set() {
                    for (_, waiter) in std::mem::take(&mut state.waiting) {
                        let _ = waiter.send(Err(AckError::Disconnected));
                    }
                }
                if state.waiting.is_empty() {
                    state.flushing = false;
                    return;
                }
            }
            // Only this task takes acks out: what waits now still waits after gathering.
            self.gather().await;
            let (plan, mut waiters) = {
                let mut state = self.lock();
                let waiting = std::mem::take(&mut state.waiting);
                let plan = plan(state.floor, &state.settled, waiting.keys().copied());
                (plan, waiting.into_values())
            };
            if let Some(end) = plan.end {
                let multiple = BasicAckOptions { multiple: true };
                let result = self
                    .until_lost(async {
                        self.gate.pass_many(plan.run as u64).await;
                        written(&self.channel, self.channel.basic_ack(end, multiple).await)
                    })
                    .await;
                if result.is_ok() {
                    self.lock().cover(end);
                }
                for waiter in waiters.by_ref().take(plan.run) {
                    let _ = waiter.send(result.clone());
                }
            }
            for (tag, waiter) in plan.single.into_iter().zip(waiters.by_ref()) {
                let result = self
                    .until_lost(async {
                        self.gate.pass().await;
                        let single = BasicAckOptions::default();
                        written(&self.channel, self.channel.basic_ack(tag, single).await)
                    })
                    .await;
                if result.is_ok() {
                    self.settled(tag);
                }
                let _ = waiter.send(result);
            }
        }
    }

    /// `frame`'s result, or `Disconnected` once the channel is lost.
    async fn until_lost(
        &self,
        frame: impl Future<Output = Result<(), AckError>>,
    ) -> Result<(), AckError> {
        self.lost
            .or(frame)
            .await
            .unwrap_or(Err(AckError::Disconnected))
    }

    /// Gathers acks for a flush: first it lets the tasks that are ready run (handlers
    /// finishing, a sequential loop taking what is buffered) while each round adds acks;
    /// then, where fewer than its run wait, it waits for the run for [`HOLD`] at most.
    /// The run is never more than can wait at once ([`run_for`]), so handlers that each
    /// wait for their own ack are not held.
    async fn gather(&self) {
        let mut waiting = self.lock().waiting.len();
        for _ in 0..GATHER_YIELDS {
            tokio::task::yield_now().await;
            let now = self.lock().waiting.len();
            if now == waiting || now >= self.run {
                break;
            }
            waiting = now;
        }
        if self.lock().waiting.len() < self.run {
            let enough = self.enough.notified();
            let _ = tokio::time::timeout(HOLD, enough).await;
        }
    }
}

/// A settlement's frame was written, or why not.
pub(crate) fn written(channel: &Channel, sent: lapin::Result<()>) -> Result<(), AckError> {
    sent.map_err(|e| {
        if channel.status().connected() {
            AckError::Refused(e.to_string())
        } else {
            AckError::Disconnected
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{Plan, State, plan};

    fn set(tags: &[u64]) -> BTreeSet<u64> {
        tags.iter().copied().collect()
    }

    #[test]
    fn the_run_covers_waiting_and_settled_tags_and_ends_on_a_waiting_one() {
        // (floor, settled, waiting) -> plan
        let table: &[(u64, &[u64], &[u64], Plan)] = &[
            // A contiguous run from the floor: one frame.
            (
                0,
                &[],
                &[1, 2, 3],
                Plan {
                    end: Some(3),
                    run: 3,
                    single: vec![],
                },
            ),
            // A delivery in hand (4) breaks the run: above it, plain acks.
            (
                0,
                &[],
                &[1, 2, 3, 5, 6],
                Plan {
                    end: Some(3),
                    run: 3,
                    single: vec![5, 6],
                },
            ),
            // Nothing next to the floor: all plain.
            (
                10,
                &[],
                &[12, 13],
                Plan {
                    end: None,
                    run: 0,
                    single: vec![12, 13],
                },
            ),
            // A tag settled by its own frame (2) is inside the run.
            (
                0,
                &[2],
                &[1, 3],
                Plan {
                    end: Some(3),
                    run: 2,
                    single: vec![],
                },
            ),
            (
                0,
                &[1, 2],
                &[3],
                Plan {
                    end: Some(3),
                    run: 1,
                    single: vec![],
                },
            ),
            // The run never ends on a settled tag: 6 is settled, 7 in hand, 9 waits.
            // (An ack of 6 would be of a tag RabbitMQ no longer holds: channel error.)
            (
                4,
                &[6],
                &[5, 9],
                Plan {
                    end: Some(5),
                    run: 1,
                    single: vec![9],
                },
            ),
            (
                4,
                &[5, 6],
                &[9],
                Plan {
                    end: None,
                    run: 0,
                    single: vec![9],
                },
            ),
            // Nothing waits.
            (3, &[5], &[], Plan::default()),
        ];
        for (floor, settled, waiting, expected) in table {
            let got = plan(*floor, &set(settled), waiting.iter().copied());
            assert_eq!(
                &got, expected,
                "floor {floor}, settled {settled:?}, waiting {waiting:?}"
            );
        }
    }

    #[test]
    fn a_flush_waits_for_no_more_acks_than_can_wait() {
        use super::run_for;
        // A sequential loop (1 in hand + 64 trailing), n workers, one at a time; with
        // the default prefetch (256).
        assert_eq!(run_for(65, 256), 64);
        assert_eq!(run_for(8, 256), 7);
        assert_eq!(run_for(1, 256), 1);
        assert_eq!(run_for(0, 256), 1);
        assert_eq!(run_for(10_000, 10_000), 64);
        // A small prefetch: a quarter of it, so that RabbitMQ has room to send on while
        // a run gathers.
        assert_eq!(run_for(65, 65), 16);
        assert_eq!(run_for(65, 2), 1);
    }

    #[test]
    fn the_floor_rises_over_what_is_settled() {
        let mut state = State::default();
        state.settle(2);
        state.settle(3);
        assert_eq!((state.floor, state.settled.len()), (0, 2));
        state.settle(1);
        assert_eq!((state.floor, state.settled.len()), (3, 0));
        state.settle(7);
        state.cover(5);
        assert_eq!((state.floor, state.settled.len()), (5, 1));
        state.settle(6);
        assert_eq!((state.floor, state.settled.len()), (7, 0));
        // A tag at or below the floor changes nothing.
        state.settle(4);
        assert_eq!((state.floor, state.settled.len()), (7, 0));
    }
}
