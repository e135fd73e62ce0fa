//! A form that moves (writes a copy and removes the delivery it replaces in one step):
//! a process killed at any moment leaves each message exactly once, never twice.

use std::collections::BTreeMap;
use std::time::Duration;

use ruststream::{Address, ack, retry};
use ruststream_core::{MESSAGE_ID, Message};

use super::publish;
use crate::Harness;
use crate::child::{Child, current_test};
use crate::inbox::{WAIT, inbox};
use crate::recorder::recorder;
use crate::service::Service;

/// The variable that makes the check's own test, run again as a child process, one of
/// the services that are killed; it names the two addresses (`A B`).
const CHILD: &str = "RUSTSTREAM_CONFORMANCE_MOVING";

/// The messages moved about.
const MESSAGES: usize = 20;

/// How many child services move them side by side, each killed at a moment of its own.
const CHILDREN: u64 = 4;

/// Where the form moves ([`Capabilities::moves`](ruststream_core::Capabilities::moves)):
/// four services compete for messages that go back and forth between two addresses for
/// ever (a mount on each, `max_attempts(1)` and the other address as its dead letter,
/// a handler that asks a retry: each dead letter a copy that replaces its original),
/// and each is SIGKILLed at a moment of its own while they move. Then every message is
/// there exactly once: once what the killed services held is given back (a lease
/// running out), a service that acknowledges everything on both addresses sees each
/// message once. A form that publishes the copy first and removes the original after
/// keeps both when killed between the two (a duplicate, never a loss), so the check does
/// not apply to it.
pub async fn one_copy_after_a_kill(h: &impl Harness) {
    const CHECK: &str = "one_copy_after_a_kill";
    if !h.capabilities().moves {
        crate::report::not_applicable(
            h.name(),
            CHECK,
            "the form publishes a copy before it removes the original (a crash between the \
             two leaves both: a duplicate, never a loss)",
        );
        return;
    }
    if let Ok(addresses) = std::env::var(CHILD) {
        let (a, b) = addresses.split_once(' ').expect("two addresses");
        return moving(h, a.into(), b.into()).await;
    }
    let (a, b) = (h.fresh_address(), h.fresh_address());
    let mut service = Service::start(h, |app| app).await;
    for n in 0..MESSAGES {
        let id = format!("moved-{n}");
        let message = Message::new(id.clone()).with_header(MESSAGE_ID, id);
        publish(h, &service, &a, message).await;
    }
    service.stop_ok().await;
    let (test, both) = (current_test(), format!("{a} {b}"));
    let mut children = Vec::new();
    for _ in 0..CHILDREN {
        let share = h.share();
        let env = [(CHILD, both.as_str())];
        children
            .push(Child::started_with(&test, &env, share.as_deref(), "started", WAIT * 3).await);
    }
    // Each killed at a moment of its own while they move.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for child in children {
        child.kill();
        tokio::time::sleep(Duration::from_millis(41)).await;
    }

    let (outbox, mut seen) = inbox("delivery");
    let mut after = Service::start(h, |app| {
        app.mount(
            h.mount(a.clone()),
            recorder(outbox.clone(), |_| async { ack() }),
        )
        .mount(h.mount(b.clone()), recorder(outbox, |_| async { ack() }))
    })
    .await;
    // Every message, and whatever comes until the killed services' holdings are back.
    let mut counted: BTreeMap<String, usize> = BTreeMap::new();
    let until = tokio::time::Instant::now() + h.after_a_kill() + h.quiet();
    while counted.len() < MESSAGES || tokio::time::Instant::now() < until {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let next = if counted.len() < MESSAGES {
            seen.next_within(left.max(WAIT)).await
        } else {
            match seen.try_next(left).await {
                Some(next) => next,
                None => break,
            }
        };
        *counted
            .entry(String::from_utf8_lossy(&next.payload).into_owned())
            .or_default() += 1;
    }
    after.stop_ok().await;
    let twice: Vec<_> = counted.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{}: messages there more than once after the kills: {twice:?}",
        h.name()
    );
}

/// The child's part: moves every delivery from `a` to `b` and back until it is killed.
async fn moving(h: &impl Harness, a: Address, b: Address) {
    let (outbox, mut seen) = inbox("delivery");
    let across = |from: &Address, to: &Address| {
        h.mount(from.clone())
            .max_attempts(1)
            .dead_letter(to.clone())
    };
    // Kept running: the service moves until the process is killed (the parent never
    // lets it reach the check's limit).
    let _service = Service::start(h, |app| {
        app.mount(
            across(&a, &b),
            recorder(outbox.clone(), |_| async { retry() }),
        )
        .mount(across(&b, &a), recorder(outbox, |_| async { retry() }))
    })
    .await;
    println!("started");
    loop {
        let _ = seen.try_next(WAIT).await;
    }
}
