//! Consume throughput and CPU time per message (this process's and the PostgreSQL
//! server's) of the PostgreSQL queue adapter against raw sqlx loops on the same server,
//! and the publish-to-handler latency of a consumer woken by `LISTEN`.
//!
//! Every variant consumes N rows of the adapter's own table (`<schema>.ruststream_messages`,
//! created by `PostgresBroker::connect`), each a 512-byte JSON payload
//! `{"id":N,"pad":"xxx…"}` decoded with serde into the same struct before its row is
//! settled; a row is removed only after its message was handled (at-least-once):
//!
//! * `raw-each`: a raw sqlx loop on one connection, the adapter's claim-then-delete shape
//!   one row at a time: `UPDATE … SET attempts + 1, leased, visible_at = now() + lease
//!   … WHERE id IN (SELECT … ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING …`,
//!   decode, `DELETE … WHERE id = $1 AND attempts = $2`, each awaited;
//! * `raw-batch`: the same claiming 64 rows per statement, then one
//!   `DELETE … WHERE id = ANY($1)` for the batch once all 64 were handled (the fastest
//!   raw loop, the reference of the table's ratio);
//! * `framework`: a `ruststream::App` on `PostgresBroker` with one default mount
//!   (sequential handling, up to 65 rows claimed) and an `async fn` taking the decoded
//!   struct and returning `ack()`, timed from `on_start` to the last `after_settle`;
//! * `framework-workers`: the same mount with `workers(16)`;
//! * `latency`: the framework consuming an empty queue while 200 messages are published
//!   one at a time, 100 ms apart, each carrying its send instant: the median and p99 of
//!   publish → handler (`LISTEN` wakes the consumer; the fallback poll is 5 s).
//!
//! ```text
//! cargo build --release -p ruststream-postgres --example bench
//! target/release/examples/bench [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: 20000 messages, 3 rounds, the server at `RUSTSTREAM_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). Each variant has its own schema
//! (`rs_pgbench_<variant>`, dropped before and after); each round runs every variant
//! once (the order rotates from round to round) on a table filled beforehand with one
//! `INSERT … SELECT generate_series`, then `VACUUM ANALYZE`d and `CHECKPOINT`ed (none of
//! it timed), so every window starts from the same state; the `ANALYZE` matters: without
//! statistics (a server with autovacuum off) the claim's plan sorts every visible row of
//! the queue on each claim. After each run the table must be empty, or the bench fails.
//! `BENCH_ONLY=raw-batch,framework,latency` chooses what runs.
//!
//! Every run prints its msg/s, the client's and the server's CPU µs per message over its
//! timed window, and the database's commits and WAL bytes per message (from
//! `pg_stat_database` and the WAL position, around the run); at the end a markdown table
//! gives the medians, a second one the commits and WAL, then the latency line.
//! `BENCH_SERVER_DETAIL=1` also prints the server's CPU time by kind of process.
//! The client is this process (`ruststream_conformance::cpu`). PostgreSQL runs one
//! process per connection, so the server is the postmaster (found by its listening port)
//! plus its children (background writers, autovacuum, every backend), read from
//! `/proc/<pid>/stat` at the start and at the end of the window; a child that started
//! during the window counts from zero, one that exited during it is lost. Backends of
//! other clients (connections whose `application_name` is not this bench's) are left
//! out, so tests running elsewhere on the server do not count. Run as root or as the
//! server's user to see its processes.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ruststream::{App, Mount, Outcome, Settled, ack};
use ruststream_conformance::cpu::{
    Run, Window, children, chosen, listener, markdown_table, median, parent_and_cpu, port_of,
};
use ruststream_core::{Broker, Message};
use ruststream_postgres::PostgresBroker;
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, Row};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The `application_name` of every connection the bench opens, to tell its backends
/// from other clients'.
const APPLICATION: &str = "ruststream-pgbench";

/// The queue every variant consumes (each in its own schema).
const QUEUE: &str = "bench";

/// Rows claimed per statement by `raw-batch`.
const BATCH: i64 = 64;

/// The `workers(n)` of `framework-workers`.
const WORKERS: usize = 16;

/// The lease the raw loops claim with (the adapter's default).
const LEASE_MS: f64 = 30_000.0;

const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);

const VARIANTS: [&str; 4] = ["raw-each", "raw-batch", "framework", "framework-workers"];

/// The latency measurement: how many messages, how far apart.
const PINGS: usize = 200;
const PING_EVERY: Duration = Duration::from_millis(100);

/// The postmaster, found once from the URL's port.
static POSTMASTER: OnceLock<Option<u32>> = OnceLock::new();

