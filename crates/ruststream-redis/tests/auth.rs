//! Authentication, on a server of this test's own: the default user's password
//! (`redis://:password@host`) and an ACL user (`redis://user:password@host`) connect, and
//! their subscriptions and publishers work; a wrong password is refused.

mod support;

use ruststream_core::{Broker, Settlement};
use ruststream_redis::{ConnectError, RedisBroker, Stream};
use support::server::{SERIAL, Server};
use support::{ctx_at, msg, n_of, next};

fn server() -> Server {
    Server::start_with(
        false,
        &[
            "--requirepass",
            "s3cret",
            "--user",
            "app",
            "on",
            ">app-pass",
            "~*",
            "&*",
            "+@all",
        ],
    )
}

/// A stream round trip through the adapter at `url`: publish, consume, ack.
async fn round_trip(url: &str) {
    let ctx = ctx_at(url).await;
    let mut sub = ctx.subscribe("orders", Stream::new().group("g"), 8).await;
    ctx.publish("orders", msg(7)).await;
    let delivery = next(&mut sub).await;
    assert_eq!(n_of(&delivery), 7);
    delivery.settle(Settlement::Accept).await.expect("acked");
    assert_eq!(ctx.pending("orders", "g").await, 0);
    ctx.broker.close().await;
}

#[tokio::test]
async fn a_password_and_an_acl_user_connect_and_work() {
    let _one_server_at_a_time = SERIAL.lock().await;
    let server = server();
    let port = server.port;
    round_trip(&format!("redis://:s3cret@127.0.0.1:{port}")).await;
    round_trip(&format!("redis://app:app-pass@127.0.0.1:{port}")).await;
}

#[tokio::test]
async fn a_wrong_or_missing_password_is_refused() {
    let _one_server_at_a_time = SERIAL.lock().await;
    let server = server();
    let port = server.port;
    for url in [
        format!("redis://:wrong@127.0.0.1:{port}"),
        format!("redis://app:wrong@127.0.0.1:{port}"),
        format!("redis://127.0.0.1:{port}"),
    ] {
        let err = RedisBroker::connect(&url)
            .await
            .err()
            .unwrap_or_else(|| panic!("{url} connected"));
        assert!(matches!(err, ConnectError::Connect(_)), "{url}: {err}");
    }
}
