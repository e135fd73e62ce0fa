//! Browsing a queue and taking single messages out of it (the dead-letter tools), on
//! RabbitMQ 4.
//!
//! AMQP 1.0 has no browse for classic and quorum queues, so browsing **receives and
//! releases**: a link of its own asks RabbitMQ's management node how many messages the
//! queue holds and what it is (`GET /queues/{name}`), grants that much credit, holds
//! what comes unsettled, then settles each with `released`, in the order received.
//! `released` is not counted: a quorum queue's `delivery-count` (its delivery limit)
//! moves only for `modified` with `delivery-failed`. Where a released message goes
//! differs, as `tests/inspect.rs` checks on RabbitMQ 4:
//!
//! * a **classic** queue puts it back where it was, so a browse of the first `max`
//!   receives only those;
//! * a **quorum** queue puts it at the back, in the order released, so a browse receives
//!   and releases the whole queue (every message it held when the browse began) to
//!   leave the order as it was, even when fewer are asked for. Messages published
//!   meanwhile end up in front of those released.
//!
//! While a browse holds them, the messages are not given to the queue's other consumers.
//!
//! Removing does the same and settles the messages whose ids were asked with
//! `accepted`, the rest with `released`. A message has no id on the wire that the
//! broker keeps for it, so its id is a digest (FNV-1a, 64 bits, as 16 hex digits) of its
//! payload and headers: stable while it waits, shared by byte-identical messages.
//!
//! A dead letter RabbitMQ moved itself has RabbitMQ's annotations (`x-opt-deaths`,
//! `x-last-death-*`) instead of the runtime's headers: they are shown as the runtime's
//! (where from, why, when, how often; see [`crate::deaths`]), so `replay` sends it back
//! to the queue it came from.
//!
//! Only queues are browsed (`NAME`, `/queues/NAME`); a RabbitMQ stream (read from an
//! offset, never consumed) and exchanges are [`InspectError::Unsupported`], and so is a
//! broker without the management node (the message count is needed to know when to
//! stop). A queue that does not exist is [`InspectError::Unsupported`] too, named.

use std::time::Duration;

use fe2o3_amqp::link::Receiver;
use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp_types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp_types::messaging::Body;
use fe2o3_amqp_types::primitives::Value;
use ruststream_core::{Address, BoxFuture, InspectError, Message, Waiting, content_id};
use ruststream_rabbitmq::inspect::{Pass, Sweep, failed, unsupported};

use crate::AmqpBroker;
use crate::address::amqp_address;
use crate::management::{Management, queue_path};
use crate::message::decode;
use crate::queue::{get, integer};

/// How long to wait for the next message the queue said it holds.
const NEXT_WITHIN: Duration = Duration::from_secs(2);
/// The most credit granted at once.
const WINDOW: u32 = 256;

/// The queue name of `address`, or why it is not a queue.
fn queue_name(address: &Address) -> Result<String, InspectError> {
    let source = amqp_address(address.as_str());
    source
        .strip_prefix("/queues/")
        .filter(|n| !n.contains('/'))
        .and_then(|n| crate::url::decode(n).ok())
        .ok_or_else(|| unsupported(address, "only queues (NAME or /queues/NAME) can be browsed"))
}

