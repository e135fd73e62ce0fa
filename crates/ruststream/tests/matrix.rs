//! The cells of the settlement decision (SPEC §1, the §6 table), end to end on the memory
//! broker: each outcome × a broker that counts / does not count / delays natively /
//! dead-letters itself / does not settle × nothing declared / a cap / a cap and a dead letter /
//! a dead letter alone, below and at the cap.
//!
//! What is checked is what happens on the broker, not the plan: how many times the handler
//! ran and with which attempt numbers, the retry-count headers copies carry, whether the
//! message ends in the dead letter as it arrived, whether anything is left anywhere, how long
//! `retry_after` waited (paused clock), and which settlements the broker could not take.

mod support;

use std::time::Duration;

use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Headers, Mount, Outcome, Raw, ack, drop, retry, retry_after};
use ruststream_core::Capabilities;
use support::{Calls, json_message, nonempty, retry_count, settle};

/// The delay of every `retry_after` here.
const D: Duration = Duration::from_millis(500);
/// The declared cap, where one is declared.
const CAP: u32 = 3;
/// The handler gives up asking for retries (and acks) from this attempt on, so that a cell
/// with nothing declared ends.
const GIVE_UP: u32 = 5;
/// A broker that loses count would loop forever: the handler acks after this many calls.
const GUARD: usize = 8;
const Q: &str = "m";
const DEAD: &str = "m.dead";
const PAYLOAD: &str = "7";

// The brokers: the memory broker with capabilities switched.
const FULL: Capabilities = ruststream::memory::MemoryBroker::FULL;
const SETTLES: Capabilities = Capabilities::SETTLES;
const DELAYS: Capabilities = Capabilities {
    delays: Some(ruststream_core::Capabilities::ANY_DELAY),
    ..Capabilities::SETTLES
};
const SELF_DL: Capabilities = Capabilities {
    settles: true,
    requeues: true,
    counts: true,
    delays: None,
    dead_letters: true,
    moves: false,
};
const SELF_DL_DELAYS: Capabilities = Capabilities {
    delays: Some(ruststream_core::Capabilities::ANY_DELAY),
    ..SELF_DL
};
const NONE: Capabilities = Capabilities::NONE;

#[derive(Clone, Copy, Debug)]
enum Out {
    Ack,
    Drop,
    Retry,
    After,
}

#[derive(Clone, Copy, Debug)]
enum Decl {
    /// Nothing declared.
    Nothing,
    /// `max_attempts(CAP)`.
    Cap,
    /// `max_attempts(CAP).dead_letter(DEAD)`.
    CapDl,
    /// `dead_letter(DEAD)` alone.
    Dl,
}

/// Which counter the attempt number comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Count {
    /// The broker's: no retry-count header ever.
    Broker,
    /// The runtime's: attempt `n` carries `x-ruststream-retry-count: n - 1` (none on the first).
    Header,
}

/// What must happen to one message in one cell.
#[derive(Debug)]
struct Cell {
    out: Out,
    decl: Decl,
    /// The attempt numbers the handler saw, in order.
    attempts: &'static [u32],
    /// Whether the message ends in the dead letter.
    dead: bool,
    /// How many delays of `D` pass between publishing and the end.
    waits: u32,
    /// How many settlements the broker could not take (`AckError::Unsupported`).
    unsupported: usize,
}

const fn cell(
    out: Out,
    decl: Decl,
    attempts: &'static [u32],
    dead: bool,
    waits: u32,
    unsupported: usize,
) -> Cell {
    Cell {
        out,
        decl,
        attempts,
        dead,
        waits,
        unsupported,
    }
}

use Decl::{Cap, CapDl, Dl, Nothing};
use Out::{Ack, After, Drop, Retry};

const ONCE: &[u32] = &[1];
const TO_CAP: &[u32] = &[1, 2, 3];
const TO_GIVE_UP: &[u32] = &[1, 2, 3, 4, 5];
const DECLS: [Decl; 4] = [Nothing, Cap, CapDl, Dl];

/// `ack` and `drop` on a broker that settles: handled once, gone; the declaration plays no
/// part (the cap is checked before a *retry*). `drop` reaches the dead letter only on a broker
/// that dead-letters itself (its own policy on `rejected`), never through the runtime.
fn settled_once(self_dl: bool) -> Vec<Cell> {
    DECLS
        .iter()
        .flat_map(|&decl| {
            let declared_dl = matches!(decl, CapDl | Dl);
            [
                cell(Ack, decl, ONCE, false, 0, 0),
                cell(Drop, decl, ONCE, self_dl && declared_dl, 0, 0),
            ]
        })
        .collect()
}

