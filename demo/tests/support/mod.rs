//! Running the demo's binary against the real brokers `scripts/test` prepares, and
//! reading those brokers' state.
#![allow(dead_code, unreachable_pub)]

use std::process::{Command, Output};
use std::time::Duration;

/// The Redis under test: `RUSTSTREAM_REDIS_URL`, else 127.0.0.1:6379.
pub fn redis_url() -> String {
    std::env::var("RUSTSTREAM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// The RabbitMQ 4 under test: `RUSTSTREAM_AMQP_URL`, else 127.0.0.1:5673.
pub fn amqp_url() -> String {
    std::env::var("RUSTSTREAM_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5673".to_owned())
}

/// The PostgreSQL under test, in a schema of `schema`: `RUSTSTREAM_POSTGRES_URL`, else
/// 127.0.0.1:5432, database `test`.
pub fn postgres_url(schema: &str) -> String {
    let base = std::env::var("RUSTSTREAM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let join = if base.contains('?') { '&' } else { '?' };
    format!("{base}{join}schema={schema}")
}

/// A prefix for the demo's addresses unique to this run: `rs-cli-<pid>-<nanos>.`.
pub fn unique_prefix(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000_000)
        .unwrap_or(0);
    format!("rs-cli-{what}-{}-{nanos}.", std::process::id())
}

/// What one run of the demo printed, and whether it succeeded.
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Fails the test with the output unless the run succeeded.
    pub fn expect_ok(self, what: &str) -> Self {
        assert!(
            self.ok,
            "{what} failed\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs the demo's binary with `args` on `broker`, its addresses prefixed with
/// `prefix` and its dead-letter handler left out (so dead letters stay).
pub fn demo(broker: &str, prefix: &str, args: &[&str]) -> Ran {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(args)
        .env("RUSTSTREAM_BROKER_URL", broker)
        .env("DEMO_PREFIX", prefix)
        .env("DEMO_KEEP_DEAD_LETTERS", "1")
        .env_remove("RUST_LOG")
        .output()
        .expect("run the demo binary");
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The ids of a `dead-letters list` report (the first column of its rows).
pub fn listed_ids(report: &str) -> Vec<String> {
    let lines: Vec<&str> = report.lines().collect();
    assert!(
        lines.first().is_some_and(|l| l.starts_with("ID")),
        "not a list report: {report}"
    );
    lines[1..lines.len() - 1]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

/// Two runs of the demo: two dead letters (order 5, "doomed", spent at attempt 3).
pub fn two_dead_letters(broker: &str, prefix: &str) {
    for n in 0..2 {
        let ran = demo(broker, prefix, &[]).expect_ok(&format!("demo run {n}"));
        assert!(
            ran.stdout.contains("10 of 10 settlements seen"),
            "{}",
            ran.stdout
        );
    }
}

/// The message count of `queue` in what `rabbitmqctl -q list_queues name messages`
/// printed; `None` where the queue is not listed.
pub fn listed_messages(listed: &str, queue: &str) -> Option<u64> {
    listed.lines().find_map(|line| {
        let (name, count) = line.split_once('\t')?;
        (name == queue).then(|| count.trim().parse().ok())?
    })
}

/// `scripts/rabbitmq4.sh ARGS` with `stdin`, failing the test (saying how to start
/// RabbitMQ 4) if it fails.
pub fn rabbitmq4(args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/rabbitmq4.sh");
    let mut child = Command::new(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run scripts/rabbitmq4.sh");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "scripts/rabbitmq4.sh {args:?} failed (is RabbitMQ 4 running? `sudo scripts/rabbitmq4.sh`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Declares quorum queues `names` (expiring 10 minutes after their last use).
pub fn quorum_queues(names: &[&str]) {
    let queues: Vec<String> = names
        .iter()
        .map(|name| {
            format!(
                r#"{{"name": "{name}", "vhost": "/", "durable": true, "auto_delete": false,
                   "arguments": {{"x-queue-type": "quorum", "x-expires": 600000}}}}"#
            )
        })
        .collect();
    let json = format!(
        r#"{{"queues": [{}], "exchanges": [], "bindings": []}}"#,
        queues.join(",")
    );
    rabbitmq4(
        &["ctl", "-q", "import_definitions", "--format", "json"],
        &json,
    );
}

/// Waits (up to 15 s: a quorum queue's figures are emitted every few seconds) until
/// rabbitmqctl reports `expected` messages (ready + unacknowledged) in `queue`.
pub fn queue_settles_at(queue: &str, expected: u64) {
    let mut last = String::new();
    for _ in 0..60 {
        let listed = rabbitmq4(&["ctl", "-q", "list_queues", "name", "messages"], "");
        let count = listed_messages(&listed, queue);
        if count == Some(expected) {
            return;
        }
        last = format!("{count:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("queue {queue} holds {last} messages, not {expected}");
}
