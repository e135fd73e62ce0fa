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
use std::time::Duration;

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
        let mut child = Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", name, "--nocapture"])
            .env(env.0, env.1)
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
}
