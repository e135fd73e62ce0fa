//! Counting a run from its event logs: handled, dead-lettered, lost (and why),
//! duplicates, and the time from each fault to the next handled message.

use std::collections::HashMap;
use std::path::Path;

use crate::consume::MAX_ATTEMPTS;
use crate::record::{Event, Kind};

/// The last thing recorded of one id.
#[derive(Clone, Copy, Debug)]
struct Last {
    event: Event,
    pid: u32,
}

/// Everything the logs of a run say.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    handled: HashMap<u64, u32>,
    dead: HashMap<u64, u32>,
    broker_dead: HashMap<u64, u32>,
    last: HashMap<u64, Last>,
    /// The times of every `H` event, sorted.
    handled_at: Vec<u64>,
    /// When the broker acknowledged each id to the producer (`produce.log`).
    accepted: HashMap<u64, u64>,
}

/// A SIGKILL of a broker that saves its state from time to time (Mosquitto): when it was
/// killed, and when it had last saved (ms). What it acknowledged after that save and had
/// not handed on is gone with it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crash {
    pub(crate) killed: u64,
    pub(crate) saved: u64,
}

/// The slack around a crash's window (ms): a save takes a while (it is of the state at its
/// start), a copy is published up to 50 ms after its handler's record (`retry_after`), and
/// a producer reads its PUBACK a little after the broker wrote it.
const CRASH_SLACK: u64 = 250;

