//! PostgreSQL away for a while (every connection cut and new ones refused, through a TCP
//! proxy): the consumer hands the runtime one error for the outage (the runtime logs
//! each as a WARN), not one per failed claim, and claims again once the server is back.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_conformance::proxy::Proxy;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_one_error_not_one_per_claim() {
    let schema = support::unique_schema("outage");
    let direct = support::url_for(&schema, "");
    let (scheme, rest) = direct.split_once("://").expect("a url");
    let (credentials, rest) = rest.rsplit_once('@').map_or(("", rest), |(c, r)| (c, r));
    let (server, path) = rest.split_once('/').expect("a database");
    let proxy = Proxy::start(server).await;
    let at = if credentials.is_empty() {
        String::new()
    } else {
        format!("{credentials}@")
    };
    let through = format!("{scheme}://{at}127.0.0.1:{}/{path}", proxy.port());
    let producer = support::broker(&schema, "").await;
    let consumer = ruststream_postgres::PostgresBroker::connect(&through)
        .await
        .unwrap_or_else(|error| panic!("{}", support::missing(&error)));
    let mut stream = consumer
        .subscribe(SubscribeSpec::new("jobs"))
        .await
        .expect("subscribed")
        .deliveries;

    proxy.down();
    // The first claim that fails comes after the idle wait (the poll, 5 s) and the pool's
    // wait for a connection (5 s): how much later on a loaded machine is not ours to
    // bound, so the first error is awaited for up to 60 s. Then claims keep failing (each
    // after a back-off of at most 5 s and a wait for a connection of 5 s): 12 s more hold
    // at least one more failed claim, which must hand over nothing.
    let mut errors = 0;
    let mut until = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(Some(item)) = tokio::time::timeout_at(until, stream.next()).await {
        if item.is_err() {
            errors += 1;
            if errors == 1 {
                until = tokio::time::Instant::now() + Duration::from_secs(12);
            }
        }
    }
    proxy.up();
    assert_eq!(errors, 1, "errors handed over for one outage");

    producer
        .publisher()
        .publish("jobs".into(), Message::new("after"))
        .await
        .expect("published");
    let delivery = match tokio::time::timeout(Duration::from_secs(20), stream.next()).await {
        Ok(Some(Ok(delivery))) => delivery,
        Ok(Some(Err(error))) => panic!("another error after the outage: {error}"),
        Ok(None) => panic!("the stream ended"),
        Err(_) => panic!("nothing within 20 s after the outage"),
    };
    assert_eq!(delivery.payload().as_ref(), b"after");
    delivery.settle(Settlement::Accept).await.expect("accepted");
    consumer.close().await;
    producer.close().await;
    support::drop_schema(&schema);
}
