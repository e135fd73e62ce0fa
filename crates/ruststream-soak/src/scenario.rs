//! One scenario: a form, a fault, N messages. Starts the consumers and the producer as
//! processes of their own, injects the fault while the producer runs, waits for the
//! messages to settle, stops everything and counts.

use std::path::Path;
use std::time::Duration;

use ruststream::App;
use ruststream::memory::MemoryBroker;
use tokio::time::Instant;

use crate::BoxError;
use crate::consume::{Soak, dead_service, quiet_planned_panics, service};
use crate::fault::Fault;
use crate::form::{Form, Server};
use crate::phase;
use crate::plan::{Plan, Report, report};
use crate::record::{EventLog, now_ms};
use crate::run::Run;
use crate::tally::Logs;

/// librdkafka's default `max.poll.interval.ms`, the rebalance timeout a consumer gives
/// its group (the Kafka adapter keeps it).
const KAFKA_REBALANCE: Duration = Duration::from_secs(300);

/// Runs a scenario and writes `report.json` into its directory.
pub(crate) async fn run(mut plan: Plan) -> Result<Report, BoxError> {
    plan.fault.check(plan.form)?;
    if plan.fault == Fault::RabbitRestart {
        // A restart takes RabbitMQ down some 15 s after it is asked for: publish for at
        // least a minute, so that messages still flow when it goes down and comes back.
        plan.rate = plan.rate.min((plan.n / 60).max(1));
        // A delayed copy whose move back the restart cut comes back when RabbitMQ's
        // at-least-once dead-letter worker publishes it again, after its confirm timeout
        // (read from the broker; 180 s by default): the drain waits that long and a
        // minute more before counting it lost.
        let timeout = crate::pending::dead_letter_confirm_timeout()?;
        plan.drain = plan.drain.max(timeout + Duration::from_secs(60));
    }
    if plan.form.server() == Server::Kafka && plan.fault == Fault::Kill {
        // A SIGKILLed consumer keeps its place in its group until its session expires
        // (librdkafka's `session.timeout.ms`, 45 s: the adapter keeps the default; 6 s
        // on the form named after it), and
        // in the classic protocol's rebalance the other consumers hold no partition
        // meanwhile. One killed while its join was pending is even given partitions in
        // the generation that follows, and holds them for a session more: the drain
        // waits out two sessions after the last kill before it counts anything lost.
        plan.drain += plan.form.kafka_session() * 2;
    }
    if matches!(plan.fault, Fault::KafkaRestart | Fault::KafkaNodeKill) {
        // nisshi stores its groups, members included, and a restart (of the broker, or
        // of the cluster's broker a client's group connection was on) can leave one a
        // member no client speaks for any more (a join whose answer the kill took: the client
        // joins again as another member). In a rebalance the group waits for such a member
        // until the rebalance timeout (librdkafka's `max.poll.interval.ms`, 5 minutes: the
        // adapter keeps it), and partitions assigned to it wait for its session to expire
        // (`nisshi-broker`'s `coordinator/group/administrator.rs`). The drain waits that
        // out before it counts anything lost; a run without it ends as soon as it settles.
        plan.drain += KAFKA_REBALANCE + plan.form.kafka_session();
    }
    // Short enough for every broker's messages about it: RabbitMQ's refusal of a
    // declaration names the queue and its dead letter in at most 255 bytes, and lapin's
    // probe reads the value from it (the pid and the milliseconds within 1,000 s keep
    // it unique among the scenarios running at once).
    let name = format!(
        "{}-{}-{}-{}",
        plan.form.name(),
        plan.fault.name(),
        std::process::id(),
        now_ms() % 1_000_000
    );
    let address = format!("soak-{name}");
    let dir = plan.dir.join(&name);
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let budget = budget(&plan);
    let scenario = async {
        if plan.form == Form::Memory {
            memory(&plan, &address, &dir).await
        } else {
            Run::new(&plan, &address, &dir).await?.go().await
        }
    };
    // Past its budget the scenario fails, saying what it was doing; its processes (the
    // consumers, the producer, a server of its own) are killed as they are dropped.
    let mut report = match tokio::time::timeout(budget, scenario).await {
        Ok(report) => report?,
        Err(_) => {
            return Err(format!(
                "{address}: over its {} s while {}; its logs are in {}{}",
                budget.as_secs(),
                phase::now(),
                dir.display(),
                tails(&dir)
            )
            .into());
        }
    };
    report.seconds = started.elapsed().as_secs();
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
    Ok(report)
}

/// How long a scenario may take in all, unless the plan says: twice its publishing time, its drain, and ten
/// minutes for the rest (starting, the faults, a RabbitMQ restart, stopping).
fn budget(plan: &Plan) -> Duration {
    if let Some(budget) = plan.budget {
        return budget;
    }
    let publishing = Duration::from_secs(plan.n / plan.rate.max(1));
    publishing * 2 + plan.drain + Duration::from_secs(600)
}

/// The last lines of each process's output in `dir` (`produce.out`, `consume.out`), for
/// the message of a scenario that ran out of time.
fn tails(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "out") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("\n  the end of {}:", path.display()));
            for line in &lines[lines.len().saturating_sub(8)..] {
                out.push_str("\n    ");
                out.push_str(line);
            }
        }
    }
    out
}

/// The memory broker's run: producer, service and dead-letter consumer in this process.
async fn memory(plan: &Plan, address: &str, dir: &Path) -> Result<Report, BoxError> {
    quiet_planned_panics();
    let broker = MemoryBroker::new();
    let pid = std::process::id();
    let app = service(
        App::new(broker.clone()),
        plan.form,
        address,
        Soak::new(EventLog::create(&dir.join(format!("main-{pid}.log")))?),
    );
    let app = dead_service(
        app,
        plan.form,
        address,
        Soak::new(EventLog::create(&dir.join(format!("dead-{pid}.log")))?),
    );
    let running = app.start().await?;
    let publisher = ruststream::core::Broker::publisher(&broker);
    let keys = plan.form.keys();
    let produced = crate::produce::produce(publisher, address, plan.n, plan.rate, keys, None).await;
    let deadline = Instant::now() + plan.drain;
    while Instant::now() < deadline {
        let logs = Logs::read(dir)?;
        if logs.missing(produced.published).is_empty() && broker.is_idle() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pending: usize = broker
        .snapshot()
        .iter()
        .map(|s| s.ready + s.unsettled + s.delayed)
        .sum();
    running.stop().await?;
    let mut out = report(plan);
    out.pending = pending as u64;
    out.publish_failures = produced.failures;
    out.tally = Logs::read(dir)?.tally(produced.published, &[], &[], false, &[]);
    Ok(out)
}