/// What every variant decodes each message into.
#[derive(Debug, Deserialize)]
struct Order {
    id: u64,
    pad: String,
}

impl Order {
    fn consume(&self) {
        std::hint::black_box((self.id, self.pad.len()));
    }
}

fn schema_of(variant: &str) -> String {
    format!("rs_pgbench_{}", variant.replace('-', "_"))
}

fn with_query(base: &str, query: &str) -> String {
    let join = if base.contains('?') { '&' } else { '?' };
    format!("{base}{join}{query}")
}

/// The adapter's URL for `schema`.
fn broker_url(base: &str, schema: &str) -> String {
    with_query(
        base,
        &format!("schema={schema}&application_name={APPLICATION}"),
    )
}

async fn connection(base: &str) -> Result<PgConnection, Error> {
    let options = PgConnectOptions::from_str(base)?.application_name(APPLICATION);
    Ok(PgConnection::connect_with(&options).await?)
}

/// Drops what an earlier run may have left and creates the adapter's tables in `schema`.
async fn create(admin: &mut PgConnection, base: &str, schema: &str) -> Result<(), Error> {
    drop_schema(admin, schema).await?;
    let broker = PostgresBroker::connect(&broker_url(base, schema)).await?;
    broker.close().await;
    Ok(())
}

async fn drop_schema(admin: &mut PgConnection, schema: &str) -> Result<(), Error> {
    sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(admin)
        .await?;
    Ok(())
}

/// Fills `schema`'s queue with `n` 512-byte JSON rows (ids 0..n, as a publish would make
/// them: a `content-type` header), then vacuums the table and checkpoints.
async fn fill(admin: &mut PgConnection, schema: &str, n: usize) -> Result<(), Error> {
    let table = format!("{schema}.ruststream_messages");
    let statement = format!(
        "INSERT INTO {table} (queue, payload, header_names, header_values)
         SELECT $1, convert_to(head || repeat('x', 510 - length(head)) || '\"}}', 'UTF8'),
                ARRAY['content-type'], ARRAY[convert_to('application/json', 'UTF8')]
         FROM (SELECT '{{\"id\":' || i || ',\"pad\":\"' AS head
               FROM generate_series(0, $2 - 1) AS i) AS rows"
    );
    sqlx::query(&statement)
        .bind(QUEUE)
        .bind(n as i64)
        .execute(&mut *admin)
        .await?;
    let (count, sizes): (i64, Vec<i32>) = sqlx::query_as(&format!(
        "SELECT count(*), array_agg(DISTINCT octet_length(payload)) FROM {table}"
    ))
    .fetch_one(&mut *admin)
    .await?;
    if count != n as i64 || sizes != [512] {
        return Err(format!("{table}: filled {count} rows of {sizes:?} bytes").into());
    }
    for statement in [format!("VACUUM ANALYZE {table}"), "CHECKPOINT".to_owned()] {
        sqlx::raw_sql(&statement).execute(&mut *admin).await?;
    }
    Ok(())
}

/// The database's commits and the WAL position (bytes), for commits and WAL per message.
async fn counters(admin: &mut PgConnection) -> Result<(i64, i64), Error> {
    Ok(sqlx::query_as(
        "SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
         FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(admin)
    .await?)
}

/// Fails unless `schema`'s table is empty.
async fn empty(admin: &mut PgConnection, schema: &str, variant: &str) -> Result<(), Error> {
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {schema}.ruststream_messages"
    ))
    .fetch_one(admin)
    .await?;
    if left > 0 {
        return Err(format!("{variant} left {left} rows in {schema}.ruststream_messages").into());
    }
    Ok(())
}

/// The CPU time of the postmaster and of each of its children, by pid.
fn server_cpu(postmaster: u32) -> HashMap<u32, Duration> {
    std::iter::once(postmaster)
        .chain(children(postmaster))
        .filter_map(|pid| Some((pid, parent_and_cpu(pid)?.1)))
        .collect()
}

/// What a server process is, from its title: `backend` (a connection's), or the
/// background process's name (`walwriter`, `checkpointer`, …).
fn kind(pid: u32, postmaster: u32) -> String {
    if pid == postmaster {
        return "postmaster".to_owned();
    }
    let title = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let title = title.trim_end_matches('\0').replace('\0', " ");
    if title.contains('(') || title.contains("[local]") {
        "backends".to_owned()
    } else {
        let name = title.strip_prefix("postgres: ").unwrap_or(&title);
        if name.is_empty() {
            format!("pid {pid}")
        } else {
            name.to_owned()
        }
    }
}