/// A counting broker (and one that only settles, and one that delays natively): the same
/// attempts whoever counts; `retry_after` waits `D` before each redelivery.
#[rustfmt::skip]
fn retries_to_the_cap() -> Vec<Cell> {
    vec![
        // Nothing declared: redelivered until the handler gives up.
        cell(Retry, Nothing, TO_GIVE_UP, false, 0, 0),
        cell(After, Nothing, TO_GIVE_UP, false, 4, 0),
        // Below the cap: redelivered; at the cap without a dead letter: rejected.
        cell(Retry, Cap, TO_CAP, false, 0, 0),
        cell(After, Cap, TO_CAP, false, 2, 0),
        // At the cap with a dead letter: there, as it arrived.
        cell(Retry, CapDl, TO_CAP, true, 0, 0),
        cell(After, CapDl, TO_CAP, true, 2, 0),
        // A dead letter without a cap takes every retry, at once.
        cell(Retry, Dl, ONCE, true, 0, 0),
        cell(After, Dl, ONCE, true, 0, 0),
    ]
}

async fn run_cell(caps: Capabilities, count: Count, cell: &Cell) -> Result<(), String> {
    let calls = Calls::default();
    let log = calls.clone();
    let out = cell.out;
    let mut mount = Mount::new(Q);
    match cell.decl {
        Nothing => {}
        Cap => mount = mount.max_attempts(CAP),
        CapDl => mount = mount.max_attempts(CAP).dead_letter(DEAD),
        Dl => mount = mount.dead_letter(DEAD),
    }
    let handler = move |Attempt(attempt): Attempt, headers: Headers, Raw(raw): Raw, _: u32| {
        let made = log.record(attempt, &headers, &raw);
        async move {
            if made > GUARD || attempt >= GIVE_UP {
                return ack();
            }
            let outcome: Outcome = match out {
                Ack => ack(),
                Drop => drop(),
                Retry => retry(),
                After => retry_after(D),
            };
            outcome
        }
    };
    let app = TestApp::start_with(caps, |b| App::new(b).mount(mount, handler)).await;
    let published = json_message(PAYLOAD);
    let started = tokio::time::Instant::now();
    app.publish_message(Q, published.clone()).await;
    settle(&app).await;
    let elapsed = started.elapsed();

    let mut wrong = Vec::new();
    let all = calls.all();
    let attempts = calls.attempts();
    if attempts != cell.attempts {
        wrong.push(format!(
            "attempts {attempts:?}, expected {:?}",
            cell.attempts
        ));
    }
    for call in &all {
        let expected = match count {
            Count::Broker => None,
            Count::Header => (call.attempt > 1).then(|| call.attempt - 1),
        };
        if retry_count(&call.headers) != expected {
            wrong.push(format!(
                "attempt {} carried retry count {:?}, expected {expected:?}",
                call.attempt,
                retry_count(&call.headers)
            ));
        }
        if call.headers.get_str("x-test") != Some("as-published") || call.payload != b"7" {
            wrong.push(format!(
                "attempt {} lost the message's content",
                call.attempt
            ));
        }
    }
    let expected_elapsed = D * cell.waits;
    if elapsed < expected_elapsed || elapsed > expected_elapsed + Duration::from_millis(100) {
        wrong.push(format!("took {elapsed:?}, expected {expected_elapsed:?}"));
    }
    // `retry_after(d)` honours d between attempts; `retry()` does not wait.
    for pair in all.windows(2) {
        let gap = pair[1].at - pair[0].at;
        let ok = match cell.out {
            After => gap >= D && gap < D + Duration::from_millis(50),
            _ => gap < Duration::from_millis(50),
        };
        if !ok {
            wrong.push(format!(
                "attempt {} came {gap:?} after attempt {}",
                pair[1].attempt, pair[0].attempt
            ));
        }
    }

    let dead = app.messages(DEAD);
    match (cell.dead, dead.as_slice()) {
        (false, []) => {}
        (true, [message]) => {
            // As it arrived: the payload and headers of the last delivery, with the
            // dead-letter headers added and the retry count moved into them (a dead
            // letter is attempt 1 where it is read).
            let last_call = all.last();
            let mut last = last_call.map(|c| c.headers.clone()).unwrap_or_default();
            last.remove(ruststream_core::RETRY_COUNT);
            if message.payload != PAYLOAD.as_bytes() {
                wrong.push(format!("dead letter payload {:?}", message.payload));
            }
            let mut arrived = message.headers.clone();
            let said = |name: &str| arrived.get_str(name).map(str::to_owned);
            let attempt = last_call.map(|c| c.attempt.to_string());
            // A broker that dead-letters itself moves the delivery as it is: the runtime
            // adds nothing to what it did not publish.
            if caps.dead_letters {
                last = last_call.map(|c| c.headers.clone()).unwrap_or_default();
            } else if said(ruststream_core::DEAD_LETTER_ATTEMPT) != attempt
                || said(ruststream_core::DEAD_LETTER_REASON).as_deref() != Some("retry")
                || said(ruststream_core::DEAD_LETTER_FROM).as_deref() != Some("m")
                || said(ruststream_core::DEAD_LETTER_AT).is_none()
                || said(ruststream_core::DEAD_LETTER_SERVICE).is_none()
            {
                wrong.push(format!(
                    "dead letter headers {:?} after attempt {attempt:?}",
                    message.headers
                ));
            }
            for name in [
                ruststream_core::DEAD_LETTER_ATTEMPT,
                ruststream_core::DEAD_LETTER_REASON,
                ruststream_core::DEAD_LETTER_FROM,
                ruststream_core::DEAD_LETTER_AT,
                ruststream_core::DEAD_LETTER_SERVICE,
            ] {
                arrived.remove(name);
            }
            if arrived != last {
                wrong.push(format!(
                    "dead letter headers {:?}, arrived with {last:?}",
                    message.headers
                ));
            }
            if count == Count::Broker && arrived != published.headers {
                wrong.push(format!(
                    "dead letter headers {:?}, published with {:?}",
                    message.headers, published.headers
                ));
            }
        }
        (_, found) => wrong.push(format!(
            "{} dead letters, expected {}",
            found.len(),
            u8::from(cell.dead)
        )),
    }
    // Nothing left anywhere but the dead letter: not ready, not out, not delayed.
    let left = nonempty(&app.broker().snapshot());
    let expected_left: Vec<(String, usize, usize, usize)> = if cell.dead {
        vec![(DEAD.to_owned(), 1, 0, 0)]
    } else {
        Vec::new()
    };
    if left != expected_left {
        wrong.push(format!("left on the broker: {left:?}"));
    }
    let unsupported = app.settlements().iter().filter(|r| !r.ok).count();
    if unsupported != cell.unsupported {
        wrong.push(format!(
            "{unsupported} settlements failed, expected {}",
            cell.unsupported
        ));
    }
    if let Err(error) = app.stop().await {
        wrong.push(format!("stop: {error}"));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{:?} × {:?}: {}",
            cell.out,
            cell.decl,
            wrong.join("; ")
        ))
    }
}

