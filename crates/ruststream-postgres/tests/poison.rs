//! A poison message with the defaults: under `max_attempts(3)` and a dead letter, service
//! A's handler panics (the default `fail_fast` stops it), then service B always retries.
//! The row's own count carries A's attempt, so B sees attempts 2 and 3 and the message
//! ends as a row of the dead letter's queue: three handler runs in all.

mod support;

use std::time::Duration;

use ruststream::{App, Attempt, Mount, retry};
use ruststream_core::{Broker, Message};

fn mount() -> Mount {
    Mount::new("jobs").max_attempts(3).dead_letter("jobs.dead")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_is_counted_across_services_then_dead_lettered() {
    let schema = support::unique_schema("poison");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(char, u32)>();

    let broker = support::broker(&schema, "").await;
    let a = tx.clone();
    let panics = move |Attempt(attempt): Attempt| {
        let _ = a.send(('a', attempt));
        async move {
            panic!("service A fails");
            #[allow(unreachable_code)]
            retry()
        }
    };
    let running = App::new(broker.clone())
        .mount(mount(), panics)
        .start()
        .await
        .expect("service A starts");
    let publisher = broker.publisher();
    publisher
        .publish("jobs".into(), Message::new("order"))
        .await
        .expect("published");
    tokio::time::timeout(Duration::from_secs(10), running.stopping())
        .await
        .expect("fail_fast stops service A");
    assert!(running.stop().await.is_err(), "A's run ends with the panic");

    let broker = support::broker(&schema, "").await;
    let b = tx.clone();
    let retries = move |Attempt(attempt): Attempt| {
        let _ = b.send(('b', attempt));
        async move { retry() }
    };
    let running = App::new(broker.clone())
        .mount(mount(), retries)
        .start()
        .await
        .expect("service B starts");
    let mut seen = Vec::new();
    while let Ok(Some(call)) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
        seen.push(call);
        if seen.len() >= 3 {
            if let Ok(Some(more)) = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await {
                seen.push(more);
            }
            break;
        }
    }
    assert_eq!(
        seen,
        [('a', 1), ('b', 2), ('b', 3)],
        "each attempt counted once"
    );
    let inspect = broker.inspect().expect("inspects");
    let dead = inspect
        .browse(&"jobs.dead".into(), 10)
        .await
        .expect("browsed");
    assert_eq!(dead.len(), 1, "one dead letter");
    assert_eq!(dead[0].message.payload.as_ref(), b"order");
    let left = inspect.browse(&"jobs".into(), 10).await.expect("browsed");
    assert!(left.is_empty(), "the original is gone: {left:?}");
    running.stop().await.expect("stops");
    support::drop_schema(&schema);
}
