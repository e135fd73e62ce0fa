//! Progress signals for handlers that run long: one task per subscription looks over
//! the deliveries held, every third of `ack_wait`, and tells the server that those held
//! longer than that are in progress (`+WPI`), so it does not deliver them again. The
//! delivery path only records each delivery in the acker's map.

use std::sync::Weak;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use crate::acker::{JsAcker, PROGRESS};
use crate::link::Link;

/// Starts the signals for the deliveries of `acker`, for a consumer whose `ack_wait`
/// is `ack_wait`. The task ends with the subscription's acker or the broker.
pub(crate) fn start(acker: Weak<JsAcker>, ack_wait: Duration, mut link: watch::Receiver<Link>) {
    let every = (ack_wait / 3).max(Duration::from_millis(50));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                changed = link.changed() => {
                    if changed.is_err() || *link.borrow() == Link::Closed {
                        return;
                    }
                    continue;
                }
            }
            let Some(acker) = acker.upgrade() else {
                return;
            };
            if acker.held() == 0 {
                continue;
            }
            for reply in acker.running_longer(every) {
                let client = acker.client().clone();
                if let Err(error) = client.publish(reply, Bytes::from_static(PROGRESS)).await {
                    tracing::warn!(%error, "nats: progress signal not sent");
                }
            }
        }
    });
}
