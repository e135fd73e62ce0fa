//! Stopping on signals: the first SIGINT or SIGTERM stops gracefully, a second says what
//! is still in flight, a third forces the stop.

use std::sync::atomic::Ordering;

use futures_core::Stream;
use futures_util::StreamExt;

use crate::{App, RunError};

/// SIGINT and SIGTERM as they come (Ctrl-C on other systems); a stream that never
/// yields where they cannot be listened to (logged).
pub(crate) fn signals() -> impl Stream<Item = ()> + Send + Unpin {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(interrupt), Ok(terminate)) => {
                futures_util::stream::unfold((interrupt, terminate), |(mut i, mut t)| async {
                    tokio::select! {
                        _ = i.recv() => {}
                        _ = t.recv() => {}
                    }
                    Some(((), (i, t)))
                })
                .boxed()
            }
            _ => {
                tracing::error!("cannot listen for SIGINT/SIGTERM; running until killed");
                futures_util::stream::pending().boxed()
            }
        }
    }
    #[cfg(not(unix))]
    {
        futures_util::stream::unfold((), |()| async {
            match tokio::signal::ctrl_c().await {
                Ok(()) => Some(((), ())),
                Err(_) => None,
            }
        })
        .chain(futures_util::stream::pending())
        .boxed()
    }
}

/// Runs `app` until the first of `signals` (or a `fail_fast`), then stops gracefully. A
/// second signal during the stop says how many deliveries are still in flight and that a
/// third forces the stop; the third ends it at once (what was in flight stays unsettled
/// for the broker to hand back): [`RunError::Forced`].
pub(crate) async fn run_on(
    app: App,
    mut signals: impl Stream<Item = ()> + Unpin,
) -> Result<(), RunError> {
    let running = app.start().await?;
    tokio::select! {
        _ = signals.next() => {}
        () = running.stopping() => {}
    }
    let runtime = running.runtime_handle();
    let stop = running.stop();
    tokio::pin!(stop);
    let mut asked = 1u32;
    loop {
        tokio::select! {
            result = &mut stop => return result,
            Some(()) = signals.next() => {
                asked += 1;
                let in_flight = runtime.in_flight.load(Ordering::Acquire);
                if asked == 2 {
                    tracing::warn!(
                        in_flight,
                        "stopping: {in_flight} deliveries still in flight; a third Ctrl-C forces the stop (they stay unsettled and the broker hands them back)"
                    );
                } else {
                    tracing::error!(in_flight, "forced stop: {in_flight} deliveries left unsettled");
                    return Err(RunError::Forced { in_flight });
                }
            }
        }
    }
}

#[cfg(all(test, feature = "memory"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::memory::MemoryBroker;
    use crate::{Publisher, ack};

    /// Three signals while a handler runs for an hour: the third ends the run at once,
    /// with the delivery unsettled (back in the memory queue).
    #[tokio::test(start_paused = true)]
    async fn a_third_signal_forces_the_stop() {
        let broker = MemoryBroker::new();
        let publisher = Publisher::new(ruststream_core::Broker::publisher(&broker));
        publisher.publish("q", &1).await.expect("published");
        let app = App::new(broker.clone())
            .shutdown_timeout(Duration::from_secs(3600))
            .mount("q", |_: u32| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                ack()
            });
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let signals =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|()| ((), rx)) },
            )
            .boxed();
        let send = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            for _ in 0..3 {
                tx.send(()).expect("signal");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        };
        let run = tokio::time::timeout(Duration::from_secs(10), run_on(app, signals));
        let (result, ()) = tokio::join!(run, send);
        let result = result.expect("ended by the third signal");
        assert!(
            matches!(result, Err(RunError::Forced { in_flight: 1 })),
            "{result:?}"
        );
        // The handler's task is gone; its delivery is back in the queue.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(broker.ready("q"), 1);
    }

    /// One signal: a graceful stop, which waits for the handler.
    #[tokio::test(start_paused = true)]
    async fn one_signal_stops_gracefully() {
        let broker = MemoryBroker::new();
        let publisher = Publisher::new(ruststream_core::Broker::publisher(&broker));
        publisher.publish("q", &1).await.expect("published");
        let app = App::new(broker.clone()).mount("q", |_: u32| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ack()
        });
        let signals = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
        })
        .chain(futures_util::stream::pending())
        .boxed();
        run_on(app, signals).await.expect("a clean stop");
        assert_eq!(broker.ready("q"), 0, "handled and acked");
    }
}
