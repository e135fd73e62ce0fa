//! The event log each consumer process appends to: one line per handler call.
//!
//! A line is `KIND ID ATTEMPT MS` (milliseconds since the Unix epoch). `H` (handled) and
//! `X` (reached the dead letter, sent there by the runtime) and `Y` (reached it, moved
//! there by the broker: no `x-ruststream-dead-letter-*` headers) are written and `fsync`ed before the handler acks, so a
//! recorded id was really handled; `R` (retry), `D` (retry_after, a delayed copy) and `P`
//! (panic) are written with one `write` each, which a SIGKILL of the process does not
//! undo (the kernel has the bytes), without `fsync`. The producer writes `A` (the broker
//! acknowledged the publish) the same way, to `produce.log`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What a handler call did with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Handled,
    Retry,
    Delayed,
    Panic,
    Dead,
    BrokerDead,
    Accepted,
}

impl Kind {
    pub(crate) fn letter(self) -> char {
        match self {
            Kind::Handled => 'H',
            Kind::Retry => 'R',
            Kind::Delayed => 'D',
            Kind::Panic => 'P',
            Kind::Dead => 'X',
            Kind::BrokerDead => 'Y',
            Kind::Accepted => 'A',
        }
    }

    pub(crate) fn from_letter(c: char) -> Option<Self> {
        Some(match c {
            'H' => Kind::Handled,
            'R' => Kind::Retry,
            'D' => Kind::Delayed,
            'P' => Kind::Panic,
            'X' => Kind::Dead,
            'Y' => Kind::BrokerDead,
            'A' => Kind::Accepted,
            _ => return None,
        })
    }

    fn durable(self) -> bool {
        matches!(self, Kind::Handled | Kind::Dead | Kind::BrokerDead)
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An append-only event log.
pub(crate) struct EventLog {
    file: Mutex<File>,
}

impl EventLog {
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Appends one event; durable kinds are on disk when this returns.
    pub(crate) fn note(&self, kind: Kind, id: u64, attempt: u32) -> std::io::Result<()> {
        let line = format!("{} {id} {attempt} {}\n", kind.letter(), now_ms());
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(line.as_bytes())?;
        if kind.durable() {
            file.sync_data()?;
        }
        Ok(())
    }
}

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) kind: Kind,
    pub(crate) id: u64,
    pub(crate) attempt: u32,
    pub(crate) at_ms: u64,
}

impl Event {
    /// Parses a line; a torn last line (a kill in the middle of a write) is `None`.
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let mut parts = line.split(' ');
        let kind = Kind::from_letter(parts.next()?.chars().next()?)?;
        let id = parts.next()?.parse().ok()?;
        let attempt = parts.next()?.parse().ok()?;
        let at_ms = parts.next()?.trim_end().parse().ok()?;
        Some(Self {
            kind,
            id,
            attempt,
            at_ms,
        })
    }
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub(crate) fn today() -> String {
    let days = i64::try_from(now_ms() / 86_400_000).unwrap_or(0);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let dir = std::env::temp_dir().join(format!("soak-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("events.log");
        let log = EventLog::create(&path).expect("create");
        log.note(Kind::Handled, 7, 2).expect("note");
        log.note(Kind::Delayed, 8, 1).expect("note");
        let text = std::fs::read_to_string(&path).expect("read");
        let events: Vec<_> = text.lines().filter_map(Event::parse).collect();
        assert_eq!(events.len(), 2);
        assert_eq!(
            (events[0].kind, events[0].id, events[0].attempt),
            (Kind::Handled, 7, 2)
        );
        assert_eq!((events[1].kind, events[1].id), (Kind::Delayed, 8));
        assert_eq!(Event::parse("H 12"), None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
