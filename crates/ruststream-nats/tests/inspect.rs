//! The dead-letter tools' capability on JetStream: a browse reads what the stream holds
//! for the subject by stream sequence and touches no consumer; removing deletes exactly
//! the sequences asked for, of that subject only; a subject no stream holds is refused.

mod support;

use std::time::Duration;

use async_nats::jetstream::{self, stream};
use ruststream_core::{Broker, Inspect, InspectError, Message, REPLAYED_AT, Settlement, Waiting};
use ruststream_nats::{JetStream, NatsBroker};
use support::{broker, client, delete_streams, next, publish, raw_hpub, subscribe, unique};

/// Deletes the test's streams when the test ends, passed or failed.
struct Streams(String);

impl Drop for Streams {
    fn drop(&mut self) {
        delete_streams(&self.0);
    }
}

fn inspect(broker: &NatsBroker) -> &dyn Inspect {
    broker.inspect().expect("the NATS broker offers Inspect")
}

fn payloads(waiting: &[Waiting]) -> Vec<String> {
    waiting
        .iter()
        .map(|w| String::from_utf8_lossy(&w.message.payload).into_owned())
        .collect()
}

fn dead(n: u32) -> Message {
    Message::new(format!("dead {n}"))
        .with_header("x-ruststream-dead-letter-from", "orders")
        .with_header("x-ruststream-dead-letter-reason", "retry")
}

/// A stream `name` holding `subjects`.
async fn stream(name: &str, subjects: &[String]) {
    let js = jetstream::new(client().await);
    js.create_stream(stream::Config {
        name: name.to_owned(),
        subjects: subjects.to_vec(),
        ..stream::Config::default()
    })
    .await
    .expect("create the stream");
}

#[tokio::test]
async fn a_browse_reads_the_subject_by_sequence_and_touches_no_consumer() {
    let name = unique("inspect-browse");
    let _clean = Streams(name.clone());
    let (dead_subject, other) = (format!("{name}.dead"), format!("{name}.other"));
    stream(&name, &[format!("{name}.>")]).await;
    let broker = broker().await;
    publish(&broker, &dead_subject, dead(1)).await;
    publish(&broker, &other, Message::new("not a dead letter")).await;
    publish(&broker, &dead_subject, dead(2)).await;
    publish(&broker, &dead_subject, dead(3)).await;

    let address = dead_subject.as_str().into();
    let all = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&all), ["dead 1", "dead 2", "dead 3"]);
    let ids: Vec<&str> = all.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["1", "3", "4"], "stream sequences");
    assert_eq!(
        all[0]
            .message
            .headers
            .get_str("x-ruststream-dead-letter-reason"),
        Some("retry")
    );
    let first = inspect(&broker).browse(&address, 2).await.expect("browse");
    assert_eq!(first, all[..2]);
    let wildcard = inspect(&broker)
        .browse(&format!("{name}.*").as_str().into(), 100)
        .await
        .expect("browse a wildcard");
    assert_eq!(wildcard.len(), 4);

    // A consumer made afterwards gets them all, each at its first delivery.
    let mut subscription = subscribe(&broker, &dead_subject, Some(JetStream::new())).await;
    for n in 1..=3 {
        let delivery = next(&mut subscription, Duration::from_secs(5)).await;
        assert_eq!(delivery.payload().as_ref(), format!("dead {n}").as_bytes());
        assert_eq!(delivery.redelivery_count(), 1, "a browse is not an attempt");
        delivery.settle(Settlement::Accept).await.expect("acked");
    }
    broker.close().await;
}

