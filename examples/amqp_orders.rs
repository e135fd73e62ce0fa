//! The operating guide's service (docs/operating.md): on RabbitMQ 4 over AMQP 1.0, it
//! declares the quorum queues it needs; `asyncapi` as its argument prints its AsyncAPI
//! document instead of running. `RUSTSTREAM_BROKER_URL` names the broker.

use ruststream::asyncapi::{AsyncApiInfo, Format};
use ruststream::{App, Mount, Outcome, ack, retry};
use ruststream_amqp::{AmqpBroker, QueueType, SubscribeOptions};
use schemars::JsonSchema;
use serde::Deserialize;

/// An order to place.
#[derive(Deserialize, JsonSchema)]
struct Order {
    id: u64,
    qty: u32,
}

async fn place(order: Order) -> Outcome {
    if order.qty == 0 {
        return retry(); // counted by the queue; the fifth attempt's retry dead-letters it
    }
    ack()
}

async fn spent(order: Order) {
    eprintln!("order {} gave up", order.id);
}

fn service(app: App) -> App {
    // Made at subscribe where missing; an existing queue must agree with the mount.
    let quorum = SubscribeOptions::new().declare(QueueType::Quorum);
    app.name("shop-orders")
        .mount(
            Mount::new("shop.orders.dead")
                .payload::<Order>()
                .option(quorum),
            spent,
        )
        .mount(
            Mount::new("shop.orders")
                .payload::<Order>()
                .max_attempts(5)
                .dead_letter("shop.orders.dead")
                .option(quorum),
            place,
        )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("RUSTSTREAM_BROKER_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5673".into());
    let app = service(App::new(AmqpBroker::connect(&url).await?));
    if std::env::args().nth(1).as_deref() == Some("asyncapi") {
        let info = AsyncApiInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            server: Some(ruststream::broker::server(&url)?),
            ..AsyncApiInfo::default()
        };
        print!("{}", app.asyncapi_string(&info, Format::Yaml)?);
        return Ok(());
    }
    app.run().await?;
    Ok(())
}
