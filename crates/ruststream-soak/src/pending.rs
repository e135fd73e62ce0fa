//! What is still on the server at the end of a run, asked with the brokers' own tools
//! (`redis-cli`, `rabbitmqctl` through `scripts/rabbitmq4.sh ctl`), and the clean-up of a
//! run's keys and queues.

use std::io;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::consume::dead_letter_of;
use crate::form::Form;

/// A broker tool's command, killed if it has not answered within a minute (a tool that
/// waits on a node that is gone must not hold up the scenario for ever: the drain's
/// deadline is checked between its calls).
pub(crate) fn bounded(program: &str) -> Command {
    let mut command = Command::new("timeout");
    command.args(["--kill-after=5", "60", program]);
    command
}

/// Runs `redis-cli -u URL ARGS…` and returns its output.
pub(crate) fn redis_cli(url: &str, args: &[&str]) -> io::Result<String> {
    let out = bounded("redis-cli")
        .args(["-u", url])
        .args(args)
        .stderr(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("redis-cli {args:?} failed")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn number(text: &str) -> u64 {
    text.trim().parse().unwrap_or(0)
}

/// `pending + lag` of the group `ruststream` of a stream (0 if there is none).
fn stream_backlog(url: &str, stream: &str) -> io::Result<u64> {
    let out = redis_cli(url, &["XINFO", "GROUPS", stream])?;
    if out.starts_with("ERR") {
        return Ok(0); // no such key: nothing was ever published or read
    }
    let lines: Vec<&str> = out.lines().collect();
    let mut total = 0;
    for pair in lines.windows(2) {
        if pair[0] == "pending" || pair[0] == "lag" {
            total += number(pair[1]);
        }
    }
    Ok(total)
}

fn scan(url: &str, pattern: &str) -> io::Result<Vec<String>> {
    let out = redis_cli(url, &["--scan", "--pattern", pattern])?;
    Ok(out.lines().map(str::to_owned).collect())
}

/// Messages still on Redis: not yet read, read and not acked, waiting in the delay
/// queue or in a processing list, on the address and on its dead letter.
pub(crate) fn redis(url: &str, form: Form, address: &str) -> io::Result<u64> {
    let mut total = stream_backlog(url, &dead_letter_of(address))?;
    match form {
        Form::RedisList => {
            total += number(&redis_cli(url, &["LLEN", address])?);
            for key in scan(url, &format!("{{{address}}}:processing:*"))? {
                total += number(&redis_cli(url, &["LLEN", &key])?);
            }
        }
        _ => {
            total += stream_backlog(url, address)?;
            total += number(&redis_cli(
                url,
                &["ZCARD", &format!("{{{address}}}:delayed")],
            )?);
        }
    }
    Ok(total)
}

/// Runs one SQL statement with `psql` on the database of `url` (its query, the adapter's
/// settings, left out) and returns its one value.
pub(crate) fn psql(url: &str, sql: &str) -> io::Result<String> {
    let database = url.split('?').next().unwrap_or(url);
    let out = bounded("psql")
        .args([database, "-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .stderr(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("psql {sql:?} failed")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The adapter's table of messages: in the URL's `schema`, else the adapter's default.
fn postgres_messages(url: &str) -> String {
    let (_, settings) = ruststream::core::split_query(url, |_| false);
    let schema = settings
        .iter()
        .find(|s| s.key == "schema")
        .map_or(ruststream::postgres::DEFAULT_SCHEMA, |s| s.value.as_str());
    format!("{schema}.ruststream_messages")
}

/// The rows of the run's queue and its dead letter, as a `WHERE` clause.
fn postgres_rows(url: &str, address: &str) -> String {
    format!(
        "{} WHERE queue IN ('{address}', '{}')",
        postgres_messages(url),
        dead_letter_of(address)
    )
}

/// Rows still in the run's queue and its dead letter: waiting, leased, or delayed.
pub(crate) fn postgres(url: &str, address: &str) -> io::Result<u64> {
    let out = psql(
        url,
        &format!("SELECT count(*) FROM {}", postgres_rows(url, address)),
    )?;
    Ok(number(&out))
}

/// Deletes the run's rows.
pub(crate) fn postgres_clean(url: &str, address: &str) -> io::Result<()> {
    psql(url, &format!("DELETE FROM {}", postgres_rows(url, address))).map(drop)
}

/// Deletes every key of a run.
pub(crate) fn redis_clean(url: &str, address: &str) -> io::Result<()> {
    let keys = scan(url, &format!("*{address}*"))?;
    for chunk in keys.chunks(100) {
        let mut args = vec!["DEL"];
        args.extend(chunk.iter().map(String::as_str));
        redis_cli(url, &args)?;
    }
    Ok(())
}

/// `scripts/rabbitmq4.sh ctl ARGS…` (from the repository's root).
pub(crate) fn rabbit_ctl(args: &[&str]) -> io::Result<String> {
    let out = bounded("scripts/rabbitmq4.sh")
        .arg("ctl")
        .args(args)
        .stderr(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "rabbitmq4.sh ctl {args:?} failed"
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// RabbitMQ 4's `dead_letter_worker_publisher_confirm_timeout`, as the running broker
/// reports it: how long its at-least-once dead-letter worker waits before it publishes
/// again a copy whose move a restart cut.
pub(crate) fn dead_letter_confirm_timeout() -> io::Result<Duration> {
    let out = rabbit_ctl(&[
        "eval",
        "application:get_env(rabbit, dead_letter_worker_publisher_confirm_timeout).",
    ])?;
    confirm_timeout(&out).ok_or_else(|| {
        io::Error::other(format!(
            "rabbitmqctl eval: unexpected dead_letter_worker_publisher_confirm_timeout {out:?}"
        ))
    })
}

/// The milliseconds of `{ok,180000}`.
fn confirm_timeout(out: &str) -> Option<Duration> {
    let ms = out.trim().strip_prefix("{ok,")?.strip_suffix('}')?;
    ms.trim().parse().ok().map(Duration::from_millis)
}

/// Messages (ready and unacknowledged) in the run's queue and its dead letter.
///
/// `rabbitmqctl list_queues` leaves out a queue that does not answer in time (a quorum
/// queue electing a leader, a busy node) and says so only on stderr: an empty answer
/// would read as "nothing left". So the run's queue must be listed with a count; it is
/// asked again for up to 10 s, and then it is an error, not a zero.
pub(crate) fn amqp(address: &str) -> io::Result<u64> {
    let dead = dead_letter_of(address);
    let mut last = String::new();
    for _ in 0..10 {
        let out = rabbit_ctl(&["-q", "list_queues", "name", "messages"])?;
        if let Some(n) = listed(&out, address, &dead) {
            return Ok(n);
        }
        last = out;
        std::thread::sleep(Duration::from_secs(1));
    }
    Err(io::Error::other(format!(
        "rabbitmqctl list_queues did not list {address} with a count for 10 s; last answer: \
         {last:?}"
    )))
}

/// The messages of `address` and `dead` in a `list_queues name messages` answer, if
/// `address` is there with a count (`dead` may not exist).
fn listed(out: &str, address: &str, dead: &str) -> Option<u64> {
    let mut main = None;
    let mut total = 0;
    for (name, n) in out.lines().filter_map(|line| line.split_once('\t')) {
        if name == address || name == dead {
            let n: u64 = n.trim().parse().ok()?;
            total += n;
            if name == address {
                main = Some(n);
            }
        }
    }
    main.map(|_| total)
}

/// Deletes the run's queues.
pub(crate) fn amqp_clean(address: &str) -> io::Result<()> {
    rabbit_ctl(&["-q", "delete_queue", address])?;
    rabbit_ctl(&["-q", "delete_queue", &dead_letter_of(address)])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_messages_table_is_in_the_urls_schema_else_the_adapters() {
        assert_eq!(
            super::postgres_messages("postgres://h/db"),
            "ruststream.ruststream_messages"
        );
        assert_eq!(
            super::postgres_messages("postgres://h/db?sslmode=prefer&schema=soak"),
            "soak.ruststream_messages"
        );
    }

    use super::*;

    #[test]
    fn a_queue_not_listed_or_without_a_count_is_not_zero() {
        use super::listed;
        let out = "q\t5\nq.dead\t2\nother\t9\n";
        assert_eq!(listed(out, "q", "q.dead"), Some(7));
        assert_eq!(listed("q\t0\n", "q", "q.dead"), Some(0));
        assert_eq!(listed("other\t9\n", "q", "q.dead"), None);
        assert_eq!(listed("", "q", "q.dead"), None);
        assert_eq!(listed("q\t\n", "q", "q.dead"), None);
    }

    #[test]
    fn numbers_default_to_zero() {
        assert_eq!(number(" 12\n"), 12);
        assert_eq!(number(""), 0);
    }

    #[test]
    fn confirm_timeouts_are_read_from_the_ok_tuple() {
        assert_eq!(
            confirm_timeout("{ok,180000}\n"),
            Some(Duration::from_secs(180))
        );
        assert_eq!(confirm_timeout("undefined\n"), None);
        assert_eq!(confirm_timeout("{ok,soon}"), None);
    }
}