async fn run_all(caps: Capabilities, count: Count, cells: Vec<Cell>) {
    assert_eq!(cells.len(), 16, "every outcome × every declaration");
    let mut failures = Vec::new();
    for cell in &cells {
        if let Err(failure) = run_cell(caps, count, cell).await {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "on {caps:?}:\n{}", failures.join("\n"));
}

/// Counts its own redeliveries and delays natively (the memory broker's default).
#[tokio::test(start_paused = true)]
async fn counting_broker() {
    let mut cells = settled_once(false);
    cells.extend(retries_to_the_cap());
    run_all(FULL, Count::Broker, cells).await;
}

/// Settles, nothing more: every retry is a copy made by the runtime, counted in its header;
/// `retry_after` copies wait in the process.
#[tokio::test(start_paused = true)]
async fn non_counting_broker() {
    let mut cells = settled_once(false);
    cells.extend(retries_to_the_cap());
    run_all(SETTLES, Count::Header, cells).await;
}

/// Settles and delays natively but does not count (a Redis stream with a durable delay
/// queue): `retry()` is a copy; `retry_after` is the broker's own delay, whose every lap
/// counts in the retry-count header, so the cap is reached.
#[tokio::test(start_paused = true)]
async fn native_delay_broker() {
    let mut cells = settled_once(false);
    cells.extend(retries_to_the_cap());
    run_all(DELAYS, Count::Header, cells).await;
}

/// Counts, requeues and dead-letters itself, without a delay of its own: the runtime
/// requeues; the broker applies the cap and the dead letter declared at start-up.
/// `retry_after` holds the delivery in the process for `d` before the requeue, so at the cap
/// the delivery waits once more before the broker moves it.
#[rustfmt::skip]
#[tokio::test(start_paused = true)]
async fn self_dead_lettering_broker() {
    let mut cells = settled_once(true);
    cells.extend([
        cell(Retry, Nothing, TO_GIVE_UP, false, 0, 0),
        cell(After, Nothing, TO_GIVE_UP, false, 4, 0),
        cell(Retry, Cap, TO_CAP, false, 0, 0),
        cell(After, Cap, TO_CAP, false, 3, 0),
        cell(Retry, CapDl, TO_CAP, true, 0, 0),
        cell(After, CapDl, TO_CAP, true, 3, 0),
        cell(Retry, Dl, ONCE, true, 0, 0),
        cell(After, Dl, ONCE, true, 1, 0),
    ]);
    run_all(SELF_DL, Count::Broker, cells).await;
}

/// Dead-letters itself and delays natively: a spent delivery is moved at once.
#[rustfmt::skip]
#[tokio::test(start_paused = true)]
async fn self_dead_lettering_broker_with_delays() {
    let mut cells = settled_once(true);
    cells.extend([
        cell(Retry, Nothing, TO_GIVE_UP, false, 0, 0),
        cell(After, Nothing, TO_GIVE_UP, false, 4, 0),
        cell(Retry, Cap, TO_CAP, false, 0, 0),
        cell(After, Cap, TO_CAP, false, 2, 0),
        cell(Retry, CapDl, TO_CAP, true, 0, 0),
        cell(After, CapDl, TO_CAP, true, 2, 0),
        cell(Retry, Dl, ONCE, true, 0, 0),
        cell(After, Dl, ONCE, true, 0, 0),
    ]);
    run_all(SELF_DL_DELAYS, Count::Broker, cells).await;
}

/// Cannot settle at all (Pub/Sub, a plain list, pre-settled): the message leaves the broker
/// on delivery; `ack`, `drop`, a `retry()` with nothing declared and a rejection at the cap are
/// `AckError::Unsupported` (and the message is gone); declared retries are copies.
#[rustfmt::skip]
#[tokio::test(start_paused = true)]
async fn non_settling_broker() {
    let mut cells: Vec<Cell> = DECLS
        .iter()
        .flat_map(|&decl| [cell(Ack, decl, ONCE, false, 0, 1), cell(Drop, decl, ONCE, false, 0, 1)])
        .collect();
    cells.extend([
        // Nothing declared: the broker cannot take it back; lost, as the table says.
        cell(Retry, Nothing, ONCE, false, 0, 1),
        // retry_after copies from the process; the final ack is unsupported.
        cell(After, Nothing, TO_GIVE_UP, false, 4, 1),
        cell(Retry, Cap, TO_CAP, false, 0, 1),
        cell(After, Cap, TO_CAP, false, 2, 1),
        cell(Retry, CapDl, TO_CAP, true, 0, 0),
        cell(After, CapDl, TO_CAP, true, 2, 0),
        cell(Retry, Dl, ONCE, true, 0, 0),
        cell(After, Dl, ONCE, true, 0, 0),
    ]);
    run_all(NONE, Count::Header, cells).await;
}

/// Retry copies go to the declared retry address, not the subscription's own.
#[tokio::test(start_paused = true)]
async fn copies_go_to_the_retry_address() {
    let calls = Calls::default();
    let log = calls.clone();
    let app = TestApp::start_with(SETTLES, |b| {
        App::new(b)
            .mount(
                Mount::new(Q).max_attempts(CAP).retry_to("m.retry"),
                move |Attempt(a): Attempt, h: Headers, _: u32| {
                    log.record(a, &h, b"");
                    async { retry() }
                },
            )
            .mount("m.retry", |_: u32| async { ack() })
    })
    .await;
    app.publish_message(Q, json_message(PAYLOAD)).await;
    settle(&app).await;
    assert_eq!(calls.attempts(), [1], "the copy does not come back to m");
    let retried: Vec<_> = app
        .settlements()
        .iter()
        .map(|r| (r.address.to_string(), r.attempt))
        .collect();
    assert_eq!(retried, [("m".to_owned(), 1), ("m.retry".to_owned(), 2)]);
    app.stop().await.expect("clean stop");
}
