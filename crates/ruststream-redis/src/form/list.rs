//! The plain list form: `RPOP`/`BRPOP`, at most once.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::interfaces::ClientLike;
use fred::interfaces::ListInterface;
use fred::types::config::Options as CommandOptions;
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::{Acker, Address, ConsumeError, Delivery, Tag};

use super::{Reader, consume_error};
use crate::frame;

/// Pops a list from the right (producers push on the left).
pub(crate) struct ListReader {
    pub(crate) client: crate::client::Reader,
    pub(crate) address: Address,
    pub(crate) key: String,
    pub(crate) block: Duration,
    pub(crate) count: usize,
    pub(crate) acker: Arc<dyn Acker>,
}

impl ListReader {
    async fn read_once(&self) -> Result<Vec<Delivery>, fred::error::Error> {
        let count = std::num::NonZeroUsize::new(self.count);
        let popped: Value = self
            .client
            .rpop(self.key.as_str(), count.map(|c| c.get()))
            .await?;
        let mut elements = elements(popped);
        if elements.is_empty() {
            let options = CommandOptions {
                timeout: Some(self.block + Duration::from_secs(5)),
                ..CommandOptions::default()
            };
            // A custom command: the client's `brpop` turns the nil reply of a block that
            // timed out into an error.
            let brpop = CustomCommand::new_static("BRPOP", ClusterHash::FirstKey, true);
            let args = vec![
                Value::from(self.key.as_str()),
                Value::from(format!("{:.3}", self.block.as_secs_f64().max(0.01))),
            ];
            let popped: Value = self
                .client
                .with_options(&options)
                .custom(brpop, args)
                .await?;
            // BRPOP answers [key, element].
            elements = elements_of_pair(popped);
        }
        let mut seq = 0;
        Ok(elements
            .into_iter()
            .map(|element| {
                seq += 1;
                from_frame(element, &self.address, Tag::Seq(seq), self.acker.clone())
            })
            .collect())
    }
}

impl Reader for ListReader {
    async fn read(&mut self) -> Result<Vec<Delivery>, ConsumeError> {
        self.read_once()
            .await
            .map_err(|e| consume_error("reading the list", &e))
    }
}

/// The elements of an array reply (or of a single bulk string).
pub(crate) fn elements(value: Value) -> Vec<Bytes> {
    match value {
        Value::Null => Vec::new(),
        Value::Array(items) => items.into_iter().filter_map(Value::into_bytes).collect(),
        other => other.into_bytes().into_iter().collect(),
    }
}

fn elements_of_pair(value: Value) -> Vec<Bytes> {
    match value {
        Value::Array(mut pair) if pair.len() == 2 => {
            pair.pop().and_then(Value::into_bytes).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// A delivery read from a frame; a frame that cannot be read is delivered whole as the
/// payload, with its defect.
pub(crate) fn from_frame(
    element: Bytes,
    address: &Address,
    tag: Tag,
    acker: Arc<dyn Acker>,
) -> Delivery {
    match frame::decode(&element) {
        Ok(message) => Delivery::new(
            message.payload,
            message.headers,
            address.clone(),
            tag,
            acker,
        ),
        Err(error) => Delivery::new(element, Default::default(), address.clone(), tag, acker)
            .with_defect(error.to_string()),
    }
}
