//! What the framework logs: a start-up summary of each mount, a line per delivery at
//! debug, failures and dead letters at warn with the subscription, the message id and
//! the attempt, and the stop's progress at info.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream::{App, Mount, Policy, retry};
use ruststream_core::Capabilities;
use tracing_subscriber::fmt::MakeWriter;

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    fn line_with(&self, what: &str) -> String {
        let text = self.text();
        text.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no line with {what:?} in:\n{text}"))
            .to_owned()
    }
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Lines {
    type Writer = Lines;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn subscriber(lines: &Lines, level: tracing::Level) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(lines.clone())
        .finish()
}

#[tokio::test(start_paused = true)]
async fn a_service_says_what_it_does() {
    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(subscriber(&lines, tracing::Level::DEBUG));
    let broker = MemoryBroker::with_capabilities(Capabilities::SETTLES);
    let app = App::new(broker.clone())
        .mount(
            Mount::new("orders")
                .max_attempts(2)
                .dead_letter("orders.dead")
                .on_decode_error(Policy::Drop),
            |_: u32| async { retry() },
        )
        .start()
        .await
        .expect("starts");
    let publisher = app.publisher();
    publisher
        .message("orders", &7)
        .message_id("m-7")
        .send()
        .await
        .expect("published");
    publisher
        .message("orders", "not a number")
        .message_id("m-bad")
        .send()
        .await
        .expect("published");
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.stop().await.expect("clean stop");

    let mounted = lines.line_with("mounted");
    for field in [
        "INFO",
        "address=orders",
        "broker=\"memory\"",
        "max_attempts=2",
        "dead_letter=\"orders.dead\"",
        "counts=false",
    ] {
        assert!(mounted.contains(field), "{field} in {mounted}");
    }
    let handled = lines.line_with("handled");
    assert!(
        handled.contains("DEBUG") && handled.contains("message_id=\"m-7\""),
        "{handled}"
    );
    let dead = lines.line_with("dead-lettered");
    for field in [
        "WARN",
        "address=orders",
        "message_id=\"m-7\"",
        "attempt=2",
        "verdict=Retry",
        "dead_letter=\"orders.dead\"",
    ] {
        assert!(dead.contains(field), "{field} in {dead}");
    }
    let retrying = lines.line_with("retrying");
    for field in [
        "INFO",
        "address=orders",
        "message_id=\"m-7\"",
        "attempt=1",
        "verdict=Retry",
        "to=\"orders\"",
    ] {
        assert!(retrying.contains(field), "{field} in {retrying}");
    }
    let decode = lines.line_with("payload did not decode");
    for field in ["WARN", "message_id=\"m-bad\"", "attempt=1", "verdict=Drop"] {
        assert!(decode.contains(field), "{field} in {decode}");
    }
    for step in [
        "stopping: taking no more deliveries",
        "stopping: closing the broker",
        "stopped",
    ] {
        assert!(lines.line_with(step).contains("INFO"));
    }
}

/// At info, a delivery that goes well writes nothing.
#[tokio::test(start_paused = true)]
async fn deliveries_are_quiet_at_info() {
    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(subscriber(&lines, tracing::Level::INFO));
    let app = App::new(MemoryBroker::new())
        .mount("q", |_: u32| async {})
        .start()
        .await
        .expect("starts");
    for n in 0..10 {
        app.publisher().publish("q", &n).await.expect("published");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.stop().await.expect("clean stop");
    let text = lines.text();
    assert!(!text.contains("handled"), "{text}");
    assert!(!text.contains("WARN"), "{text}");
}

/// A mount whose `retry_after` copies would wait in the process is told so at start, at
/// warn, once; a form that delays itself is not.
#[tokio::test(start_paused = true)]
async fn a_mount_whose_delayed_copies_live_in_the_process_is_warned_at_start() {
    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(subscriber(&lines, tracing::Level::INFO));
    let copying = MemoryBroker::with_capabilities(Capabilities::SETTLES);
    let app = App::new(copying)
        .mount("orders", |_: u32| async { retry() })
        .start()
        .await
        .expect("starts");
    app.stop().await.expect("clean stop");
    let warned = lines.line_with("wait in this process");
    for field in ["WARN", "address=orders", "broker=\"memory\"", "durable="] {
        assert!(warned.contains(field), "{field} in {warned}");
    }
    assert_eq!(lines.text().matches("wait in this process").count(), 1);

    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(subscriber(&lines, tracing::Level::INFO));
    let app = App::new(MemoryBroker::new())
        .mount("orders", |_: u32| async { retry() })
        .start()
        .await
        .expect("starts");
    app.stop().await.expect("clean stop");
    assert!(
        !lines.text().contains("wait in this process"),
        "{}",
        lines.text()
    );
}

/// A Redis stream with its default options (delayed copies in process) is warned at
/// start with the durable option named; with `delayed_retry=durable_zset` it is not.
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_redis_stream_by_default_is_warned_with_durable_zset_named() {
    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(subscriber(&lines, tracing::Level::INFO));
    let url = support::redis_url();
    let orders = support::unique("logs", "orders");
    let app = App::with_broker(support::redis(&url).await)
        .mount(orders.as_str(), |_: u32| async { retry() })
        .start()
        .await
        .expect("starts");
    app.stop().await.expect("clean stop");
    let warned = lines.line_with("wait in this process");
    assert!(warned.contains("durable_zset"), "{warned}");

    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(subscriber(&lines, tracing::Level::INFO));
    let app = App::with_broker(support::redis(&url).await)
        .mount_settings([(
            format!(
                "RUSTSTREAM_MOUNT__{}__DELAYED_RETRY",
                ruststream::mount::mount_env_name(&orders)
            ),
            "durable_zset",
        )])
        .mount(orders.as_str(), |_: u32| async { retry() })
        .start()
        .await
        .expect("starts");
    app.stop().await.expect("clean stop");
    assert!(
        !lines.text().contains("wait in this process"),
        "{}",
        lines.text()
    );
}

/// Logs written anywhere but a terminal carry no colour codes (a file, a collector).
#[cfg(feature = "logs")]
#[test]
fn logs_to_a_writer_have_no_colour_codes() {
    let lines = Lines::default();
    ruststream::observe::init_logs_with(
        ruststream::observe::LogFormat::Human,
        "warn",
        lines.clone(),
    )
    .expect("the first global subscriber of this binary");
    // The other tests of this binary set subscribers of their own per thread; this one
    // writes through the global one.
    std::thread::spawn(|| tracing::warn!(address = "orders", "a warning"))
        .join()
        .expect("logged");
    let text = lines.text();
    assert!(text.contains("a warning"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in {text:?}");
}
