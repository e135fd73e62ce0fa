//! Requests from outside handlers on the memory broker: what the conformance check
//! `request_reply` does not cover (a publisher without a broker, a closing broker, a
//! cancelled request, headers on a request, a mount that allows only some reply
//! addresses).

use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream::{App, Headers, Mount, Publisher, Reply, publisher::RequestError};
use ruststream_core::{Broker, REPLY_TO};

async fn echo_tenant(headers: Headers, _: u32) -> Reply<String> {
    Reply::new(headers.get_str("tenant").unwrap_or("-").to_owned())
}

#[tokio::test]
async fn a_publisher_without_a_broker_cannot_request() {
    let broker = MemoryBroker::new();
    let publisher = Publisher::new(broker.publisher());
    let answer: Result<u32, _> = publisher
        .request("anywhere", &1, Duration::from_secs(1))
        .await;
    assert!(matches!(answer, Err(RequestError::NoReplies)), "{answer:?}");
    assert_eq!(broker.ready("anywhere"), 0, "nothing was sent");
}

#[tokio::test]
async fn a_request_waiting_when_the_service_stops_ends_as_closed() {
    let running = App::new(MemoryBroker::new()).start().await.expect("starts");
    let publisher = running.publisher();
    let waiting = tokio::spawn(async move {
        publisher
            .request::<_, u32>("nobody-serves-this", &1, Duration::from_secs(30))
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.stop().await.expect("stops");
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the request ends with the broker")
        .expect("the task");
    assert!(matches!(answer, Err(RequestError::Closed)), "{answer:?}");
}

#[tokio::test]
async fn a_cancelled_request_is_forgotten() {
    let running = App::new(MemoryBroker::new()).start().await.expect("starts");
    let publisher = running.publisher();
    let request = publisher.request::<_, u32>("nobody-serves-this", &1, Duration::from_secs(30));
    // Cancelled after it was sent: the map entry goes with it.
    let cancelled = tokio::time::timeout(Duration::from_millis(100), request).await;
    assert!(cancelled.is_err(), "no reply could come");
    assert_eq!(publisher.waiting_requests().await, 0);
    running.stop().await.expect("stops");
}

#[tokio::test]
async fn requests_carry_headers_and_reply_addresses_can_be_restricted() {
    let running = App::new(MemoryBroker::new())
        .mount(
            Mount::new("tenants").allow_reply_to(|to: &str| to.starts_with("billing.replies.")),
            echo_tenant,
        )
        .start()
        .await
        .expect("starts");
    let publisher = running.publisher().reply_prefix("billing.replies.");
    let reply_to = publisher.reply_address().await.expect("reply address");
    assert!(
        reply_to.as_str().starts_with("billing.replies."),
        "{reply_to}"
    );
    let tenant: String = publisher
        .message("tenants", &1u32)
        .header("tenant", "acme")
        .header(REPLY_TO, "ignored: the request sets its own")
        .request(Duration::from_secs(5))
        .await
        .expect("a reply");
    assert_eq!(tenant, "acme");

    // The default prefix is not allowed: no reply is sent, the request times out.
    let refused: Result<String, _> = running
        .publisher()
        .request("tenants", &2u32, Duration::from_millis(300))
        .await;
    assert!(
        matches!(refused, Err(RequestError::Timeout { .. })),
        "{refused:?}"
    );
    running.stop().await.expect("stops");
}
