//! What key order keeps of a retry in Kafka: in the metadata of each commit, the attempt
//! and due time of every record of the partition waiting for its retry (or being
//! handled again), so that the next consumer of the partition (after a stop, a crash, a
//! rebalance) hands it out as the same attempt, no sooner than it was due.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The metadata's prefix: a commit's metadata that does not start with it is not ours
/// and carries no notes.
const PREFIX: &str = "ruststream-retries:";

/// Kafka's default `offset.metadata.max.bytes` is 4,096; notes past this many bytes are
/// left out, the highest offsets first (those records start again at attempt 1).
const MAX_BYTES: usize = 4_000;

/// One record's retry: the attempt it is handed out as next, and when (milliseconds
/// since the Unix epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) attempt: u32,
    pub(crate) due_ms: u64,
}

impl Note {
    /// Attempt `attempt`, due `delay` from now.
    pub(crate) fn after(attempt: u32, delay: Duration) -> Self {
        let due = SystemTime::now()
            .checked_add(delay)
            .unwrap_or_else(SystemTime::now);
        Self {
            attempt,
            due_ms: millis(due),
        }
    }

    /// How long from now until it is due (zero once it is).
    pub(crate) fn wait(&self) -> Duration {
        Duration::from_millis(self.due_ms.saturating_sub(millis(SystemTime::now())))
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

/// The notes as a commit's metadata, lowest offsets first, within [`MAX_BYTES`].
pub(crate) fn encode(notes: &BTreeMap<i64, Note>) -> String {
    let mut out = String::from(PREFIX);
    let mut entry = String::new();
    for (offset, note) in notes {
        entry.clear();
        let comma = if out.len() > PREFIX.len() { "," } else { "" };
        let _ = write!(entry, "{comma}{offset}:{}:{}", note.attempt, note.due_ms);
        if out.len() + entry.len() > MAX_BYTES {
            break;
        }
        out.push_str(&entry);
    }
    out
}

/// The notes a commit's metadata carries; what is not ours or not well formed is
/// ignored (another client may commit anything there).
pub(crate) fn decode(metadata: &str) -> BTreeMap<i64, Note> {
    let Some(entries) = metadata.strip_prefix(PREFIX) else {
        return BTreeMap::new();
    };
    entries
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, ':');
            let offset = parts.next()?.parse::<i64>().ok().filter(|o| *o >= 0)?;
            let attempt = parts.next()?.parse::<u32>().ok().filter(|a| *a >= 1)?;
            let due_ms = parts.next()?.parse::<u64>().ok()?;
            Some((offset, Note { attempt, due_ms }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::{MAX_BYTES, Note, decode, encode};

    #[test]
    fn notes_go_through_a_commit_s_metadata() {
        let notes = BTreeMap::from([
            (
                7,
                Note {
                    attempt: 2,
                    due_ms: 1_700_000_000_000,
                },
            ),
            (
                9,
                Note {
                    attempt: 5,
                    due_ms: 0,
                },
            ),
        ]);
        let text = encode(&notes);
        assert_eq!(text, "ruststream-retries:7:2:1700000000000,9:5:0");
        assert_eq!(decode(&text), notes);
        assert_eq!(encode(&BTreeMap::new()), "ruststream-retries:");
        assert!(decode("ruststream-retries:").is_empty());
    }

    #[test]
    fn metadata_not_ours_or_malformed_carries_no_notes() {
        for text in [
            "",
            "ruststream-removed:1-4",
            "ruststream-retries:x:1:2",
            "ruststream-retries:-1:1:2",
            "ruststream-retries:1:0:2",
            "ruststream-retries:1:2",
            "ruststream-retries:1:99999999999:2",
            "ruststream-retries:,,,",
        ] {
            assert!(decode(text).is_empty(), "{text}");
        }
        let mixed = decode("ruststream-retries:junk,3:2:10,4::");
        assert_eq!(mixed.len(), 1, "{mixed:?}");
    }

    #[test]
    fn notes_past_kafka_s_metadata_limit_are_left_out_highest_first() {
        let notes: BTreeMap<i64, Note> = (0..1_000)
            .map(|o| {
                (
                    o,
                    Note {
                        attempt: 3,
                        due_ms: 1_700_000_000_000,
                    },
                )
            })
            .collect();
        let text = encode(&notes);
        assert!(text.len() <= MAX_BYTES, "{}", text.len());
        let kept = decode(&text);
        assert!(kept.len() > 100, "{}", kept.len());
        assert_eq!(kept.keys().next(), Some(&0), "the lowest kept");
    }

    #[test]
    fn a_note_waits_until_it_is_due() {
        let note = Note::after(2, Duration::from_secs(60));
        assert!(note.wait() > Duration::from_secs(58), "{:?}", note.wait());
        assert_eq!(
            Note {
                attempt: 2,
                due_ms: 0
            }
            .wait(),
            Duration::ZERO
        );
    }
}
