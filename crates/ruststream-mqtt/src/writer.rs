//! Writes released PUBACKs, in the order released, to the current connection; each
//! waiter is told once the event loop has written its PUBACK.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use rumqttc::v5::AsyncClient;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Publish;
use ruststream_core::AckError;
use tokio::sync::{mpsc, oneshot, watch};

use crate::ledger::Release;

/// The current connection: its epoch and client, `None` between connections.
pub(crate) type Link = watch::Receiver<Option<(u64, AsyncClient)>>;

/// A PUBACK handed to the client: its packet id and who waits for it to be written.
type Waiting = (u16, oneshot::Sender<Result<(), AckError>>);

/// PUBACKs handed to the client, not yet written, in order.
#[derive(Default)]
pub(crate) struct Written(Mutex<VecDeque<Waiting>>);

impl Written {
    fn list(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The event loop wrote the PUBACK of `pkid`: the oldest waiting is it.
    pub(crate) fn written(&self, pkid: u16) {
        let first = self.list().pop_front();
        if let Some((expected, done)) = first {
            if expected != pkid {
                tracing::warn!(expected, pkid, "mqtt puback written out of turn");
            }
            let _ = done.send(Ok(()));
        }
    }

    /// Whether no PUBACK waits to be written.
    pub(crate) fn is_empty(&self) -> bool {
        self.list().is_empty()
    }

    /// The connection is gone: no waiting PUBACK will be written.
    pub(crate) fn lost(&self) {
        for (_, done) in std::mem::take(&mut *self.list()) {
            let _ = done.send(Err(AckError::Disconnected));
        }
    }
}

/// Hands each release to the client of its own connection, until the ledger is gone.
pub(crate) async fn write(
    mut releases: mpsc::UnboundedReceiver<Release>,
    link: Link,
    written: Arc<Written>,
) {
    while let Some(release) = releases.recv().await {
        let current = link.borrow().clone();
        let client = match current {
            Some((epoch, client)) if epoch == release.epoch => client,
            _ => {
                release.lost();
                continue;
            }
        };
        let mut ack = Publish::new("", QoS::AtLeastOnce, Bytes::new(), None);
        ack.pkid = release.pkid;
        written.list().push_back((release.pkid, release.done));
        if client.ack(&ack).await.is_err() {
            // The event loop is gone; the ack just pushed is the last.
            if let Some((_, done)) = written.list().pop_back() {
                let _ = done.send(Err(AckError::Disconnected));
            }
        }
    }
}
