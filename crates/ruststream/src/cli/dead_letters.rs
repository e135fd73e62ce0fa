//! The `dead-letters` commands: list, show, replay and purge, on any broker that offers
//! [`Inspect`].

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use ruststream_core::{
    Address, Broker, DEAD_LETTER_ATTEMPT, DEAD_LETTER_ERROR, DEAD_LETTER_FROM, DEAD_LETTER_REASON,
    Inspect, Waiting,
};

use super::CliError;
use super::args::{DeadLetters, Select};
use super::filter::{age, show_age};
use ruststream_core::{replay_destination as destination, replayed};

/// How many copies a replay publishes before it removes their dead letters.
const REPLAY_CHUNK: usize = 100;
/// The default `--limit` of `list` and `show`.
const SHOWN: usize = 100;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs one `dead-letters` command, writing its report to `out`.
pub(crate) async fn run(
    broker: &dyn Broker,
    command: DeadLetters,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let inspect = broker.inspect().ok_or(CliError::NoInspect {
        broker: broker.name(),
    })?;
    match command {
        DeadLetters::List(select) => {
            let (chosen, scanned) = choose(inspect, &select, Some(SHOWN)).await?;
            list(&chosen, scanned, &select.address, out)
        }
        DeadLetters::Show(select) => {
            let (chosen, _) = choose(inspect, &select, Some(SHOWN)).await?;
            show(&chosen, out)
        }
        DeadLetters::Replay {
            select,
            to,
            dry_run,
        } => {
            let (chosen, _) = choose(inspect, &select, None).await?;
            replay(
                broker,
                inspect,
                &select.address,
                &chosen,
                to.as_deref(),
                dry_run,
                out,
            )
            .await
        }
        DeadLetters::Purge {
            select,
            all,
            dry_run,
        } => {
            if select.filter().is_empty() && !all {
                return Err(CliError::PurgeAll {
                    address: select.address,
                });
            }
            let (chosen, _) = choose(inspect, &select, None).await?;
            purge(inspect, &select.address, &chosen, dry_run, out).await
        }
    }
}

/// The dead letters `select` chooses, oldest first, and how many were read.
async fn choose(
    inspect: &dyn Inspect,
    select: &Select,
    default_limit: Option<usize>,
) -> Result<(Vec<Waiting>, usize), CliError> {
    let address = Address::from(select.address.as_str());
    let all = inspect.browse(&address, select.scan).await?;
    let scanned = all.len();
    let filter = select.filter();
    let now = now_ms();
    let limit = select.limit.or(default_limit).unwrap_or(usize::MAX);
    let chosen = all
        .into_iter()
        .filter(|w| filter.matches(w, now))
        .take(limit)
        .collect();
    Ok((chosen, scanned))
}

fn list(
    chosen: &[Waiting],
    scanned: usize,
    address: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let now = now_ms();
    let width = chosen.iter().map(|w| w.id.len()).max().unwrap_or(2).max(2);
    writeln!(
        out,
        "{:width$}  {:>5}  {:8}  {:>7}  {:24}  ERROR",
        "ID", "AGE", "REASON", "ATTEMPT", "FROM"
    )?;
    for w in chosen {
        let h = &w.message.headers;
        let age = age(w, now).map_or_else(|| "-".to_owned(), show_age);
        let error = match &w.defect {
            Some(defect) => format!("(unreadable: {defect})"),
            None => one_line(h.get_str(DEAD_LETTER_ERROR).unwrap_or("")),
        };
        writeln!(
            out,
            "{:width$}  {:>5}  {:8}  {:>7}  {:24}  {}",
            w.id,
            age,
            h.get_str(DEAD_LETTER_REASON).unwrap_or("-"),
            h.get_str(DEAD_LETTER_ATTEMPT).unwrap_or("-"),
            h.get_str(DEAD_LETTER_FROM).unwrap_or("-"),
            error
        )?;
    }
    writeln!(
        out,
        "{} dead letter(s) listed at {address} ({scanned} read)",
        chosen.len()
    )?;
    Ok(())
}

/// At most 60 characters, on one line.
fn one_line(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(60) {
        Some((end, _)) => format!("{}…", &flat[..end]),
        None => flat,
    }
}

/// Text as it is when it is UTF-8, else escaped.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => bytes.escape_ascii().to_string(),
    }
}

fn show(chosen: &[Waiting], out: &mut dyn Write) -> Result<(), CliError> {
    for (n, w) in chosen.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        writeln!(out, "id: {}", w.id)?;
        if let Some(defect) = &w.defect {
            writeln!(out, "unreadable: {defect} (shown as stored)")?;
        }
        writeln!(out, "headers:")?;
        for (name, value) in w.message.headers.iter() {
            writeln!(out, "  {name}: {}", text(value.as_bytes()))?;
        }
        writeln!(out, "payload ({} bytes):", w.message.payload.len())?;
        writeln!(out, "{}", text(&w.message.payload))?;
    }
    if chosen.is_empty() {
        writeln!(out, "no dead letter matches")?;
    }
    Ok(())
}

