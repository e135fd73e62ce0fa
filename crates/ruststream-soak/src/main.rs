//! The soak and fault harness: numbered messages through real brokers under faults,
//! counted at the end. `scripts/soak` runs the scenarios; this binary is each of their
//! processes:
//!
//! ```text
//! ruststream-soak run --form FORM --fault FAULT --n N --rate R --dir DIR [--hole-secs S]
//!                     [--rare K] [--drain-secs S] [--consumers C] [--budget-secs S]
//! ruststream-soak consume --url URL --form FORM --address A --dir DIR [--dead]
//! ruststream-soak produce --url URL --form FORM --address A --dir DIR --n N --rate R
//! ruststream-soak summary --dir DIR [--commit C]
//! ```
//!
//! Forms: memory, redis-stream, redis-zset, redis-claiming, redis-list, amqp-quorum,
//! amqp-classic, lapin-quorum, lapin-classic (operator-made queues, default options),
//! amqp-declared, lapin-declared (the mount's declare(Quorum)), nats, postgres, kafka,
//! kafka-workers, mqtt. Faults: none, kill, redis-kill, rabbit-restart, nats-restart,
//! postgres-restart, kafka-restart, kafka-node-kill, mqtt-restart, reset, black-hole.

mod args;
mod connect;
mod consume;
mod fault;
mod form;
mod gaps;
mod jetstream;
mod kafka;
mod lock;
mod mosquitto;
mod mqtt;
mod net;
mod notes;
mod operator;
mod pending;
mod phase;
mod plan;
mod produce;
mod proxy;
mod record;
mod restart;
mod run;
mod scenario;
mod server;
mod summary;
mod sys;
mod tally;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use args::Args;
use form::Form;

/// Any error, reported at the end.
pub(crate) type BoxError = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_default();
    let result = Args::parse(argv).map_err(BoxError::from).and_then(|args| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(BoxError::from)
            .and_then(|rt| rt.block_on(dispatch(&command, &args)))
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("soak {command}: {error}");
            ExitCode::from(2)
        }
    }
}

async fn dispatch(command: &str, args: &Args) -> Result<ExitCode, BoxError> {
    // The consumers log to files of their own (warnings included: panics and dead
    // letters are expected there); the driver only prints errors.
    // A Kafka consumer says where its fetch passed over offsets, read by `gaps.rs`.
    let level = match command {
        "run" => "error".to_owned(),
        "consume" => format!("warn,{}=debug", gaps::TARGET),
        _ => "warn".to_owned(),
    };
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&level)),
        )
        .with_writer(std::io::stderr)
        .try_init()
        .ok();
    match command {
        "consume" => {
            let dead = args.flag("dead");
            let dir = PathBuf::from(args.string("dir")?);
            let role = if dead { "dead" } else { "main" };
            let log = dir.join(format!("{role}-{}.log", std::process::id()));
            let form: Form = args.get("form")?;
            consume::run(
                &args.string("url")?,
                form,
                &args.string("address")?,
                dead,
                &log,
            )
            .await?;
        }
        "produce" => {
            let form: Form = args.get("form")?;
            let log = PathBuf::from(args.string("dir")?).join("produce.log");
            produce::run(
                &args.string("url")?,
                form,
                &args.string("address")?,
                args.get("n")?,
                args.get("rate")?,
                &log,
            )
            .await?;
        }
        "run" => {
            let plan = plan::Plan {
                form: args.get("form")?,
                fault: args.get("fault")?,
                n: args.get("n")?,
                rate: args.get_or("rate", 1_000)?,
                hole: Duration::from_secs(args.get_or("hole-secs", 5)?),
                rare_faults: args.get_or("rare", 1)?,
                drain: Duration::from_secs(args.get_or("drain-secs", 90)?),
                consumers: args.get_or("consumers", 2)?,
                budget: match args.get_or("budget-secs", 0)? {
                    0 => None,
                    secs => Some(Duration::from_secs(secs)),
                },
                dir: PathBuf::from(args.string("dir")?),
            };
            let report = scenario::run(plan).await?;
            let t = &report.tally;
            println!(
                "soak {} / {}: published {}, handled {}, dead-lettered {} (+{} rejected originals \
                 dead-lettered by the broker), lost {}, lost with the broker's unsaved state {}, \
                 passed over by the broker's fetch {}, \
                 in-process delayed copies lost on crash {}, duplicates {}, still pending {}, \
                 faults {}, recovery median {:?} ms max {:?} ms, longest without a handled message \
                 {:?} ms, {} s: {}",
                report.form,
                report.fault,
                t.published,
                t.handled,
                t.dead,
                t.rejected_dead,
                t.lost_other,
                t.lost_broker,
                t.passed_over,
                t.lost_delayed,
                t.duplicates,
                report.pending,
                report.faults,
                t.recovery_median_ms,
                t.recovery_max_ms,
                t.longest_gap_ms,
                report.seconds,
                if report.passed() { "ok" } else { "FAILED" },
            );
            if !t.lost_other_ids.is_empty() {
                println!("  lost ids (first 20): {:?}", t.lost_other_ids);
            }
            if !t.lost_broker_ids.is_empty() {
                println!(
                    "  lost with the broker's unsaved state, ids (first 20): {:?}",
                    t.lost_broker_ids
                );
            }
            if !t.passed_over_ids.is_empty() {
                println!(
                    "  passed over by the broker's fetch, ids: {:?}",
                    t.passed_over_ids
                );
            }
            if !report.passed() {
                for note in &report.notes {
                    println!("  {note}");
                }
                return Ok(ExitCode::FAILURE);
            }
        }
        "summary" => {
            let reports = summary::reports(&PathBuf::from(args.string("dir")?))?;
            let commit = args.get_or("commit", String::from("?"))?;
            print!("{}", summary::markdown(&reports, &commit));
            if reports.iter().any(|r| !r.passed()) {
                return Ok(ExitCode::FAILURE);
            }
        }
        other => {
            return Err(
                format!("unknown command {other:?} (run, consume, produce, summary)").into(),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
