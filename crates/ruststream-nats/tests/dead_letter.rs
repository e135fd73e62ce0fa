//! A dead letter no stream holds: JetStream refuses the publish, and the runtime hands
//! the message back and runs its handler again, without end (the attempt climbed 5, 6 …
//! 10). Where the adapter makes the mount's stream it makes the dead letter's too; where
//! the stream is the operator's, subscribing is refused with the fix.
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use ruststream::{App, Attempt, Mount, retry};
use ruststream_core::{Broker, Message, SubscribeError, SubscribeSpec};
use support::{broker, publish, unique};

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::delete_streams(&self.0);
    }
}

async fn stored(js: &jetstream::Context, subject: &str) -> Option<u64> {
    let name = js.stream_by_subject(subject).await.ok()?;
    let mut stream = js.get_stream(name).await.ok()?;
    Some(stream.info().await.ok()?.state.messages)
}

/// Default options, `max_attempts(3)` and a dead letter nothing holds, a handler that
/// always retries: attempts 1, 2, 3, then the dead letter is stored, and the handler
/// runs no more.
#[tokio::test]
async fn the_dead_letter_gets_a_stream_where_the_adapter_makes_the_mounts() {
    let subject = unique("deadmade");
    let dead = format!("{subject}.dead");
    let _cleanup = Cleanup(subject.clone());
    let broker = broker().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |Attempt(attempt): Attempt| {
        let _ = tx.send(attempt);
        async move { retry() }
    };
    let mount = Mount::new(subject.as_str())
        .max_attempts(3)
        .dead_letter(dead.as_str());
    let running = App::new(broker.clone())
        .mount(mount, handler)
        .start()
        .await
        .expect("the service starts");
    publish(&broker, &subject, Message::new("spent")).await;
    let mut attempts = Vec::new();
    while let Ok(Some(attempt)) = tokio::time::timeout(Duration::from_secs(4), rx.recv()).await {
        attempts.push(attempt);
        assert!(attempts.len() < 10, "the handler runs again: {attempts:?}");
    }
    assert_eq!(attempts, [1, 2, 3], "three attempts, then the dead letter");
    let js = jetstream::new(support::client().await);
    assert_eq!(
        stored(&js, &dead).await,
        Some(1),
        "the dead letter is stored"
    );
    running.stop().await.expect("stops");
}

/// The operator's stream holds the mount's subject, no stream holds its dead letter:
/// subscribing is refused, naming the dead letter and the command that fixes it; once
/// the operator made that stream, it is accepted.
#[tokio::test]
async fn a_dead_letter_no_stream_holds_is_refused_on_an_operators_stream() {
    let subject = unique("deadop");
    let dead = format!("{subject}.dead");
    let _cleanup = Cleanup(subject.clone());
    let js = jetstream::new(support::client().await);
    js.create_stream(stream::Config {
        name: subject.replace('.', "_"),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .expect("the operator's stream");
    let broker = broker().await;
    let spec = || {
        let mut spec = SubscribeSpec::new(subject.as_str());
        spec.declaration.max_attempts = NonZeroU32::new(5);
        spec.declaration.dead_letter = Some(dead.as_str().into());
        spec
    };
    match broker.subscribe(spec()).await {
        Err(SubscribeError::BadAddress(why)) => {
            assert!(why.contains(&dead), "{why}");
            assert!(why.contains("nats stream add"), "{why}");
        }
        other => panic!("expected a refusal naming the dead letter, got {other:?}"),
    }
    assert_eq!(
        stored(&js, &dead).await,
        None,
        "nothing made on the operator's behalf"
    );
    js.create_stream(stream::Config {
        name: dead.replace('.', "_"),
        subjects: vec![dead.clone()],
        ..Default::default()
    })
    .await
    .expect("the operator's dead-letter stream");
    broker
        .subscribe(spec())
        .await
        .expect("accepted once the dead letter has a stream");
}