async fn replay(
    broker: &dyn Broker,
    inspect: &dyn Inspect,
    address: &str,
    chosen: &[Waiting],
    to: Option<&str>,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let address = Address::from(address);
    let publisher = broker.publisher();
    let mut failed = 0usize;
    let mut replayed_n = 0usize;
    for chunk in chosen.chunks(REPLAY_CHUNK) {
        // Copies first; the dead letters of the copies published are removed after.
        let mut published: Vec<(String, &str)> = Vec::new();
        for w in chunk {
            let Some(dest) = destination(&w.message, to) else {
                writeln!(
                    out,
                    "{}: not replayed: it has no {DEAD_LETTER_FROM} header; pass --to ADDRESS",
                    w.id
                )?;
                failed += 1;
                continue;
            };
            if dry_run {
                writeln!(out, "would replay {} to {dest}", w.id)?;
                continue;
            }
            let copy = replayed(&w.message, now_ms());
            let dest_address = Address::from(dest);
            // In one step where the broker can: never both the dead letter and its copy.
            let moving = inspect.replace(&address, &w.id, &dest_address, &copy);
            let error = match moving {
                Some(moving) => match moving.await {
                    Ok(true) => {
                        writeln!(out, "replayed {} to {dest}", w.id)?;
                        replayed_n += 1;
                        continue;
                    }
                    Ok(false) => {
                        writeln!(out, "{}: gone already (taken meanwhile)", w.id)?;
                        continue;
                    }
                    Err(error) => error.to_string(),
                },
                None => match publisher.publish(dest_address.clone(), copy.clone()).await {
                    Ok(()) => {
                        published.push((w.id.clone(), dest));
                        continue;
                    }
                    Err(error) => error.to_string(),
                },
            };
            writeln!(
                out,
                "{}: not replayed (the dead letter stays): {error}",
                w.id
            )?;
            failed += 1;
        }
        if published.is_empty() {
            continue;
        }
        let ids: Vec<String> = published.iter().map(|(id, _)| id.clone()).collect();
        match inspect.remove(&address, &ids).await {
            Ok(removed) => {
                for (id, dest) in &published {
                    writeln!(out, "replayed {id} to {dest}")?;
                }
                replayed_n += published.len();
                if removed < published.len() {
                    writeln!(
                        out,
                        "{} of these dead letters were gone already (taken meanwhile)",
                        published.len() - removed
                    )?;
                }
            }
            Err(error) => {
                for (id, dest) in &published {
                    writeln!(
                        out,
                        "{id}: replayed to {dest}, but the dead letter stays (a second replay duplicates it): {error}"
                    )?;
                }
                failed += published.len();
            }
        }
    }
    if dry_run {
        writeln!(
            out,
            "dry run: {} dead letter(s) would be replayed",
            chosen.len() - failed
        )?;
    } else {
        writeln!(out, "{replayed_n} dead letter(s) replayed")?;
    }
    match failed {
        0 => Ok(()),
        failed => Err(CliError::Failed { failed }),
    }
}

async fn purge(
    inspect: &dyn Inspect,
    address: &str,
    chosen: &[Waiting],
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if dry_run {
        for w in chosen {
            writeln!(out, "would purge {}", w.id)?;
        }
        writeln!(
            out,
            "dry run: {} dead letter(s) would be purged",
            chosen.len()
        )?;
        return Ok(());
    }
    let ids: Vec<String> = chosen.iter().map(|w| w.id.clone()).collect();
    let removed = inspect.remove(&Address::from(address), &ids).await?;
    writeln!(out, "{removed} dead letter(s) purged from {address}")?;
    Ok(())
}

#[cfg(all(test, feature = "memory"))]
mod tests {
    use clap::Parser;
    use ruststream_core::{DEAD_LETTER_AT, Message, REPLAYED_AT, RETRY_COUNT};

    use super::super::args::{Command, Line};
    use super::*;
    use crate::memory::MemoryBroker;

    async fn cli(broker: &MemoryBroker, args: &[&str]) -> (Result<(), CliError>, String) {
        let line = Line::try_parse_from(
            std::iter::once("svc")
                .chain(std::iter::once("dead-letters"))
                .chain(args.iter().copied()),
        )
        .expect("parses");
        let Some(Command::DeadLetters(command)) = line.command else {
            panic!("not dead-letters");
        };
        let mut out = Vec::new();
        let result = run(broker, command, &mut out).await;
        (result, String::from_utf8(out).expect("utf-8"))
    }

