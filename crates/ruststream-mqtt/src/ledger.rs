//! One subscription's deliveries in hand: the connection they came on (its epoch), their
//! arrival order, and the PUBACKs released to be written.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ruststream_core::AckError;
use tokio::sync::{mpsc, oneshot};

use crate::sequencer::Sequencer;

/// A PUBACK to write, and who waits for it to be written.
#[derive(Debug)]
pub(crate) struct Release {
    pub(crate) epoch: u64,
    pub(crate) pkid: u16,
    pub(crate) done: oneshot::Sender<Result<(), AckError>>,
}

impl Release {
    /// Tells the waiter the PUBACK cannot be written (its connection is gone).
    pub(crate) fn lost(self) {
        let _ = self.done.send(Err(AckError::Disconnected));
    }
}

/// What identifies a delivery to its acker: its connection and place in arrival order
/// (`None` for QoS 0, which takes no PUBACK) and its packet id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub(crate) epoch: u64,
    pub(crate) seq: Option<u64>,
    pub(crate) pkid: u16,
}

/// How long an abandoned delivery may wait for the rest to be settled before the
/// subscription reconnects anyway (MQTT redelivers only on a new connection).
const ABANDON_WAIT: Duration = Duration::from_secs(2);

/// How long a reconnect for an abandoned delivery waits for released PUBACKs to be written.
const WRITE_WAIT: Duration = Duration::from_millis(100);

/// The deliveries of one subscription's current connection.
pub(crate) struct Ledger {
    state: Mutex<State>,
    releases: mpsc::UnboundedSender<Release>,
}

struct State {
    epoch: u64,
    order: Sequencer<Release>,
    abandoned_at: Option<Instant>,
}

impl Ledger {
    /// A ledger sending the PUBACKs it releases, in order, to `releases`.
    pub(crate) fn new(releases: mpsc::UnboundedSender<Release>) -> Self {
        Self {
            state: Mutex::new(State {
                epoch: 0,
                order: Sequencer::default(),
                abandoned_at: None,
            }),
            releases,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new connection: what the last one held can no longer be acknowledged (the broker
    /// delivers it again on this one).
    pub(crate) fn new_epoch(&self) -> u64 {
        let mut state = self.state();
        state.epoch += 1;
        state.order.take_held().into_iter().for_each(Release::lost);
        state.order = Sequencer::default();
        state.abandoned_at = None;
        state.epoch
    }

    /// Numbers a QoS 1 arrival on connection `epoch`.
    pub(crate) fn arrive(&self, epoch: u64) -> Option<u64> {
        let mut state = self.state();
        (state.epoch == epoch).then(|| state.order.arrive())
    }

    /// Settles a delivery: `Some` PUBACK to write once every earlier one is, `None` to pass
    /// it over unacknowledged (abandoned).
    pub(crate) fn settle(&self, ticket: Ticket, release: Option<Release>) -> Result<(), AckError> {
        let mut state = self.state();
        let Some(seq) = ticket.seq.filter(|_| ticket.epoch == state.epoch) else {
            if let Some(release) = release {
                release.lost();
            }
            return Err(AckError::Disconnected);
        };
        if release.is_none() {
            state.abandoned_at.get_or_insert_with(Instant::now);
        }
        let released = state
            .order
            .settle(seq, release)
            .map_err(|refused| AckError::Refused(refused.to_string()))?;
        // Sent under the lock: the writer gets them in arrival order.
        for release in released {
            if let Err(unsent) = self.releases.send(release) {
                unsent.0.lost();
            }
        }
        Ok(())
    }

    /// Whether the connection should be made anew to have abandoned deliveries sent again:
    /// once nothing else is unsettled, or after [`ABANDON_WAIT`].
    pub(crate) fn wants_reconnect(&self) -> bool {
        let state = self.state();
        state.abandoned_at.is_some_and(|at| {
            let waited = at.elapsed();
            (state.order.outstanding() == 0 && waited >= WRITE_WAIT) || waited >= ABANDON_WAIT
        })
    }
}
