//! Messages whose runtime headers a foreign producer forged or mangled.

use std::collections::BTreeMap;
use std::time::Duration;

use ruststream::retry;
use ruststream_core::{HeaderValue, Message, RETRY_COUNT};

use super::{publish, settles};
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::{acking, recorder};
use crate::service::Service;

/// The cap the check declares.
const CAP: u32 = 3;

/// Messages carrying a forged `x-ruststream-retry-count` (not a number, negative, past
/// `u32`, the largest `u32`, empty, twice, bytes that are not UTF-8 where the form
/// carries them) and one without it reach a mount that always retries under
/// `max_attempts(3)` and a dead letter. Each is handled at attempts of at least 1, at
/// most three times (none where the forged count is past the cap and the form's attempt
/// adds its own count to a copy's), and then dead-lettered once: no forged count makes a
/// message loop, vanish or stop the consumer, and the message without one runs attempts
/// 1, 2 and 3.
pub async fn forged_retry_count(h: &impl Harness) {
    if !settles(h, "forged_retry_count") {
        return;
    }
    let (address, dead) = (h.fresh_address(), h.fresh_address());
    let (outbox, mut seen) = inbox("delivery");
    let (dead_outbox, mut dead_letters) = inbox("dead letter");
    let mount = h
        .mount(address.clone())
        .max_attempts(CAP)
        .dead_letter(dead.clone());
    let mut service = Service::start(h, |app| {
        app.mount(mount, recorder(outbox, |_| async { retry() }))
            .mount(h.mount(dead), acking(dead_outbox))
    })
    .await;
    let mut forged: Vec<(&str, Message)> = [
        "abc",
        "-1",
        "99999999999999999999",
        "4294967295",
        "",
        " 2",
        "0x10",
    ]
    .into_iter()
    .map(|count| {
        (
            count,
            Message::new(format!("forged {count:?}")).with_header(RETRY_COUNT, count),
        )
    })
    .collect();
    let mut twice = Message::new("forged twice").with_header(RETRY_COUNT, "1");
    twice.headers.append(RETRY_COUNT, "7");
    forged.push(("1 and 7", twice));
    if h.binary_headers() {
        forged.push((
            "not UTF-8",
            Message::new("forged bytes")
                .with_header(RETRY_COUNT, HeaderValue::from(vec![0xff, 0x31])),
        ));
    }
    forged.push(("none", Message::new("plain")));
    for (_, message) in &forged {
        publish(h, &service, &address, message.clone()).await;
    }

    let mut dead_by_payload: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    while dead_by_payload.len() < forged.len() {
        let letter = dead_letters.next().await;
        *dead_by_payload.entry(letter.payload.to_vec()).or_default() += 1;
    }
    // Every run started before its dead letter was published.
    let mut runs: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
    while let Some(one) = seen.try_next(Duration::ZERO).await {
        runs.entry(one.payload.to_vec())
            .or_default()
            .push(one.attempt);
    }
    seen.nothing_for(h.quiet()).await;
    dead_letters.nothing_for(Duration::ZERO).await;
    for (count, message) in &forged {
        let payload = message.payload.to_vec();
        let attempts = runs.get(&payload).cloned().unwrap_or_default();
        // A forged count may say attempts were spent (a form whose attempt adds the
        // broker's count to a copy's dead-letters it unhandled), never more than the cap.
        assert!(
            attempts.len() <= CAP as usize,
            "{}: the message with retry count {count:?} was handled at attempts {attempts:?} \
             (at most {CAP} runs expected)",
            h.name()
        );
        assert!(
            attempts.iter().all(|a| *a >= 1),
            "{}: the message with retry count {count:?} was handled at attempts {attempts:?}",
            h.name()
        );
        assert_eq!(
            dead_by_payload.get(&payload),
            Some(&1),
            "{}: the message with retry count {count:?} dead-lettered once",
            h.name()
        );
    }
    assert_eq!(
        runs.get(&b"plain"[..]),
        Some(&vec![1, 2, 3]),
        "{}: the message without a count",
        h.name()
    );
    service.stop_ok().await;
}