/// A timed window: wall time and this process's CPU time (`cpu::Window`), and the
/// server's processes' CPU time.
struct Measure {
    window: Window,
    server: Option<(u32, HashMap<u32, Duration>)>,
}

/// A window's end, before the server's processes are told apart.
struct Ended {
    run: Run,
    /// The CPU time each server process spent in the window, and what it is.
    server: Option<HashMap<u32, (Duration, String)>>,
}

impl Measure {
    fn start() -> Self {
        let postmaster = POSTMASTER.get().copied().flatten();
        Self {
            server: postmaster.map(|pid| (pid, server_cpu(pid))),
            window: Window::start(None),
        }
    }

    fn end(&self, n: usize) -> Ended {
        let run = self.window.end(n);
        let server = self.server.as_ref().map(|(postmaster, before)| {
            server_cpu(*postmaster)
                .into_iter()
                .map(|(pid, now)| {
                    let was = before.get(&pid).copied().unwrap_or_default();
                    (pid, now.saturating_sub(was))
                })
                .filter(|(_, spent)| !spent.is_zero())
                .map(|(pid, spent)| (pid, (spent, kind(pid, *postmaster))))
                .collect()
        });
        Ended { run, server }
    }
}

impl Ended {
    /// The run with the server's CPU time per message: every process but the backends
    /// of other clients (told apart after the window, from `pg_stat_activity`). With
    /// `BENCH_SERVER_DETAIL=1`, prints the server's CPU time by kind of process.
    async fn run(self, admin: &mut PgConnection, n: usize) -> Result<Run, Error> {
        let mut run = self.run;
        let Some(spent) = self.server else {
            return Ok(run);
        };
        let others: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
             WHERE backend_type = 'client backend' AND application_name <> $1",
        )
        .bind(APPLICATION)
        .fetch_all(admin)
        .await?;
        let mine: Vec<&(Duration, String)> = spent
            .iter()
            .filter(|(pid, _)| !others.contains(&(**pid as i32)))
            .map(|(_, spent)| spent)
            .collect();
        let total: Duration = mine.iter().map(|(spent, _)| *spent).sum();
        if std::env::var_os("BENCH_SERVER_DETAIL").is_some() {
            let mut kinds: HashMap<&str, Duration> = HashMap::new();
            for (spent, kind) in &mine {
                *kinds.entry(kind.as_str()).or_default() += *spent;
            }
            let mut kinds: Vec<_> = kinds.into_iter().collect();
            kinds.sort_by_key(|kind| std::cmp::Reverse(kind.1));
            let per = |d: Duration| d.as_secs_f64() * 1e6 / n.max(1) as f64;
            let detail: Vec<String> = kinds
                .iter()
                .map(|(kind, spent)| format!("{kind} {:.1}", per(*spent)))
                .collect();
            println!("  server µs/msg by process: {}", detail.join(", "));
        }
        run.broker_us = total.as_secs_f64() * 1e6 / n.max(1) as f64;
        Ok(run)
    }
}

/// The adapter's claim, `limit` rows at a time.
fn claim_statement(schema: &str) -> String {
    format!(
        "WITH picked AS (
            SELECT id FROM {schema}.ruststream_messages WHERE queue = $1 AND visible_at <= now()
            ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
         UPDATE {schema}.ruststream_messages AS m
         SET attempts = m.attempts + 1, leased = true,
             visible_at = now() + $3 * interval '1 millisecond'
         FROM picked WHERE m.id = picked.id
         RETURNING m.id, m.attempts, m.payload"
    )
}

async fn raw_each(base: &str, schema: &str, n: usize) -> Result<Ended, Error> {
    let mut conn = connection(base).await?;
    let claim = claim_statement(schema);
    let delete =
        format!("DELETE FROM {schema}.ruststream_messages WHERE id = $1 AND attempts = $2");
    let measure = Measure::start();
    for _ in 0..n {
        let row = sqlx::query(&claim)
            .bind(QUEUE)
            .bind(1_i64)
            .bind(LEASE_MS)
            .fetch_optional(&mut conn)
            .await?
            .ok_or("raw-each: the queue ran dry")?;
        let (id, attempts): (i64, i32) = (row.try_get(0)?, row.try_get(1)?);
        let order: Order = serde_json::from_slice(row.try_get_raw(2).map(bytes)??)?;
        order.consume();
        let done = sqlx::query(&delete)
            .bind(id)
            .bind(attempts)
            .execute(&mut conn)
            .await?;
        if done.rows_affected() != 1 {
            return Err(format!("raw-each: row {id} was not deleted").into());
        }
    }
    let ended = measure.end(n);
    conn.close().await?;
    Ok(ended)
}

