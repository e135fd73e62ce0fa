//! What the broker says it dropped after accepting it: Mosquitto's
//! `$SYS/broker/publish/messages/dropped`.
//!
//! Mosquitto acknowledges a QoS 1 publish, then drops it for a session whose queue is full
//! (`max_queued_messages`, 1,000 by default, a broker setting no client can read): a
//! consumer that falls behind for a second at 1,000 messages a second loses messages its
//! publisher saw acknowledged, and nothing in MQTT tells either side. The broker does count
//! them, in its `$SYS` tree (published every `sys_interval`, 10 s by default, when it
//! changed). The publishing connection subscribes to that count (QoS 0; a broker without
//! it, or one that refuses `$SYS` to this client, sends nothing), each rise is logged as an
//! error, and [`MqttBroker::dropped_by_broker`](crate::MqttBroker::dropped_by_broker)
//! tells the total since this broker connected. The count is the broker's, for every
//! client: drops of other services' sessions are counted too.
//!
//! The value the broker holds when the subscription starts comes retained (the `RETAIN`
//! flag set): that is what it dropped before, a baseline. Mosquitto lets a retained
//! `$SYS` value expire after 60 s unchanged (and publishes none until a first change), so
//! often there is none; then the first value that arrives live is counted whole, as the
//! earlier one is unknown: at worst drops from before this broker connected are reported
//! once, never drops after it are missed.

use std::sync::{Mutex, PoisonError};

/// The `$SYS` topic Mosquitto counts its dropped publishes in.
pub(crate) const TOPIC: &str = "$SYS/broker/publish/messages/dropped";

/// The broker's drop count as this broker has seen it.
#[derive(Debug, Default)]
pub(crate) struct Dropped {
    state: Mutex<State>,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct State {
    /// The broker's last total; `None` until it published one.
    last: Option<u64>,
    /// Dropped since this broker connected.
    since: u64,
}

impl State {
    /// The broker published `total` (`retained`: the value it held when the subscription
    /// started): how many more it dropped since its last value. A retained first value is
    /// a baseline; a live first value is new whole (the earlier one is unknown); a total
    /// below the last is a broker that restarted, and all of it is new.
    fn seen(&mut self, total: u64, retained: bool) -> u64 {
        let more = match self.last {
            None if retained => 0,
            None => total,
            Some(last) if total >= last => total - last,
            Some(_) => total,
        };
        self.last = Some(total);
        self.since += more;
        more
    }
}

impl Dropped {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A value of [`TOPIC`] arrived (`retained`: its `RETAIN` flag): logs a rise as an
    /// error.
    pub(crate) fn published(&self, payload: &[u8], retained: bool) {
        let Some(total) = std::str::from_utf8(payload)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
        else {
            return;
        };
        let (more, since) = {
            let mut state = self.state();
            let more = state.seen(total, retained);
            (more, state.since)
        };
        if more > 0 {
            tracing::error!(
                dropped = more,
                since_connect = since,
                broker_total = total,
                "mqtt: the broker dropped messages it had acknowledged (broker-wide; on \
                 Mosquitto, a session's queue past max_queued_messages, 1,000 by default): \
                 raise the limit, or read faster"
            );
        }
    }

    /// Dropped since this broker connected, as the broker counts it; `None` while the
    /// broker has published no count.
    pub(crate) fn since_connect(&self) -> Option<u64> {
        let state = self.state();
        state.last.map(|_| state.since)
    }
}

#[cfg(test)]
mod tests {
    use super::{Dropped, State};

    #[test]
    fn a_retained_first_total_is_a_baseline_and_rises_are_counted() {
        // (total published, retained, rise expected, since expected)
        let table: &[(u64, bool, u64, u64)] = &[
            (40, true, 0, 0), // dropped before this broker connected
            (40, true, 0, 0), // the same value again (a reconnect's retained copy)
            (145, false, 105, 105),
            (150, false, 5, 110),
            (3, false, 3, 113), // the broker restarted: its count began again
            (3, true, 0, 113),
        ];
        let mut state = State::default();
        for &(total, retained, more, since) in table {
            assert_eq!(state.seen(total, retained), more, "total {total}");
            assert_eq!(state.since, since, "total {total}");
        }
    }

    #[test]
    fn a_live_first_total_is_counted_whole() {
        // No retained value (expired, or none published yet): the earlier one is unknown.
        let mut state = State::default();
        assert_eq!(state.seen(40, false), 40);
        assert_eq!(state.seen(45, false), 5);
        assert_eq!(state.since, 45);
    }

    #[test]
    fn no_count_until_the_broker_publishes_one_and_garbage_is_ignored() {
        let dropped = Dropped::default();
        assert_eq!(dropped.since_connect(), None);
        dropped.published(b"not a number", true);
        assert_eq!(dropped.since_connect(), None);
        dropped.published(b"7", true);
        assert_eq!(dropped.since_connect(), Some(0));
        dropped.published(b"9\n", false);
        assert_eq!(dropped.since_connect(), Some(2));
    }
}