impl Logs {
    /// Reads every `main-PID.log` and `dead-PID.log` of `dir`, and its `produce.log`.
    pub(crate) fn read(dir: &Path) -> std::io::Result<Self> {
        let mut logs = Self::default();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name == "produce.log" {
                let text = std::fs::read_to_string(&path)?;
                for event in text.lines().filter_map(Event::parse) {
                    logs.accepted.insert(event.id, event.at_ms);
                }
                continue;
            }
            let Some(pid) = name
                .strip_suffix(".log")
                .and_then(|n| n.strip_prefix("main-").or_else(|| n.strip_prefix("dead-")))
                .and_then(|pid| pid.parse().ok())
            else {
                continue;
            };
            let text = std::fs::read_to_string(&path)?;
            for event in text.lines().filter_map(Event::parse) {
                logs.add(event, pid);
            }
        }
        logs.handled_at.sort_unstable();
        Ok(logs)
    }

    fn add(&mut self, event: Event, pid: u32) {
        match event.kind {
            Kind::Handled => {
                *self.handled.entry(event.id).or_default() += 1;
                self.handled_at.push(event.at_ms);
            }
            Kind::Dead => *self.dead.entry(event.id).or_default() += 1,
            Kind::BrokerDead => *self.broker_dead.entry(event.id).or_default() += 1,
            _ => {}
        }
        if event.kind == Kind::BrokerDead {
            return; // not a step of the message's own history
        }
        // Within one millisecond (a retry copy handled by another consumer in the ms its
        // original was), the later attempt is the later step.
        let newer = self.last.get(&event.id).is_none_or(|last| {
            (last.event.at_ms, last.event.attempt) <= (event.at_ms, event.attempt)
        });
        if newer {
            self.last.insert(event.id, Last { event, pid });
        }
    }

    /// The ids of `0..published` neither handled nor dead-lettered.
    pub(crate) fn missing(&self, published: u64) -> Vec<u64> {
        (0..published)
            .filter(|id| !self.handled.contains_key(id) && !self.dead.contains_key(id))
            .collect()
    }

    /// Moves what the broker dead-lettered itself in with the dead letters: on a form
    /// where that is how spent messages get there.
    pub(crate) fn count_broker_dead_letters(mut self) -> Self {
        for (id, n) in std::mem::take(&mut self.broker_dead) {
            *self.dead.entry(id).or_default() += n;
        }
        self
    }

    /// What the logs say of `id`, one line for a run's notes: when the broker
    /// acknowledged its publish, and the last step a consumer recorded (which, where, when).
    pub(crate) fn story(&self, id: u64) -> String {
        let accepted = match self.accepted.get(&id) {
            Some(at) => format!("published at {at} ms"),
            None => "no publish noted".to_owned(),
        };
        let last = match self.last.get(&id) {
            Some(Last { event, pid }) => format!(
                "last recorded {} (attempt {}) at {} ms by process {pid}",
                event.kind.letter(),
                event.attempt,
                event.at_ms
            ),
            None => "no handler call recorded".to_owned(),
        };
        format!("id {id}: {accepted}; {last}")
    }

    /// Counts the run. `kills` are the processes SIGKILLed (pid, when, ms), `faults` the
    /// times each fault ended, `delays_in_process` whether the form's `retry_after` is a
    /// copy held in the process, `crashes` the broker's SIGKILLs that lose what it had not
    /// saved.
    pub(crate) fn tally(
        &self,
        published: u64,
        kills: &[(u32, u64)],
        faults: &[u64],
        delays_in_process: bool,
        crashes: &[Crash],
    ) -> Tally {
        let missing = self.missing(published);
        let (lost_delayed, lost): (Vec<u64>, Vec<u64>) = missing
            .into_iter()
            .partition(|id| delays_in_process && self.delayed_copy_killed(*id, kills));
        let (lost_broker, lost_other): (Vec<u64>, Vec<u64>) = lost
            .into_iter()
            .partition(|id| self.unsaved_when_killed(*id, crashes));
        let records: u64 = self
            .handled
            .values()
            .chain(self.dead.values())
            .map(|&n| u64::from(n))
            .sum();
        let unique = self.handled.len() as u64
            + self
                .dead
                .keys()
                .filter(|id| !self.handled.contains_key(id))
                .count() as u64;
        let mut recoveries: Vec<u64> = faults
            .iter()
            .filter_map(|&at| {
                let i = self.handled_at.partition_point(|&h| h <= at);
                self.handled_at.get(i).map(|&h| h - at)
            })
            .collect();
        recoveries.sort_unstable();
        let longest_gap_ms = self.handled_at.windows(2).map(|w| w[1] - w[0]).max();
        Tally {
            published,
            handled: self.handled.len() as u64,
            dead: self.dead.len() as u64,
            rejected_dead: self.broker_dead.len() as u64,
            lost_delayed: lost_delayed.len() as u64,
            lost_broker: lost_broker.len() as u64,
            lost_broker_ids: lost_broker.into_iter().take(20).collect(),
            passed_over: 0,
            passed_over_ids: Vec::new(),
            lost_other: lost_other.len() as u64,
            lost_other_ids: lost_other.into_iter().take(20).collect(),
            duplicates: records - unique,
            faults_without_recovery: (faults.len() - recoveries.len()) as u64,
            recovery_median_ms: recoveries.get(recoveries.len() / 2).copied(),
            recovery_max_ms: recoveries.last().copied(),
            longest_gap_ms,
        }
    }

    /// Whether the last publish of `id` the broker acknowledged came after its last save
    /// before a SIGKILL, and before the kill: the producer's (nothing else was recorded of
    /// it), or the copy a handler's retry, `retry_after` or panic sent on (or, at the cap,
    /// its dead letter), published just after the handler's record.
    fn unsaved_when_killed(&self, id: u64, crashes: &[Crash]) -> bool {
        let at = match self.last.get(&id) {
            Some(last) if matches!(last.event.kind, Kind::Retry | Kind::Delayed | Kind::Panic) => {
                last.event.at_ms
            }
            Some(_) => return false,
            None => match self.accepted.get(&id) {
                Some(&at) => at,
                None => return false,
            },
        };
        crashes
            .iter()
            .any(|crash| at + CRASH_SLACK > crash.saved && at <= crash.killed + CRASH_SLACK)
    }

    /// Whether the last thing recorded of `id` is a `retry_after` below the cap, in a
    /// process killed within a second after it: the delayed copy was still in that
    /// process (it is published 50 ms later) when it died.
    fn delayed_copy_killed(&self, id: u64, kills: &[(u32, u64)]) -> bool {
        let Some(last) = self.last.get(&id) else {
            return false;
        };
        last.event.kind == Kind::Delayed
            && last.event.attempt < MAX_ATTEMPTS
            && kills.iter().any(|&(pid, at)| {
                pid == last.pid && at >= last.event.at_ms && at - last.event.at_ms < 1_000
            })
    }
}

