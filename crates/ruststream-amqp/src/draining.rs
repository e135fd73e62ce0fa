//! A graceful stop's drain of one receiving link: no more credit, then the end of the
//! stream once the transfers already under way have arrived.
//!
//! A delivery a stopping service received and gives back unhandled is `released` when
//! the link closes, and RabbitMQ 4 counts every return of a quorum-queue message against
//! the queue's `x-delivery-limit`: after a few deploys a message no handler ever saw
//! would be dead-lettered by the broker. So a drained link grants no more credit: it
//! sends a flow with `drain` set, on which the broker sends what the credit already
//! granted allows (at most the subscription's window) and uses the rest up; the link
//! hands that out and ends its stream once no transfer has come for [`QUIET`] (at most
//! [`LONGEST`] after the drain began). The service then handles and settles what it
//! received.

use std::time::Duration;

use tokio::time::Instant;

/// How long the link must be quiet after its credit is withdrawn before the stream ends:
/// longer than a transfer already sent takes to arrive.
pub(crate) const QUIET: Duration = Duration::from_millis(200);

/// The longest a drain waits for the link to be quiet.
pub(crate) const LONGEST: Duration = Duration::from_secs(2);

/// Where a link's drain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Draining {
    /// No drain asked (or the form does not drain).
    Idle,
    /// Credit withdrawn; the stream ends at `quiet_at` unless a transfer comes first.
    Quieting {
        /// When the stream ends if nothing more arrives.
        quiet_at: Instant,
        /// The latest the stream ends.
        deadline: Instant,
    },
    /// The stream has ended.
    Done,
}

impl Draining {
    /// The drain begins now.
    pub(crate) fn start(now: Instant) -> Self {
        Self::Quieting {
            quiet_at: now + QUIET,
            deadline: now + LONGEST,
        }
    }

    /// A transfer arrived at `now`: the quiet period starts again (within the deadline).
    pub(crate) fn on_received(&mut self, now: Instant) {
        if let Self::Quieting { quiet_at, deadline } = self {
            *quiet_at = (now + QUIET).min(*deadline);
        }
    }

    /// When the stream ends, while quieting.
    pub(crate) fn ends_at(&self) -> Option<Instant> {
        match self {
            Self::Quieting { quiet_at, .. } => Some(*quiet_at),
            Self::Idle | Self::Done => None,
        }
    }

    /// Whether the link may be granted credit: only before a drain.
    pub(crate) fn grants(&self) -> bool {
        matches!(self, Self::Idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_push_the_end_back_up_to_the_deadline() {
        let t0 = Instant::now();
        let mut drain = Draining::start(t0);
        assert!(!drain.grants());
        assert_eq!(drain.ends_at(), Some(t0 + QUIET));
        drain.on_received(t0 + Duration::from_millis(150));
        assert_eq!(drain.ends_at(), Some(t0 + Duration::from_millis(350)));
        drain.on_received(t0 + LONGEST);
        assert_eq!(drain.ends_at(), Some(t0 + LONGEST));
    }

    #[test]
    fn only_an_idle_link_is_granted_credit() {
        assert!(Draining::Idle.grants());
        assert!(!Draining::Done.grants());
        assert_eq!(Draining::Done.ends_at(), None);
        let mut idle = Draining::Idle;
        idle.on_received(Instant::now());
        assert_eq!(idle, Draining::Idle);
    }
}