#[tokio::test]
async fn remove_deletes_exactly_the_sequences_asked_of_the_subject() {
    let name = unique("inspect-remove");
    let _clean = Streams(name.clone());
    let (dead_subject, other) = (format!("{name}.dead"), format!("{name}.other"));
    stream(&name, &[format!("{name}.>")]).await;
    let broker = broker().await;
    for n in 1..=3 {
        publish(&broker, &dead_subject, dead(n)).await;
    }
    publish(&broker, &other, Message::new("another subject's")).await;
    let address = dead_subject.as_str().into();

    // "4" is the other subject's message; "x" and "99" are not there: all skipped.
    let ids = ["2", "4", "x", "99"].map(str::to_owned);
    assert_eq!(inspect(&broker).remove(&address, &ids).await, Ok(1));
    assert_eq!(inspect(&broker).remove(&address, &ids).await, Ok(0));
    let left = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&left), ["dead 1", "dead 3"]);
    let others = inspect(&broker)
        .browse(&other.as_str().into(), 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&others), ["another subject's"]);
    broker.close().await;
}

/// A replay publishes the copy (its replay time makes it another message for the
/// duplicate window) and deletes the original after: the copy stays.
#[tokio::test]
async fn a_replay_copy_survives_the_removal_of_its_original() {
    let name = unique("inspect-replay");
    let _clean = Streams(name.clone());
    let dead_subject = format!("{name}.dead");
    stream(&name, &[format!("{name}.>")]).await;
    let broker = broker().await;
    let original = dead(1).with_header("message-id", "m-1");
    publish(&broker, &dead_subject, original).await;
    let address = dead_subject.as_str().into();
    let all = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    let copy = all[0].message.clone().with_header(REPLAYED_AT, "1");
    publish(&broker, &dead_subject, copy).await;
    assert_eq!(
        inspect(&broker)
            .remove(&address, &[all[0].id.clone()])
            .await,
        Ok(1)
    );
    let left = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&left), ["dead 1"]);
    assert_ne!(left[0].id, all[0].id);
    assert_eq!(left[0].message.headers.get_str(REPLAYED_AT), Some("1"));
    broker.close().await;
}

/// Headers come in their stored order, and a message whose header block the client
/// cannot read (not UTF-8) is browsed with a defect saying why, not an error.
#[tokio::test]
async fn stored_headers_are_read_as_stored() {
    let name = unique("inspect-headers");
    let _clean = Streams(name.clone());
    let subject = format!("{name}.dead");
    stream(&name, &[format!("{name}.>")]).await;
    raw_hpub(
        &subject,
        b"NATS/1.0\r\nz: 1\r\na: 2\r\nm: 3\r\n\r\n",
        b"ordered",
    );
    raw_hpub(
        &subject,
        b"NATS/1.0\r\nX-Bad: \xff\xfe\r\n\r\n",
        b"unreadable",
    );
    let broker = broker().await;
    let address = subject.as_str().into();
    for _ in 0..5 {
        let all = inspect(&broker).browse(&address, 10).await.expect("browse");
        assert_eq!(payloads(&all), ["ordered", "unreadable"]);
        let names: Vec<&str> = all[0]
            .message
            .headers
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names, ["z", "a", "m"]);
        assert_eq!(all[0].defect, None);
        let defect = all[1].defect.as_deref().unwrap_or_default();
        assert!(defect.contains("not UTF-8"), "{defect:?}");
    }
    assert_eq!(
        inspect(&broker).remove(&address, &["2".to_owned()]).await,
        Ok(1)
    );
    broker.close().await;
}

#[tokio::test]
async fn a_subject_no_stream_holds_is_refused() {
    let broker = broker().await;
    for (subject, says) in [
        (unique("inspect-nowhere"), "no JetStream stream holds"),
        ("a..b".to_owned(), "empty token"),
    ] {
        match inspect(&broker).browse(&subject.as_str().into(), 10).await {
            Err(InspectError::Unsupported { reason, .. }) => {
                assert!(reason.contains(says), "{subject}: {reason}");
            }
            other => panic!("{subject}: {other:?}"),
        }
        match inspect(&broker)
            .remove(&subject.as_str().into(), &["1".to_owned()])
            .await
        {
            Err(InspectError::Unsupported { .. }) => {}
            other => panic!("{subject}: {other:?}"),
        }
    }
    broker.close().await;
}
