//! Key order against a model: random runs of reads, settlements, retries, give-backs,
//! seeks and timers on one partition, checking after every step what key order
//! promises (a key's record is handed out only once every earlier record of its key is
//! settled for good, one at a time) and at the end that every record was settled for
//! good exactly once, nothing is held and the commit position passed them all.

use std::collections::{BTreeMap, BTreeSet};

use super::Group;
use crate::order::Note;
use crate::record::Record;

/// A small deterministic generator (xorshift64*), so a failing seed can be replayed.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        usize::try_from(x >> 33).unwrap_or_default() % n.max(1)
    }
}

const KEYS: [Option<&str>; 4] = [Some("a"), Some("b"), Some("c"), None];

struct Run {
    group: Group,
    keys: Vec<Option<&'static str>>,
    /// The offset after the highest read.
    next: i64,
    /// Handed out and not settled, as the runtime holds them.
    handling: Vec<Record>,
    /// Retries waiting for their timer.
    timers: Vec<Record>,
    /// Offsets settled for good.
    done: BTreeSet<i64>,
}

impl Run {
    fn record(&self, at: super::Position) -> Record {
        Record::keyed(at, self.keys[usize::try_from(at.offset).expect("offset")])
    }

    /// A record read (new, or again after a seek) goes through the gate.
    fn read(&mut self, offset: i64) {
        let Some(at) = self.group.read(0, offset) else {
            return;
        };
        self.next = self.next.max(offset + 1);
        let record = self.record(at);
        if self.group.needs_notes(at) {
            self.group.load_notes(at, BTreeMap::new());
        }
        if let Some(record) = self.group.admit(record).0 {
            self.hand(record);
        }
    }

    fn hand(&mut self, mut record: Record) {
        let wait = self.group.noted(&mut record);
        assert!(wait.is_zero(), "notes here are due at once");
        let offset = record.at.offset;
        let key = self.keys[usize::try_from(offset).expect("offset")];
        if let Some(key) = key {
            for earlier in 0..offset {
                if self.keys[usize::try_from(earlier).expect("offset")] == Some(key) {
                    assert!(
                        self.done.contains(&earlier),
                        "{offset} of key {key} handed out before {earlier} was settled"
                    );
                }
            }
            assert!(
                !self
                    .handling
                    .iter()
                    .any(|r| r.key() == Some(key.as_bytes())),
                "two records of key {key} handed out at once"
            );
        }
        assert!(
            !self.done.contains(&offset),
            "{offset} handed out after it was done"
        );
        self.handling.push(record);
    }
}

fn run(seed: u64, count: usize) {
    let mut random = Random(seed.max(1));
    let keys = (0..count).map(|_| KEYS[random.below(KEYS.len())]).collect();
    let mut run = Run {
        group: Group::new("t".into(), Some(4)),
        keys,
        next: 0,
        handling: Vec::new(),
        timers: Vec::new(),
        done: BTreeSet::new(),
    };
    run.group.assign([0]);
    let end = i64::try_from(count).expect("count");
    let mut steps = 0;
    while run.done.len() < count {
        steps += 1;
        assert!(
            steps < 100_000,
            "seed {seed}: no progress, done {}",
            run.done.len()
        );
        match random.below(6) {
            0 | 1 if run.next < end => run.read(run.next),
            2 => {
                if let Some(record) = run.group.next_ready().0 {
                    run.hand(record);
                }
            }
            3 if !run.timers.is_empty() => {
                let record = run.timers.swap_remove(random.below(run.timers.len()));
                run.group.ready(record);
            }
            _ if !run.handling.is_empty() => {
                let record = run.handling.swap_remove(random.below(run.handling.len()));
                let at = record.at;
                let key = record.key().map(<[u8]>::to_vec);
                match random.below(10) {
                    // Retried in place, at once or after a delay.
                    0 | 1 => {
                        let attempt = record.attempt + 1;
                        let note = Note { attempt, due_ms: 0 };
                        run.group.settle_later(at, note).expect("held");
                        let again = Record { attempt, ..record };
                        if random.below(2) == 0 {
                            run.group.ready(again);
                        } else {
                            run.timers.push(again);
                        }
                    }
                    // Given back: the partition is sought back and read again.
                    2 => {
                        drop(record);
                        if let Some(seek) = run.group.abandon(at, key.as_deref()) {
                            for offset in seek..run.next {
                                run.read(offset);
                            }
                        }
                    }
                    // Settled for good.
                    _ => {
                        run.group.settle(at).expect("held");
                        run.group.release(at, key.as_deref());
                        assert!(run.done.insert(at.offset), "{} settled twice", at.offset);
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        run.handling.is_empty() && run.timers.is_empty(),
        "seed {seed}"
    );
    assert!(
        run.group.next_ready().0.is_none(),
        "seed {seed}: a record left ready"
    );
    assert_eq!(run.group.handling(), 0, "seed {seed}");
    let last = run.group.positions().remove(0);
    assert_eq!((last.offset, last.metadata), (end, None), "seed {seed}");
}

#[test]
fn key_order_holds_in_random_runs_and_settles_everything_once() {
    for seed in 1..=300 {
        run(seed, 60);
    }
}
