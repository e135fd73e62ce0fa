//! PUBACKs in arrival order under `workers(8)`, on a real MQTT 5 broker (Mosquitto 2 on
//! 127.0.0.1:1883, `RUSTSTREAM_MQTT_URL`): handlers finish out of order, yet every
//! message is handled once, every settlement is written, and a restarted consumer of the
//! same session gets nothing again.

mod support;

use std::time::Duration;

use ruststream::{App, Mount, Settled, ack};
use ruststream_core::{Broker, Message};

const N: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_settle_out_of_order_and_nothing_is_lost_or_repeated() {
    let topic = support::unique("workers");
    let broker = support::connect().await;
    let (handled_tx, mut handled) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let (settled_tx, mut settled) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let handler = move |n: u64| {
        let handled = handled_tx.clone();
        async move {
            // Later messages often finish first: n % 7 ms.
            tokio::time::sleep(Duration::from_millis(n % 7)).await;
            let _ = handled.send(n);
            ack()
        }
    };
    let running = App::new(broker.clone())
        .mount(Mount::new(topic.as_str()).workers(8), handler)
        .after_settle(move |s: &Settled| {
            let _ = settled_tx.send(s.is_ok());
        })
        .start()
        .await
        .expect("the service starts");
    let publisher = support::connect().await;
    for n in 0..N {
        publisher
            .publisher()
            .publish(topic.as_str().into(), Message::new(n.to_string()))
            .await
            .expect("published");
    }
    let mut order = Vec::new();
    let mut ok = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while order.len() < N as usize || ok < N {
        tokio::select! {
            Some(n) = handled.recv() => order.push(n),
            Some(is_ok) = settled.recv() => {
                assert!(is_ok, "a settlement failed");
                ok += 1;
            }
            () = tokio::time::sleep_until(deadline) => {
                panic!("only {} handled, {ok} settled", order.len());
            }
        }
    }
    running.stop().await.expect("a graceful stop");
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_ne!(
        order, sorted,
        "handlers finished in arrival order: the test shows nothing"
    );
    sorted.dedup();
    assert_eq!(sorted, (0..N).collect::<Vec<_>>(), "each handled once");

    // The same session again: every PUBACK reached the broker, nothing comes back.
    let broker = support::connect().await;
    let (again_tx, mut again) = tokio::sync::mpsc::unbounded_channel::<String>();
    let running = App::new(broker.clone())
        .mount(Mount::new(topic.as_str()).workers(8), |_: u64| async {
            ack()
        })
        .after_settle(move |s: &Settled| {
            let _ = again_tx.send(format!("{:?}", s.verdict()));
        })
        .start()
        .await
        .expect("the service starts again");
    if let Ok(Some(verdict)) = tokio::time::timeout(Duration::from_secs(2), again.recv()).await {
        panic!("delivered again after every PUBACK (then {verdict})");
    }
    running.stop().await.expect("a graceful stop");
    publisher.close().await;
}
