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