/// The figures of one run.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Tally {
    pub(crate) published: u64,
    pub(crate) handled: u64,
    pub(crate) dead: u64,
    /// Ids the broker dead-lettered on its own on a form where that is not how spent
    /// messages get there (rejected originals of `retry_after` copies): not counted as
    /// dead-lettered, so they hide no loss.
    #[serde(default)]
    pub(crate) rejected_dead: u64,
    /// In-process delayed copies lost with a killed process (by design).
    pub(crate) lost_delayed: u64,
    /// Ids whose last publish the broker acknowledged after its last save, then lost with
    /// its SIGKILL (Mosquitto saves from time to time: `mosquitto.rs`).
    #[serde(default)]
    pub(crate) lost_broker: u64,
    #[serde(default)]
    pub(crate) lost_broker_ids: Vec<u64>,
    /// Ids whose latest record the broker stored where a consumer's fetch passed over
    /// it (nisshi's fetch, `gaps.rs`), never handed to the adapter.
    #[serde(default)]
    pub(crate) passed_over: u64,
    #[serde(default)]
    pub(crate) passed_over_ids: Vec<u64>,
    /// Every other loss: must be 0.
    pub(crate) lost_other: u64,
    pub(crate) lost_other_ids: Vec<u64>,
    pub(crate) duplicates: u64,
    pub(crate) faults_without_recovery: u64,
    pub(crate) recovery_median_ms: Option<u64>,
    pub(crate) recovery_max_ms: Option<u64>,
    /// The longest time between two handled messages, from the first to the last: how
    /// long the service stood still (Kafka: a killed consumer's partitions wait out its
    /// session).
    #[serde(default)]
    pub(crate) longest_gap_ms: Option<u64>,
}

