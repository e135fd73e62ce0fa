//! What a service logs, captured, for adapters' tests that check log lines: one
//! subscriber for the whole test binary (set on first use) writing into a buffer the
//! tests read. Tests tell their lines apart by the unique names (keys, message ids) in
//! them.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

/// The captured log text of the test binary so far.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    /// The first line that has every one of `words`, if any.
    pub fn line_with(&self, words: &[&str]) -> Option<String> {
        self.text()
            .lines()
            .find(|l| words.iter().all(|w| l.contains(w)))
            .map(str::to_owned)
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

/// The binary's log capture (info and above), installed as the global subscriber.
pub fn logs() -> &'static Lines {
    static LINES: OnceLock<Lines> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Lines::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(lines.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        lines
    })
}

/// Receives from `rx` until an item for which `done` holds (returned last, with every
/// item before it), failing the test after `wait` or when the channel closes.
pub async fn until<T: std::fmt::Debug>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>,
    wait: std::time::Duration,
    done: impl Fn(&T) -> bool,
) -> Vec<T> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(item)) => {
                let last = done(&item);
                seen.push(item);
                if last {
                    return seen;
                }
            }
            Ok(None) => panic!("the sender went away; saw {seen:?}"),
            Err(_) => panic!("nothing awaited within {wait:?}; saw {seen:?}"),
        }
    }
}
