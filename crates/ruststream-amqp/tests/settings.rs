//! Settings from configuration on RabbitMQ 4: the queue declared by the broker URL's
//! query alone, per-mount settings over it, typed options over both, and the errors that
//! name a bad setting.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ruststream::{App, Mount, Publisher, RunError, Running, mount::mount_env_name};
use ruststream_amqp::{AmqpBroker, ConnectOptions, QueueType, SubscribeOptions};
use ruststream_core::Broker;
use tokio::sync::mpsc;

fn url_with(query: &str) -> String {
    let url = support::url();
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}{query}")
}

fn var(address: &str, key: &str, value: &str) -> (String, String) {
    (
        format!("RUSTSTREAM_MOUNT__{}__{key}", mount_env_name(address)),
        value.to_owned(),
    )
}

/// A service whose one mount sends what it gets to the returned receiver.
async fn service(
    query: &str,
    mount: Mount,
    vars: &[(String, String)],
) -> Result<(Running, mpsc::UnboundedReceiver<u32>), RunError> {
    let broker = support::broker_at(&url_with(query), ConnectOptions::new()).await;
    let (tx, rx) = mpsc::unbounded_channel();
    let running = App::new(broker)
        .mount(mount, move |n: u32| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(n);
            }
        })
        .mount_settings(vars.to_vec())
        .start()
        .await?;
    Ok((running, rx))
}

/// The queue's type as RabbitMQ lists it.
fn queue_type(queue: &str) -> Option<String> {
    let listed = support::rabbitmq4(&["ctl", "list_queues", "name", "type"], None);
    listed.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        (fields.next() == Some(queue)).then(|| fields.next().unwrap_or("").to_owned())
    })
}

async fn roundtrip(queue: &str, n: u32, rx: &mut mpsc::UnboundedReceiver<u32>) {
    let producer = support::broker().await;
    Publisher::new(producer.publisher())
        .publish(queue, &n)
        .await
        .unwrap_or_else(|e| panic!("publish: {e}"));
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert_eq!(got.ok().flatten(), Some(n), "handled within 10 s");
    producer.close().await;
}

fn delete(queue: &str) {
    support::rabbitmq4(&["ctl", "delete_queue", queue], None);
}

#[tokio::test]
async fn the_url_query_alone_declares_the_queue() {
    let queue = support::unique("settings-url");
    // Without the query a missing queue is refused...
    let refused = service("", Mount::new(queue.as_str()), &[]).await.err();
    assert!(
        matches!(refused, Some(RunError::Subscribe { .. })),
        "{refused:?}"
    );
    assert_eq!(queue_type(&queue), None);
    // ...with it, the service makes it as a quorum queue and runs.
    let (running, mut rx) = service("declare=quorum&credit=16", Mount::new(queue.as_str()), &[])
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    assert_eq!(queue_type(&queue).as_deref(), Some("quorum"));
    roundtrip(&queue, 5, &mut rx).await;
    running.stop().await.expect("stop");
    delete(&queue);
}

#[tokio::test]
async fn mount_settings_win_over_the_url_and_typed_options_over_both() {
    let queue = support::unique("settings-env");
    let vars = [var(&queue, "DECLARE", "classic")];
    let (running, mut rx) = service("declare=quorum", Mount::new(queue.as_str()), &vars)
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    assert_eq!(queue_type(&queue).as_deref(), Some("classic"));
    roundtrip(&queue, 6, &mut rx).await;
    running.stop().await.expect("stop");
    delete(&queue);

    let queue = support::unique("settings-typed");
    let vars = [var(&queue, "DECLARE", "classic")];
    let mount =
        Mount::new(queue.as_str()).option(SubscribeOptions::new().declare(QueueType::Stream));
    let (running, mut rx) = service("declare=quorum", mount, &vars)
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    assert_eq!(queue_type(&queue).as_deref(), Some("stream"));
    roundtrip(&queue, 7, &mut rx).await;
    running.stop().await.expect("stop");
    delete(&queue);
}

#[tokio::test]
async fn bad_settings_are_start_up_errors_that_name_them() {
    for (query, says) in [
        (
            "prefetch=5",
            "setting prefetch=\"5\" (url): unknown key for the amqp broker",
        ),
        ("credit=0", "setting credit=\"0\" (url): must be at least 1"),
        (
            "declare=lazy",
            "setting declare=\"lazy\" (url): expected one of classic, quorum, stream",
        ),
    ] {
        let error = AmqpBroker::connect(&url_with(query))
            .await
            .expect_err("refused");
        assert!(error.to_string().contains(says), "?{query}: {error}");
    }
    let queue = support::unique("settings-bad");
    let vars = [var(&queue, "SETTLE", "sometimes")];
    let broker: Arc<dyn Broker> = Arc::new(support::broker().await);
    let error = App::with_broker(broker)
        .mount(queue.as_str(), |_: u32| async {})
        .mount_settings(vars.clone())
        .start()
        .await
        .err()
        .expect("refused");
    let expected = format!(
        "setting settle=\"sometimes\" ({}): expected one of at_least_once, at_most_once",
        vars[0].0
    );
    assert!(error.to_string().contains(&expected), "{error}");
    assert_eq!(queue_type(&queue), None, "nothing was made");
}