impl Tally {
    /// Counts the lost `ids` the broker's fetch passed over apart from the other losses.
    pub(crate) fn count_passed_over(&mut self, ids: &[u64]) {
        let (passed, other): (Vec<u64>, Vec<u64>) =
            self.lost_other_ids.iter().partition(|id| ids.contains(id));
        self.lost_other -= passed.len() as u64;
        self.passed_over += passed.len() as u64;
        self.lost_other_ids = other;
        self.passed_over_ids.extend(passed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, id: u64, attempt: u32, at_ms: u64) -> Event {
        Event {
            kind,
            id,
            attempt,
            at_ms,
        }
    }

    #[test]
    fn the_later_attempt_is_the_last_step_within_one_millisecond() {
        // id 7's retry (attempt 1, pid 1) and its copy's `retry_after` (attempt 2, pid 2,
        // killed 5 ms later) in the same millisecond, read in either order: the delayed
        // copy was lost with pid 2, by design.
        for order in [[1, 2], [2, 1]] {
            let mut logs = Logs::default();
            for pid in order {
                let (kind, attempt) = if pid == 1 {
                    (Kind::Retry, 1)
                } else {
                    (Kind::Delayed, 2)
                };
                logs.add(ev(kind, 7, attempt, 300), pid);
            }
            let t = logs.tally(8, &[(2, 305)], &[], true, &[]);
            assert_eq!(t.lost_other_ids, [0, 1, 2, 3, 4, 5, 6], "{order:?}");
            assert_eq!(t.lost_delayed, 1, "{order:?}");
        }
    }

    #[test]
    fn ids_the_fetch_passed_over_are_counted_apart() {
        let mut logs = Logs::default();
        logs.add(ev(Kind::Handled, 1, 1, 100), 1);
        let mut t = logs.tally(5, &[], &[], false, &[]);
        assert_eq!(
            (t.lost_other, &t.lost_other_ids[..]),
            (4, &[0, 2, 3, 4][..])
        );
        // 9 was never counted lost: nothing to move.
        t.count_passed_over(&[3, 0, 9]);
        assert_eq!((t.lost_other, &t.lost_other_ids[..]), (2, &[2, 4][..]));
        assert_eq!((t.passed_over, &t.passed_over_ids[..]), (2, &[0, 3][..]));
    }

    #[test]
    fn losses_are_told_apart() {
        let mut logs = Logs::default();
        logs.add(ev(Kind::Handled, 0, 1, 100), 1);
        logs.add(ev(Kind::Handled, 0, 1, 200), 2); // a duplicate
        logs.add(ev(Kind::Delayed, 1, 1, 300), 1); // pid 1 killed at 320: lost by design
        logs.add(ev(Kind::Delayed, 2, 1, 300), 2); // pid 2 never killed: a real loss
        logs.add(ev(Kind::Retry, 3, 5, 300), 1); // spent and dead-lettered
        logs.add(ev(Kind::Dead, 3, 1, 310), 9);
        logs.add(ev(Kind::Handled, 5, 1, 1_000), 2);
        logs.add(ev(Kind::BrokerDead, 4, 1, 1_100), 9); // a rejected original: no alibi
        logs.handled_at.sort_unstable();
        let t = logs.tally(5, &[(1, 320)], &[150, 320, 5_000], true, &[]);
        assert_eq!(
            (t.handled, t.dead, t.duplicates, t.rejected_dead),
            (2, 1, 1, 1)
        );
        assert_eq!((t.lost_delayed, t.lost_other), (1, 2)); // ids 2 and 4
        assert_eq!(t.lost_other_ids, [2, 4]);
        assert_eq!(
            (t.recovery_median_ms, t.recovery_max_ms),
            (Some(680), Some(680))
        );
        assert_eq!(t.faults_without_recovery, 1);
        assert_eq!(t.longest_gap_ms, Some(800));
        // On a form whose delays are durable, the same record is a real loss.
        assert_eq!(logs.tally(5, &[(1, 320)], &[], false, &[]).lost_other, 3);
        // Where the broker dead-letters spent messages itself, its dead letters count.
        let t = logs
            .count_broker_dead_letters()
            .tally(5, &[(1, 320)], &[], true, &[]);
        assert_eq!((t.dead, t.lost_other, t.rejected_dead), (2, 1, 0));
    }

    #[test]
    fn what_the_broker_took_after_its_last_save_is_its_loss() {
        let mut logs = Logs::default();
        logs.accepted.insert(0, 9_600); // taken after the save, before the kill
        logs.accepted.insert(1, 5_000); // taken long before the save: in it
        logs.accepted.insert(2, 9_900);
        logs.add(ev(Kind::Retry, 2, 1, 9_950), 1); // its retry copy, just before the kill
        logs.accepted.insert(3, 9_000);
        logs.add(ev(Kind::Retry, 3, 1, 10_800), 1); // its copy well after the kill
        let crash = Crash {
            killed: 10_000,
            saved: 9_500,
        };
        let t = logs.tally(4, &[], &[], false, &[crash]);
        assert_eq!((t.lost_broker, t.lost_other), (2, 2));
        assert_eq!(
            (t.lost_broker_ids, t.lost_other_ids),
            (vec![0, 2], vec![1, 3])
        );
        // Without the crash, every one of them is a loss.
        assert_eq!(logs.tally(4, &[], &[], false, &[]).lost_other, 4);
    }
}
