//! What an operator makes before a service starts: a queue declared with nothing but its
//! type, as `rabbitmqadmin declare queue name=Q queue_type=quorum` would.

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ConnectionProperties};

use crate::BoxError;

/// Declares the durable queue `queue` of type `kind` on the RabbitMQ at `url`.
pub(crate) async fn declare(url: &str, queue: &str, kind: &str) -> Result<(), BoxError> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from(kind.as_bytes().to_vec())),
    );
    channel
        .queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
        .await?;
    let _ = connection.close(200, "declared".into()).await;
    Ok(())
}