impl AmqpBroker {
    /// How many messages queue `name` holds and whether released ones go to its back
    /// (a quorum queue), from the management node.
    async fn describe(&self, address: &Address, name: &str) -> Result<(u64, bool), InspectError> {
        let mut management = Management::open(&self.connector).await.map_err(failed)?;
        let answer = management.request("GET", &queue_path(name), None).await;
        management.close().await;
        let answer = answer.map_err(failed)?;
        let unsupported = |reason: String| unsupported(address, reason);
        match answer.status {
            200 => {}
            404 => return Err(unsupported(format!("queue {name} does not exist"))),
            status => {
                return Err(failed(format!(
                    "queue {name}: management answered {status}: {}",
                    answer.text()
                )));
            }
        }
        let kind = crate::queue::parse(&answer.body).map(|q| q.kind);
        if kind.as_deref() == Some("stream") {
            return Err(unsupported(format!(
                "{name} is a stream: it is read from an offset, not consumed"
            )));
        }
        let Value::Map(map) = &answer.body else {
            return Err(failed(format!("queue {name}: no description")));
        };
        let count = get(map, "message_count")
            .and_then(integer)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| failed(format!("queue {name}: no message_count in {map:?}")))?;
        Ok((count, kind.as_deref() == Some("quorum")))
    }

    /// Receives up to `max` messages of the queue (a quorum queue: all of them), hands
    /// each to `keep` (which says whether to accept it), releases the rest in order;
    /// stops early once `done` and every message granted credit has been received
    /// (a quorum queue: never).
    async fn receive_and_release(
        &self,
        address: &Address,
        max: u64,
        mut keep: impl FnMut(Waiting) -> bool + Send,
        done: impl Fn() -> bool + Send,
    ) -> Result<(), InspectError> {
        let name = queue_name(address)?;
        let (count, to_the_back) = self.describe(address, &name).await?;
        let count = if to_the_back { count } else { count.min(max) };
        let done = || !to_the_back && done();
        if count == 0 || done() {
            return Ok(());
        }
        let mut session = self.connector.session(false).await.map_err(failed)?;
        let link = self.connector.link_name("inspect");
        let mut receiver = Receiver::builder()
            .name(link)
            .source(amqp_address(address.as_str()))
            .sender_settle_mode(SenderSettleMode::Unsettled)
            .receiver_settle_mode(ReceiverSettleMode::First)
            .credit_mode(CreditMode::Manual)
            .auto_accept(false)
            .attach(&mut session)
            .await
            .map_err(|e| failed(format!("attach to {name} refused: {e}")))?;
        let mut held: Vec<DeliveryInfo> = Vec::new();
        let result = async {
            let mut received = 0u64;
            let mut granted = 0u64;
            // Stops early only with nothing granted left in flight: a message sent and
            // not received would go back at detach, after those released, out of order.
            while received < count && !(done() && received == granted) {
                if granted == received {
                    let window = u64::from(WINDOW).min(count - received);
                    let window = u32::try_from(window).unwrap_or(WINDOW);
                    receiver.set_credit(window).await.map_err(failed)?;
                    granted += u64::from(window);
                }
                let delivery =
                    match tokio::time::timeout(NEXT_WITHIN, receiver.recv::<Body<Value>>()).await {
                        Ok(Ok(delivery)) => delivery,
                        Ok(Err(e)) => return Err(failed(e)),
                        Err(_) => break, // fewer than counted: taken by another consumer
                    };
                received += 1;
                let info = DeliveryInfo::from(&delivery);
                let mut whole = delivery.into_message();
                let annotations = whole.message_annotations.take();
                let decoded = decode(whole);
                let message = Message {
                    payload: decoded.payload,
                    headers: decoded.headers,
                };
                // The id is the message's as stored; what is shown reads RabbitMQ's own
                // dead-lettering annotations as the runtime's headers.
                let id = content_id(&message);
                let waiting = Waiting {
                    id,
                    message: crate::deaths::described(message, annotations.as_ref()),
                    defect: decoded.defect,
                };
                if keep(waiting) {
                    receiver.accept(info).await.map_err(failed)?;
                } else {
                    held.push(info);
                }
            }
            Ok(())
        }
        .await;
        // One disposition each, newest first: a quorum queue puts each message it gets
        // back at its head, so the oldest ends up first again (a classic queue puts
        // each back where it was, whatever the order).
        let mut released = Ok(());
        for info in held {
            if let Err(e) = receiver.release(info).await {
                released = Err(failed(e));
                break;
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), receiver.close()).await;
        let _ = session.end().await;
        result.and(released)
    }
}

impl Sweep for AmqpBroker {
    fn sweep<'a>(&'a self, pass: Pass<'a>) -> BoxFuture<'a, Result<(), InspectError>> {
        Box::pin(self.receive_and_release(pass.address, pass.max, pass.keep, pass.done))
    }
}

ruststream_rabbitmq::inspect_by_sweep!(AmqpBroker);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_queues_are_browsed() {
        assert_eq!(queue_name(&"orders".into()).ok().as_deref(), Some("orders"));
        assert_eq!(
            queue_name(&"/queues/a%20b".into()).ok().as_deref(),
            Some("a b")
        );
        assert!(queue_name(&"/exchanges/x/k".into()).is_err());
    }
}
