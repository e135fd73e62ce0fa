//! The core NATS form: a queue group shares the messages (each goes to one member), a
//! plain subscription gets every one, and publishing to a subject consumed with `Core`
//! goes out with core NATS (no stream needed). Needs NATS (`RUSTSTREAM_NATS_URL`).

mod support;

use std::time::Duration;

use ruststream_core::{AckError, Message, Settlement};
use ruststream_nats::Core;
use support::{broker, publish, subscribe, try_next, unique};

const N: usize = 40;

#[tokio::test]
async fn a_queue_group_shares_and_a_plain_subscription_gets_all() {
    let subject = unique("group");
    let (a, b, plain) = (broker().await, broker().await, broker().await);
    let group = || Some(Core::new().queue_group("workers"));
    let mut first = subscribe(&a, &subject, group()).await;
    let mut second = subscribe(&b, &subject, group()).await;
    let mut all = subscribe(&plain, &subject, Some(Core::new())).await;
    for n in 0..N {
        publish(&a, &subject, Message::new(n.to_string())).await;
    }
    let mut got = Vec::new();
    for sub in [&mut first, &mut second] {
        while let Some(delivery) = try_next(sub, Duration::from_millis(500)).await {
            got.push(
                String::from_utf8_lossy(delivery.payload())
                    .parse::<usize>()
                    .expect("n"),
            );
        }
    }
    got.sort_unstable();
    assert_eq!(
        got,
        (0..N).collect::<Vec<_>>(),
        "each message to one member of the group"
    );
    let mut plain_got = 0;
    while let Some(delivery) = try_next(&mut all, Duration::from_millis(500)).await {
        plain_got += 1;
        // At most once: nothing to settle.
        assert_eq!(
            delivery.settle(Settlement::Accept).await,
            Err(AckError::Unsupported)
        );
    }
    assert_eq!(plain_got, N);
}
