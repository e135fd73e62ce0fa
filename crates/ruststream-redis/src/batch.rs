//! Coalescing `XACK`s: settlements waiting at the same time go out as one command.
//!
//! Each settlement still resolves only after the server answered the `XACK` that carries
//! its id, so acks stay after the handler (at least once). One `XACK` is in flight at a
//! time. A settlement that finds none in flight and none waiting sends its own `XACK`
//! at once, from its own future (an ack-each loop pays one round trip, as a raw client
//! loop does); the ids settled while an `XACK` is in flight wait, and a task sends them
//! together as the next one as soon as it is answered.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::ClientLike;
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::AckError;
use tokio::sync::{Notify, oneshot};

use crate::failure;
use crate::reply::EntryId;

/// At most this many ids per `XACK`.
const MAX_IDS: usize = 1024;

type Request = (EntryId, oneshot::Sender<Result<(), AckError>>);

/// Acks entries of one group of one stream; the task ends when every clone is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Batcher {
    handle: Arc<Handle>,
}

/// Shared by the clones of a [`Batcher`]; the last one dropped stops the task.
#[derive(Debug)]
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.state().closed = true;
        self.0.ready.notify_one();
    }
}

#[derive(Debug)]
struct Shared {
    pool: Pool,
    key: Bytes,
    group: Bytes,
    state: Mutex<State>,
    /// Wakes the task: ids wait and no `XACK` is in flight.
    ready: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// An `XACK` is in flight.
    sending: bool,
    /// Ids waiting for the next `XACK`.
    waiting: Vec<Request>,
    /// Every [`Batcher`] is gone: the task stops.
    closed: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn xack(&self, ids: impl Iterator<Item = EntryId>) -> Result<(), AckError> {
        let mut args = Vec::with_capacity(2 + ids.size_hint().0);
        args.push(Value::Bytes(self.key.clone()));
        args.push(Value::Bytes(self.group.clone()));
        args.extend(ids.map(|id| Value::from(id.to_string())));
        let cmd = CustomCommand::new_static("XACK", ClusterHash::FirstKey, false);
        self.pool
            .custom::<Value, Value>(cmd, args)
            .await
            .map(drop)
            .map_err(|e| failure::ack(&e))
    }

    /// The `XACK` in flight is over: the waiting ids, if any, go next.
    fn sent(&self) {
        let mut state = self.state();
        state.sending = false;
        if !state.waiting.is_empty() {
            self.ready.notify_one();
        }
    }
}

/// Marks the end of a direct `XACK`, even one whose future was dropped half-way.
struct Sending<'a>(&'a Shared);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.sent();
    }
}

impl Batcher {
    /// Starts the task acking `group`'s entries of stream `key`.
    pub(crate) fn spawn(pool: Pool, key: Bytes, group: Bytes) -> Self {
        let shared = Arc::new(Shared {
            pool,
            key,
            group,
            state: Mutex::new(State::default()),
            ready: Notify::new(),
        });
        tokio::spawn(send_waiting(shared.clone()));
        Self {
            handle: Arc::new(Handle(shared)),
        }
    }

    /// Acks `id`, alone at once when nothing else is being acked, else with the next
    /// `XACK`; resolves when the server answered it.
    pub(crate) async fn ack(&self, id: EntryId) -> Result<(), AckError> {
        let shared = &*self.handle.0;
        let waiting = {
            let mut state = shared.state();
            if state.sending || !state.waiting.is_empty() {
                let (tx, rx) = oneshot::channel();
                state.waiting.push((id, tx));
                Some(rx)
            } else {
                state.sending = true;
                None
            }
        };
        match waiting {
            Some(rx) => rx.await.map_err(|_| AckError::Disconnected)?,
            None => {
                let _sending = Sending(shared);
                shared.xack(std::iter::once(id)).await
            }
        }
    }
}

/// The task: sends the waiting ids as one `XACK` whenever none is in flight.
async fn send_waiting(shared: Arc<Shared>) {
    loop {
        let batch: Vec<Request> = {
            let mut state = shared.state();
            if state.sending || state.waiting.is_empty() {
                if state.closed && state.waiting.is_empty() {
                    return;
                }
                None
            } else {
                state.sending = true;
                let take = state.waiting.len().min(MAX_IDS);
                Some(state.waiting.drain(..take).collect())
            }
        }
        .unwrap_or_default();
        if batch.is_empty() {
            shared.ready.notified().await;
            continue;
        }
        let result = {
            let _sending = Sending(&shared);
            shared.xack(batch.iter().map(|(id, _)| *id)).await
        };
        for (_, reply) in batch {
            let _ = reply.send(result.clone());
        }
    }
}