async fn raw_batch(base: &str, schema: &str, n: usize) -> Result<Ended, Error> {
    let mut conn = connection(base).await?;
    let claim = claim_statement(schema);
    let delete = format!("DELETE FROM {schema}.ruststream_messages WHERE id = ANY($1)");
    let mut ids = Vec::with_capacity(BATCH as usize);
    let mut handled = 0;
    let measure = Measure::start();
    while handled < n {
        let rows = sqlx::query(&claim)
            .bind(QUEUE)
            .bind(BATCH)
            .bind(LEASE_MS)
            .fetch_all(&mut conn)
            .await?;
        if rows.is_empty() {
            return Err("raw-batch: the queue ran dry".into());
        }
        ids.clear();
        for row in &rows {
            let order: Order = serde_json::from_slice(row.try_get_raw(2).map(bytes)??)?;
            order.consume();
            ids.push(row.try_get::<i64, _>(0)?);
        }
        let done = sqlx::query(&delete).bind(&ids).execute(&mut conn).await?;
        if done.rows_affected() != ids.len() as u64 {
            return Err(format!(
                "raw-batch: {} of {} deleted",
                done.rows_affected(),
                ids.len()
            )
            .into());
        }
        handled += rows.len();
    }
    let ended = measure.end(n);
    conn.close().await?;
    Ok(ended)
}

/// A `bytea` column's bytes, without copying them out of the row.
fn bytes(value: sqlx::postgres::PgValueRef<'_>) -> Result<&[u8], Error> {
    use sqlx::ValueRef;
    if value.is_null() {
        return Err("a null payload".into());
    }
    <&[u8] as sqlx::Decode<sqlx::Postgres>>::decode(value)
}

async fn handle(order: Order) -> Outcome {
    order.consume();
    ack()
}

#[derive(Default)]
struct Progress {
    started: OnceLock<Measure>,
    finished: Mutex<Option<Ended>>,
    settled: AtomicUsize,
    failed: AtomicUsize,
    done: tokio::sync::Notify,
}

/// The framework with the default sequential mount, or with `workers(n)`.
async fn framework(
    base: &str,
    schema: &str,
    n: usize,
    workers: Option<usize>,
) -> Result<Ended, Error> {
    let broker = PostgresBroker::connect(&broker_url(base, schema)).await?;
    let progress = Arc::new(Progress::default());
    let mut mount = Mount::new(QUEUE);
    if let Some(workers) = workers {
        mount = mount.workers(workers);
    }
    let (on_start, on_settle) = (progress.clone(), progress.clone());
    let app = App::with_broker(Arc::new(broker))
        .mount(mount, handle)
        .on_start(move || {
            let _ = on_start.started.set(Measure::start());
        })
        .after_settle(move |settled: &Settled| {
            if !settled.is_ok() {
                on_settle.failed.fetch_add(1, Ordering::Relaxed);
            }
            if on_settle.settled.fetch_add(1, Ordering::AcqRel) + 1 == n {
                if let Some(measure) = on_settle.started.get() {
                    *on_settle
                        .finished
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(measure.end(n));
                }
                on_settle.done.notify_one();
            }
        });
    let running = app.start().await?;
    let finished = tokio::time::timeout(DRAIN_TIMEOUT, progress.done.notified()).await;
    running.stop().await?;
    finished.map_err(|_| format!("framework: {:?} settled", progress.settled))?;
    let failed = progress.failed.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("framework: {failed} settlements failed").into());
    }
    let ended = progress
        .finished
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    ended.ok_or_else(|| "framework: no timing".into())
}

