//! The dead-letter tools' view of a queue: browsing leaves every row where it was and
//! counts no attempt; removing takes exactly the rows named.

mod support;

use ruststream_core::{Broker, Message};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browse_then_remove_by_id() {
    let schema = support::unique_schema("inspect");
    let broker = support::broker(&schema, "").await;
    let publisher = broker.publisher();
    for payload in ["a", "b", "c"] {
        let message = Message::new(payload).with_header("x-binary", vec![0xff_u8, 0]);
        publisher
            .publish("dead".into(), message)
            .await
            .expect("published");
    }
    let inspect = broker.inspect().expect("inspects");
    let dead = "dead".into();
    let waiting = inspect.browse(&dead, 10).await.expect("browsed");
    let payloads: Vec<_> = waiting.iter().map(|w| w.message.payload.clone()).collect();
    assert_eq!(payloads, ["a", "b", "c"].map(bytes::Bytes::from));
    assert_eq!(
        waiting[0]
            .message
            .headers
            .get("x-binary")
            .map(|v| v.as_bytes().to_vec()),
        Some(vec![0xff, 0])
    );
    assert_eq!(inspect.browse(&dead, 2).await.expect("browsed").len(), 2);
    let again = inspect.browse(&dead, 10).await.expect("browsed again");
    assert_eq!(again, waiting, "browsing changes nothing");

    let ids = vec![
        waiting[1].id.clone(),
        "not-an-id".to_owned(),
        "999999999".to_owned(),
    ];
    assert_eq!(inspect.remove(&dead, &ids).await.expect("removed"), 1);
    assert_eq!(inspect.remove(&dead, &ids).await.expect("removed"), 0);
    let left = inspect.browse(&dead, 10).await.expect("browsed");
    assert_eq!(
        left.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        [&waiting[0].id, &waiting[2].id]
    );
    // Another queue's rows are not this one's.
    assert_eq!(
        inspect
            .remove(&"other".into(), &[waiting[0].id.clone()])
            .await
            .expect("none"),
        0
    );
    let attempts: i64 = sqlx::query_scalar(&format!(
        "SELECT sum(attempts)::bigint FROM {schema}.ruststream_messages"
    ))
    .fetch_one(broker.pool())
    .await
    .expect("attempts");
    assert_eq!(attempts, 0, "browsing is not a delivery");
    broker.close().await;
    support::drop_schema(&schema);
}

/// A replay replaces its dead letter in one statement: the dead letter's row is gone and
/// its copy is a row of the destination, or neither; a second replay of the same id, or
/// of a row another consumer has claimed, writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_moves_the_row_in_one_step() {
    let schema = support::unique_schema("inspect_replay");
    let broker = support::broker(&schema, "").await;
    let publisher = broker.publisher();
    for payload in ["a", "b"] {
        publisher
            .publish("dead".into(), Message::new(payload))
            .await
            .expect("published");
    }
    let inspect = broker.inspect().expect("inspects");
    let (dead, orders) = ("dead".into(), "orders".into());
    let waiting = inspect.browse(&dead, 10).await.expect("browsed");
    let copy = Message::new("a").with_header("x-ruststream-replayed-at", "1");
    let moving = inspect
        .replace(&dead, &waiting[0].id, &orders, &copy)
        .expect("PostgreSQL replaces in one step");
    assert!(moving.await.expect("moved"), "the row was there");
    let left = inspect.browse(&dead, 10).await.expect("browsed");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].id, waiting[1].id);
    let copies = inspect.browse(&orders, 10).await.expect("browsed");
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].message.payload, copy.payload);
    assert_eq!(
        copies[0]
            .message
            .headers
            .get_str("x-ruststream-replayed-at"),
        Some("1")
    );
    // Gone already: nothing more is written.
    let again = inspect
        .replace(&dead, &waiting[0].id, &orders, &copy)
        .expect("one step");
    assert!(!again.await.expect("answered"), "the row is gone");
    assert_eq!(inspect.browse(&orders, 10).await.expect("browsed").len(), 1);
    // A row a consumer holds is not replayed from under it.
    sqlx::query(&format!(
        "UPDATE {schema}.ruststream_messages SET leased = true WHERE id = {}",
        waiting[1].id
    ))
    .execute(broker.pool())
    .await
    .expect("claimed by hand");
    let claimed = inspect
        .replace(&dead, &waiting[1].id, &orders, &copy)
        .expect("one step");
    assert!(!claimed.await.expect("answered"), "a claimed row stays");
    assert_eq!(inspect.browse(&orders, 10).await.expect("browsed").len(), 1);
    broker.close().await;
    support::drop_schema(&schema);
}
