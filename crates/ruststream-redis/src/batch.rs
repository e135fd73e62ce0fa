//! Coalescing `XACK`s: settlements waiting at the same time go out as one command.
//!
//! Each settlement still resolves only after the server answered the `XACK` that carries
//! its id, so acks stay after the handler (at least once). One `XACK` is in flight at a
//! time; the ids settled while it is in flight share the next one. Before sending, the
//! task yields once to the scheduler, so that handlers already runnable (the rest of
//! the same read, finishing on this worker thread) add their ids to the same `XACK`
//! instead of a lone id going out first.

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::ClientLike;
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::AckError;
use tokio::sync::{mpsc, oneshot};

use crate::failure;
use crate::reply::EntryId;

/// At most this many ids per `XACK`.
const MAX_IDS: usize = 1024;

type Request = (EntryId, oneshot::Sender<Result<(), AckError>>);

/// The sending side; the task ends when every clone is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Batcher {
    requests: mpsc::UnboundedSender<Request>,
}

impl Batcher {
    /// Starts the task acking `group`'s entries of stream `key`.
    pub(crate) fn spawn(pool: Pool, key: Bytes, group: Bytes) -> Self {
        let (requests, mut rx) = mpsc::unbounded_channel::<Request>();
        tokio::spawn(async move {
            let mut batch: Vec<Request> = Vec::new();
            while let Some(first) = rx.recv().await {
                batch.push(first);
                // Let the tasks that are ready to run (handlers finishing the same read)
                // settle first, so that their ids share this `XACK`.
                tokio::task::yield_now().await;
                while batch.len() < MAX_IDS {
                    match rx.try_recv() {
                        Ok(request) => batch.push(request),
                        Err(_) => break,
                    }
                }
                let mut args = Vec::with_capacity(2 + batch.len());
                args.push(Value::Bytes(key.clone()));
                args.push(Value::Bytes(group.clone()));
                args.extend(batch.iter().map(|(id, _)| Value::from(id.to_string())));
                let cmd = CustomCommand::new_static("XACK", ClusterHash::FirstKey, false);
                let result = pool.custom::<Value, Value>(cmd, args).await;
                for (_, reply) in batch.drain(..) {
                    let _ = reply.send(result.as_ref().map(drop).map_err(failure::ack));
                }
            }
        });
        Self { requests }
    }

    /// Acks `id` with the next `XACK`; resolves when the server answered it.
    pub(crate) async fn ack(&self, id: EntryId) -> Result<(), AckError> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send((id, tx))
            .map_err(|_| AckError::Disconnected)?;
        rx.await.map_err(|_| AckError::Disconnected)?
    }
}