    fn dead(n: u32, reason: &str) -> Message {
        Message::new(format!("order {n}"))
            .with_header("tenant", "acme")
            .with_header(RETRY_COUNT, "2")
            .with_header(DEAD_LETTER_FROM, "orders")
            .with_header(DEAD_LETTER_REASON, reason.to_owned())
            .with_header(DEAD_LETTER_ATTEMPT, "3")
            .with_header(DEAD_LETTER_AT, now_ms().to_string())
    }

    async fn broker() -> MemoryBroker {
        let broker = MemoryBroker::new();
        let publisher = broker.publisher();
        for (n, reason) in [(1, "retry"), (2, "decode"), (3, "retry")] {
            publisher
                .publish("dead".into(), dead(n, reason))
                .await
                .expect("publish");
        }
        broker
    }

    #[tokio::test]
    async fn list_and_show_read_without_removing() {
        let broker = broker().await;
        let (result, out) = cli(&broker, &["list", "dead"]).await;
        result.expect("lists");
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert!(lines[0].starts_with("ID"), "{out}");
        assert!(
            lines[2].contains("decode") && lines[2].contains("orders"),
            "{out}"
        );
        assert!(
            lines[4].starts_with("3 dead letter(s) listed at dead (3 read)"),
            "{out}"
        );
        let (result, out) = cli(&broker, &["show", "dead", "--reason", "decode"]).await;
        result.expect("shows");
        assert!(out.contains("payload (7 bytes):\norder 2\n"), "{out}");
        assert!(out.contains("  tenant: acme\n"), "{out}");
        assert_eq!(broker.ready("dead"), 3);
    }

    #[tokio::test]
    async fn replay_publishes_fresh_copies_then_removes() {
        let broker = broker().await;
        let (result, out) = cli(
            &broker,
            &["replay", "dead", "--reason", "retry", "--dry-run"],
        )
        .await;
        result.expect("dry run");
        assert!(out.contains("would replay 1 to orders"), "{out}");
        assert!(out.contains("would replay 3 to orders"), "{out}");
        assert_eq!((broker.ready("dead"), broker.ready("orders")), (3, 0));

        let (result, out) = cli(
            &broker,
            &["replay", "dead", "--reason", "retry", "--limit", "1"],
        )
        .await;
        result.expect("replays");
        assert!(out.contains("replayed 1 to orders"), "{out}");
        assert_eq!((broker.ready("dead"), broker.ready("orders")), (2, 1));
        let copy = &broker.messages("orders")[0];
        assert_eq!(&copy.payload[..], b"order 1");
        assert_eq!(copy.headers.get_str("tenant"), Some("acme"));
        assert_eq!(copy.headers.get_str(RETRY_COUNT), None);
        assert_eq!(copy.headers.get_str(DEAD_LETTER_REASON), None);
        assert!(copy.headers.get_str(REPLAYED_AT).is_some());

        let (result, _) = cli(
            &broker,
            &["replay", "dead", "--id", "2", "--to", "orders.v2"],
        )
        .await;
        result.expect("replays");
        assert_eq!(broker.ready("orders.v2"), 1);
        assert_eq!(broker.messages("dead").len(), 1);
    }

    #[tokio::test]
    async fn a_dead_letter_without_an_origin_is_kept_and_named() {
        let broker = MemoryBroker::new();
        broker
            .publisher()
            .publish("dead".into(), Message::new("lost"))
            .await
            .expect("publish");
        let (result, out) = cli(&broker, &["replay", "dead"]).await;
        assert!(matches!(result, Err(CliError::Failed { failed: 1 })));
        assert!(out.contains("pass --to ADDRESS"), "{out}");
        assert_eq!(broker.ready("dead"), 1);
    }

    #[tokio::test]
    async fn purge_needs_a_filter_or_all() {
        let broker = broker().await;
        let (result, _) = cli(&broker, &["purge", "dead"]).await;
        let error = result.expect_err("no filter");
        assert!(error.to_string().contains("--all"), "{error}");
        let (result, out) = cli(
            &broker,
            &["purge", "dead", "--reason", "retry", "--dry-run"],
        )
        .await;
        result.expect("dry run");
        assert!(out.contains("would purge 1\nwould purge 3\n"), "{out}");
        assert_eq!(broker.ready("dead"), 3);
        let (result, out) = cli(&broker, &["purge", "dead", "--reason", "retry"]).await;
        result.expect("purges");
        assert!(out.contains("2 dead letter(s) purged"), "{out}");
        assert_eq!(broker.ready("dead"), 1);
        let (result, _) = cli(&broker, &["purge", "dead", "--all"]).await;
        result.expect("purges");
        assert_eq!(broker.ready("dead"), 0);
    }
}
