//! A request client's reply queue: a classic queue of its own that RabbitMQ deletes
//! once nobody has read it for a while.

use std::time::Duration;

use fe2o3_amqp_types::primitives::{OrderedMap, Value};
use ruststream_core::SubscribeError;

use crate::connection::Connector;
use crate::management::{Management, queue_path};

/// How long a reply queue outlives its last reader (`x-expires`): a client that died
/// leaves nothing behind for longer; one that reconnects within it finds its queue.
pub(crate) const REPLY_QUEUE_EXPIRES: Duration = Duration::from_secs(600);

/// Makes (or finds) the reply queue `name` through RabbitMQ's management node.
pub(crate) async fn declare(connector: &Connector, name: &str) -> Result<(), SubscribeError> {
    let refused = |why: String| SubscribeError::Refused(format!("reply queue {name}: {why}"));
    let mut management = Management::open(connector)
        .await
        .map_err(|e| refused(e.to_string()))?;
    let made = management
        .request("PUT", &queue_path(name), Some(body()))
        .await;
    management.close().await;
    let made =
        made.map_err(|e| SubscribeError::Disconnected(format!("reply queue {name}: {e}")))?;
    if matches!(made.status, 200 | 201 | 204) {
        Ok(())
    } else {
        Err(refused(format!(
            "declaring failed ({}): {}",
            made.status,
            made.text()
        )))
    }
}

fn body() -> Value {
    let mut args = OrderedMap::new();
    args.insert(
        Value::String("x-queue-type".into()),
        Value::String("classic".into()),
    );
    let expires = i64::try_from(REPLY_QUEUE_EXPIRES.as_millis()).unwrap_or(i64::MAX);
    args.insert(Value::String("x-expires".into()), Value::Long(expires));
    let mut body = OrderedMap::new();
    body.insert(Value::String("durable".into()), Value::Bool(true));
    body.insert(Value::String("exclusive".into()), Value::Bool(false));
    body.insert(Value::String("auto_delete".into()), Value::Bool(false));
    body.insert(Value::String("arguments".into()), Value::Map(args));
    Value::Map(body)
}
