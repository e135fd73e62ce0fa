//! A test binary running one of its own tests as a child process, so that a test can
//! kill a consumer for real (SIGKILL: no settlement, no goodbye to the broker).
//!
//! ```no_run
//! # async fn f() {
//! use std::time::Duration;
//! use ruststream_conformance::child::Child;
//!
//! // The child test reads the variable, takes a delivery, prints "holding", waits.
//! let child = Child::started("child_holding_a_delivery", ("MY_TOPIC", "orders"),
//!     "holding", Duration::from_secs(30)).await;
//! child.kill();
//! # }
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The variable through which a check hands its harness's [`share`](crate::Harness::share)
/// to the harness of its child process.
const PARENT: &str = "RUSTSTREAM_CONFORMANCE_PARENT";

/// In a child process of a check: what the parent's harness shared
/// ([`Harness::share`](crate::Harness::share)); `None` elsewhere.
pub fn parent() -> Option<String> {
    std::env::var(PARENT).ok()
}

/// The name of the test running now, as `--exact` takes it (`postgres::check`).
static THIS_TEST: Mutex<String> = Mutex::new(String::new());

/// Notes the test the macros are about to run: the check in module `module` (its
/// `module_path!()`, with the test binary's crate first) named `check`.
#[doc(hidden)]
pub fn this_test(module: &str, check: &str) {
    let path = module.split_once("::").map_or("", |(_, rest)| rest);
    let name = if path.is_empty() {
        check.to_owned()
    } else {
        format!("{path}::{check}")
    };
    *THIS_TEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = name;
}

/// The test [`this_test`] noted last.
pub(crate) fn current_test() -> String {
    THIS_TEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// A child process running one test of this test binary.
#[derive(Debug)]
pub struct Child(std::process::Child);

impl Child {
    /// Runs the test `name` of this test binary (`--exact`) in a child process with
    /// the variable `env` set, and waits up to `within` for it to print a line
    /// containing `marker`. Panics if the child cannot start or never prints it.
    pub async fn started(
        name: &str,
        env: (&str, &str),
        marker: &'static str,
        within: Duration,
    ) -> Self {
        Self::started_with(name, &[env], None, marker, within).await
    }

    /// [`started`](Self::started) with the variables `env`, and `share` (a harness's
    /// [`share`](crate::Harness::share)) for the child's harness.
    pub(crate) async fn started_with(
        name: &str,
        env: &[(&str, &str)],
        share: Option<&str>,
        marker: &'static str,
        within: Duration,
    ) -> Self {
        let mut command = Command::new(std::env::current_exe().expect("the test binary"));
        command.args(["--exact", name, "--nocapture"]);
        for (key, value) in env {
            command.env(key, value);
        }
        if let Some(share) = share {
            command.env(PARENT, share);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("the child started");
        let stdout = child.stdout.take().expect("the child's stdout");
        let seen = tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .any(|line| line.contains(marker))
        });
        let seen = tokio::time::timeout(within, seen).await;
        if !matches!(seen, Ok(Ok(true))) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child test {name} did not print {marker:?} within {within:?}");
        }
        Self(child)
    }

    /// Kills the child (SIGKILL) and reaps it.
    pub fn kill(mut self) {
        self.0.kill().expect("killed");
        let _ = self.0.wait();
    }

    /// Kills the child at a random moment 50–250 ms from now, so that repeated kills
    /// land anywhere in its work.
    pub async fn kill_soon(self) {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        tokio::time::sleep(Duration::from_millis(50 + u64::from(nanos % 200))).await;
        self.kill();
    }
}