/// What the latency measurement publishes: when it was sent, from [`base`].
#[derive(Debug, Serialize, Deserialize)]
struct Ping {
    sent_ns: u64,
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Publish → handler, of each ping handled.
static LATENCIES: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

async fn pong(ping: Ping) -> Outcome {
    let latency = base()
        .elapsed()
        .saturating_sub(Duration::from_nanos(ping.sent_ns));
    LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(latency);
    ack()
}

/// The publish → handler latencies of [`PINGS`] messages sent one at a time to the
/// framework consuming an empty queue, sorted.
async fn latency(base_url: &str, schema: &str) -> Result<Vec<Duration>, Error> {
    let broker = PostgresBroker::connect(&broker_url(base_url, schema)).await?;
    let publisher = broker.publisher();
    let app = App::with_broker(Arc::new(broker)).mount(Mount::new(QUEUE), pong);
    let running = app.start().await?;
    // The consumer's first claim finds nothing; it waits on LISTEN.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut every = tokio::time::interval(PING_EVERY);
    for _ in 0..PINGS {
        every.tick().await;
        let ping = Ping {
            sent_ns: base().elapsed().as_nanos() as u64,
        };
        let message = Message::new(serde_json::to_vec(&ping)?)
            .with_header("content-type", "application/json");
        publisher.publish(QUEUE.into(), message).await?;
    }
    let until = Instant::now() + Duration::from_secs(30);
    let handled = loop {
        let handled = LATENCIES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        if handled >= PINGS || Instant::now() > until {
            break handled;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    running.stop().await?;
    if handled != PINGS {
        return Err(format!("latency: {handled} of {PINGS} pings handled").into());
    }
    let mut latencies =
        std::mem::take(&mut *LATENCIES.lock().unwrap_or_else(PoisonError::into_inner));
    latencies.sort();
    Ok(latencies)
}

/// The nearest-rank `p` quantile of sorted `values`.
fn quantile(values: &[Duration], p: f64) -> Duration {
    let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len().max(1));
    values.get(rank - 1).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(20_000), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |s| s.parse())?;
    let url = std::env::var("RUSTSTREAM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let port = port_of(&url, 5432);
    let postmaster = *POSTMASTER.get_or_init(|| listener(port));
    println!(
        "postmaster on port {port}: {postmaster:?} (its and its children's CPU time is the server's)"
    );
    let mut admin = connection(&url).await?;
    let mut schemas = Vec::new();
    for variant in VARIANTS.iter().copied().chain(["latency"]) {
        if chosen(variant) {
            let schema = schema_of(variant);
            create(&mut admin, &url, &schema).await?;
            schemas.push(schema);
        }
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); VARIANTS.len()];
    let mut io: Vec<Vec<(f64, f64)>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..rounds {
        for k in 0..VARIANTS.len() {
            let v = (round + k) % VARIANTS.len();
            let variant = VARIANTS[v];
            if !chosen(variant) {
                continue;
            }
            let schema = schema_of(variant);
            fill(&mut admin, &schema, n).await?;
            let before = counters(&mut admin).await?;
            let ended = match variant {
                "raw-each" => raw_each(&url, &schema, n).await?,
                "raw-batch" => raw_batch(&url, &schema, n).await?,
                "framework" => framework(&url, &schema, n, None).await?,
                _ => framework(&url, &schema, n, Some(WORKERS)).await?,
            };
            let run = ended.run(&mut admin, n).await?;
            empty(&mut admin, &schema, variant).await?;
            // The closed connections' statistics reach pg_stat_database within a second.
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let after = counters(&mut admin).await?;
            let commits = (after.0 - before.0) as f64 / n as f64;
            let wal = (after.1 - before.1) as f64 / n as f64;
            println!(
                "round {round} {variant:<18} {:>8.0} msg/s  client {:>5.1} µs/msg  server {:>5.1} µs/msg  {commits:.2} commits/msg  {wal:.0} WAL B/msg",
                run.rate, run.client_us, run.broker_us
            );
            runs[v].push(run);
            io[v].push((commits, wal));
        }
    }
    let latencies = if chosen("latency") {
        let schema = schema_of("latency");
        let latencies = latency(&url, &schema).await?;
        empty(&mut admin, &schema, "latency").await?;
        Some(latencies)
    } else {
        None
    };
    for schema in &schemas {
        drop_schema(&mut admin, schema).await?;
    }
    admin.close().await?;
    let variants: Vec<(&str, Vec<Run>)> = VARIANTS.iter().copied().zip(runs).collect();
    if variants.iter().any(|(_, runs)| !runs.is_empty()) {
        println!("\nmedians of {rounds} rounds of {n}\n");
        print!("{}", markdown_table(&variants));
        println!("\n| variant | commits/msg | WAL bytes/msg |\n|---|---:|---:|");
        for (name, io) in VARIANTS.iter().zip(&io).filter(|(_, io)| !io.is_empty()) {
            println!(
                "| {name} | {:.2} | {:.0} |",
                median(io.iter().map(|x| x.0)),
                median(io.iter().map(|x| x.1))
            );
        }
    }
    if let Some(latencies) = latencies {
        println!(
            "\npublish → handler, {PINGS} messages {} ms apart, woken by LISTEN: median {:.2} ms, p99 {:.2} ms (min {:.2}, max {:.2})",
            PING_EVERY.as_millis(),
            ms(quantile(&latencies, 0.5)),
            ms(quantile(&latencies, 0.99)),
            ms(latencies[0]),
            ms(latencies[latencies.len() - 1]),
        );
    }
    Ok(())
}
