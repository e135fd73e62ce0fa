//! Consume throughput: a raw fe2o3-amqp receive loop against this adapter's
//! subscription + settle loop, same credit, both at-least-once with `accepted` per message.
//!
//! ```text
//! cargo run --release -p ruststream-amqp --example bench -- [URL] [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: `amqp://guest:guest@127.0.0.1:5673`, 30000 messages of 512-byte JSON,
//! 3 rounds; queues `rs.quorum` and `rs.classic` (from `scripts/rabbitmq4-definitions.json`).

use std::time::Instant;

use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp::types::messaging::Body;
use fe2o3_amqp::types::primitives::Value;
use fe2o3_amqp::{Connection, Receiver, Session};
use futures_util::StreamExt;
use ruststream_amqp::{AmqpBroker, SubscribeOptions};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};

const CREDIT: u32 = 256;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn payload(i: usize) -> String {
    let head = format!("{{\"id\":{i},\"pad\":\"");
    let pad = 512 - head.len() - 2;
    format!("{head}{}\"}}", "x".repeat(pad))
}

async fn fill(broker: &AmqpBroker, queue: &str, n: usize) -> Result<(), Error> {
    let publisher = broker.amqp_publisher();
    let to: ruststream_core::Address = queue.into();
    for chunk in (0..n).collect::<Vec<_>>().chunks(512) {
        let sends = chunk.iter().map(|i| {
            publisher.send(
                &to,
                Message::new(payload(*i)).with_header("content-type", "application/json"),
            )
        });
        for r in futures_util::future::join_all(sends).await {
            r?;
        }
    }
    Ok(())
}

/// A raw fe2o3 loop: its own auto credit, `accept` after each `recv`.
async fn raw(url: &str, queue: &str, n: usize) -> Result<f64, Error> {
    let parsed = (url.split('@').nth(1).unwrap_or("127.0.0.1:5673")).to_owned();
    let tcp = tokio::net::TcpStream::connect(parsed.as_str()).await?;
    tcp.set_nodelay(true)?; // as the adapter does: fe2o3 alone does not
    let mut connection = Connection::builder()
        .container_id("bench-raw")
        .sasl_profile(fe2o3_amqp::sasl_profile::SaslProfile::Plain {
            username: "guest".into(),
            password: "guest".into(),
        })
        .open_with_stream(tcp)
        .await?;
    let mut session = Session::begin(&mut connection).await?;
    let mut receiver = Receiver::builder()
        .name("bench-raw")
        .source(format!("/queues/{queue}"))
        .sender_settle_mode(SenderSettleMode::Unsettled)
        .receiver_settle_mode(ReceiverSettleMode::First)
        .credit_mode(CreditMode::Auto(CREDIT))
        .attach(&mut session)
        .await?;
    let start = Instant::now();
    for _ in 0..n {
        let delivery = receiver.recv::<Body<Value>>().await?;
        receiver.accept(&delivery).await?;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    receiver.close().await?;
    session.end().await?;
    connection.close().await?;
    Ok(rate)
}

/// The adapter: a subscription with the same credit, settled with `Accept`.
async fn adapter(broker: &AmqpBroker, queue: &str, n: usize) -> Result<f64, Error> {
    let mut spec = SubscribeSpec::new(queue);
    spec.options
        .insert(SubscribeOptions::new().credit(CREDIT).counts(true));
    let mut sub = broker.subscribe(spec).await?;
    let start = Instant::now();
    for _ in 0..n {
        let delivery = sub.deliveries.next().await.ok_or("stream ended")??;
        delivery.settle(Settlement::Accept).await?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5673".into());
    let n: usize = args.next().map_or(Ok(30_000), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |s| s.parse())?;
    let broker = AmqpBroker::connect(&url).await?;
    println!("{n} messages of 512-byte JSON, credit {CREDIT}, {rounds} rounds");
    for queue in ["rs.quorum", "rs.classic"] {
        let (mut raws, mut ours) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            fill(&broker, queue, n).await?;
            raws.push(raw(&url, queue, n).await?);
            fill(&broker, queue, n).await?;
            ours.push(adapter(&broker, queue, n).await?);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (r, a) = (median(&mut raws), median(&mut ours));
        println!(
            "{queue:10}  raw fe2o3 {r:>8.0} msg/s   adapter {a:>8.0} msg/s   ratio {:.1} %   (raw {raws:.0?}, adapter {ours:.0?})",
            100.0 * a / r
        );
    }
    broker.close().await;
    Ok(())
}
