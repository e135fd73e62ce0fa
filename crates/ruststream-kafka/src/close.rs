//! A consumer's close off the runtime, waited for at most [`CLOSE`]: librdkafka's close
//! (a consumer's drop) serves the group's revoke and its commits with no bound of its
//! own, and a runtime's blocking thread that never returns holds the runtime's shutdown.

use std::time::Duration;

use tokio::sync::oneshot;

/// How long a subscription's end waits for a consumer to commit and leave its group
/// (Kafka's own consumer waits 30 s by default at a close).
pub(crate) const CLOSE: Duration = Duration::from_secs(30);

/// Runs `work` (a last commit, the consumer's drop) on a thread of its own (the
/// runtime's blocking pool if no thread can be made) and waits at most [`CLOSE`] for
/// it. Work that takes longer goes on in the background; `of` names it in the warning.
pub(crate) async fn close(of: &str, work: impl FnOnce() + Send + 'static) {
    let (done, finished) = oneshot::channel::<()>();
    let work: Box<dyn FnOnce() + Send> = Box::new(move || {
        work();
        let _ = done.send(());
    });
    // The work is handed over once the thread exists, so that a thread refused leaves
    // it here for the blocking pool (dropping it would close on this thread).
    let (hand, handed) = std::sync::mpsc::sync_channel::<Box<dyn FnOnce() + Send>>(1);
    let spawned = std::thread::Builder::new()
        .name("kafka-close".into())
        .spawn(move || {
            if let Ok(work) = handed.recv() {
                work();
            }
        });
    match spawned {
        Ok(_) => {
            // The thread waits for it: the channel has room for one.
            let _ = hand.send(work);
        }
        Err(error) => {
            tracing::warn!(of, %error, "kafka: no thread of its own to close a consumer on");
            tokio::task::spawn_blocking(work);
        }
    }
    if tokio::time::timeout(CLOSE, finished).await.is_err() {
        tracing::warn!(of, timeout = ?CLOSE, "kafka: a consumer did not close in time; it goes on closing in the background");
    }
}
