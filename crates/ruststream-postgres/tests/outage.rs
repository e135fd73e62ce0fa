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
    // Claims keep failing meanwhile (each waits for a connection up to 5 s).
    let mut errors = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(14);
    while let Ok(Some(item)) = tokio::time::timeout_at(until, stream.next()).await {
        errors += usize::from(item.is_err());
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
