//! CPU time of the bench's own process and of the broker's, for the adapters' benches.
//!
//! What a message costs on a small machine is the CPU both sides spend on it, not only
//! the throughput: [`CpuClock`] reads the user and system time of this process and of
//! the process listening on the broker's port (`/proc/<pid>/stat`, every thread, the
//! exited ones included) at the start and at the end of a measured window.
//!
//! ```no_run
//! use ruststream_conformance::cpu::{CpuClock, listener};
//!
//! let broker = listener(5672); // once: it walks every process's sockets
//! let clock = CpuClock::start(broker);
//! // … consume 10,000 messages …
//! let spent = clock.stop();
//! println!("client {:.1} µs/msg, broker {:?}", spent.client_per(10_000), spent.broker_per(10_000));
//! ```
//!
//! A bench's variants time their window with a [`Window`], which gives a [`Run`] (the
//! rate and both CPU times per message), and [`markdown_table`] prints the medians of
//! every variant's runs:
//!
//! ```no_run
//! use ruststream_conformance::cpu::{Window, listener, markdown_table, port_of};
//!
//! let broker = listener(port_of("amqp://127.0.0.1:5672", 5672));
//! let window = Window::start(broker);
//! // … consume 10,000 messages …
//! let run = window.end(10_000);
//! println!("raw {run}");
//! print!("{}", markdown_table(&[("raw", vec![run])]));
//! ```

use std::fmt;
use std::time::{Duration, Instant};

/// The CPU time of this process and of a broker's, from a start.
#[derive(Debug)]
pub struct CpuClock {
    broker: Option<u32>,
    client_at_start: Duration,
    broker_at_start: Option<Duration>,
}

/// The CPU time spent in a window.
#[derive(Clone, Copy, Debug)]
pub struct CpuSpent {
    /// This process.
    pub client: Duration,
    /// The broker's process, where it was found.
    pub broker: Option<Duration>,
}

impl CpuSpent {
    /// The client's CPU time per message, in microseconds.
    pub fn client_per(&self, messages: usize) -> f64 {
        per(self.client, messages)
    }

    /// The broker's CPU time per message, in microseconds, where it was found.
    pub fn broker_per(&self, messages: usize) -> Option<f64> {
        self.broker.map(|spent| per(spent, messages))
    }
}

fn per(spent: Duration, messages: usize) -> f64 {
    spent.as_secs_f64() * 1e6 / messages.max(1) as f64
}

impl CpuClock {
    /// Starts the clock for this process and for the `broker`'s (see [`listener`];
    /// `None`: only this process is measured).
    pub fn start(broker: Option<u32>) -> Self {
        Self {
            broker,
            client_at_start: cpu_of("self").unwrap_or_default(),
            broker_at_start: broker.and_then(|pid| cpu_of(&pid.to_string())),
        }
    }

    /// The CPU time spent since the start.
    pub fn stop(&self) -> CpuSpent {
        let client = cpu_of("self").unwrap_or_default();
        let broker = self
            .broker
            .and_then(|pid| cpu_of(&pid.to_string()))
            .zip(self.broker_at_start)
            .map(|(end, start)| end.saturating_sub(start));
        CpuSpent {
            client: client.saturating_sub(self.client_at_start),
            broker,
        }
    }
}

/// One measured window of a bench: its rate and the CPU time both sides spent per
/// message.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Messages per second.
    pub rate: f64,
    /// This process's CPU time per message, in microseconds.
    pub client_us: f64,
    /// The broker's CPU time per message, in microseconds (NaN where it was not found).
    pub broker_us: f64,
}

impl fmt::Display for Run {
    /// `12345 msg/s  client 12.3 µs/msg  broker 45.6 µs/msg`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>8.0} msg/s  client {:>5.1} µs/msg  broker {:>5.1} µs/msg",
            self.rate, self.client_us, self.broker_us
        )
    }
}

/// A bench's measured window: wall time and CPU time, from [`Window::start`] to
/// [`Window::end`].
#[derive(Debug)]
pub struct Window {
    start: Instant,
    cpu: CpuClock,
}

impl Window {
    /// Starts the window, with the `broker`'s CPU time where it is known (see [`listener`]).
    ///
    /// With `BENCH_PERF_CTL` naming the control FIFO of a `perf record --delay=-1
    /// --control=fifo:…`, the profile is enabled here and disabled at [`end`](Self::end),
    /// so that it holds the measured windows only (not the fills between them).
    pub fn start(broker: Option<u32>) -> Self {
        perf_control("enable");
        Self {
            cpu: CpuClock::start(broker),
            start: Instant::now(),
        }
    }

    /// The run of `n` messages handled since the start.
    pub fn end(&self, n: usize) -> Run {
        let rate = n as f64 / self.start.elapsed().as_secs_f64();
        let spent = self.cpu.stop();
        perf_control("disable");
        Run {
            rate,
            client_us: spent.client_per(n),
            broker_us: spent.broker_per(n).unwrap_or(f64::NAN),
        }
    }
}

/// Whether a bench runs `variant`: every variant, unless `BENCH_ONLY` names some
/// (`BENCH_ONLY=framework,raw-plain`, for a profile or a pair side by side).
pub fn chosen(variant: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only.split(',').any(|o| o == variant))
}

/// Sends `command` to the perf control FIFO `BENCH_PERF_CTL` names, if it does.
fn perf_control(command: &str) {
    use std::io::Write;
    let Some(fifo) = std::env::var_os("BENCH_PERF_CTL") else {
        return;
    };
    let sent = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut ctl| ctl.write_all(format!("{command}\n").as_bytes()));
    if let Err(error) = sent {
        eprintln!("BENCH_PERF_CTL {}: {error}", fifo.to_string_lossy());
    }
}

/// The median of `values` (the upper one of an even count; NaN of none).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.into_iter().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A markdown table of every variant's medians: msg/s, its share of the fastest raw
/// loop's (the row, named `raw…`, with the highest median rate), and the client's and
/// the broker's CPU µs per message. Variants without runs are left out.
pub fn markdown_table(variants: &[(&str, Vec<Run>)]) -> String {
    let rows: Vec<(&str, f64, f64, f64)> = variants
        .iter()
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(name, runs)| {
            (
                *name,
                median(runs.iter().map(|r| r.rate)),
                median(runs.iter().map(|r| r.client_us)),
                median(runs.iter().map(|r| r.broker_us)),
            )
        })
        .collect();
    let fastest = rows
        .iter()
        .filter(|row| row.0.starts_with("raw"))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut table = format!(
        "| variant | msg/s (median) | / fastest raw loop ({}) | client µs/msg | broker µs/msg |\n|---|---:|---:|---:|---:|\n",
        fastest.map_or("none", |row| row.0)
    );
    for (name, rate, client, broker) in &rows {
        let share = fastest.map_or("–".to_owned(), |row| {
            format!("{:.0} %", 100.0 * rate / row.1)
        });
        table.push_str(&format!(
            "| {name} | {rate:.0} | {share} | {client:.1} | {broker:.1} |\n"
        ));
    }
    table
}

/// The port of a `scheme://user:pass@host:port/path` URL (or `host:port`), `default`
/// where it names none.
pub fn port_of(url: &str, default: u16) -> u16 {
    let authority = url.split("://").nth(1).unwrap_or(url);
    let host = authority.split('/').next().unwrap_or(authority);
    let host = host.rsplit('@').next().unwrap_or(host);
    host.rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(default)
}

/// User plus system time of `/proc/<pid>/stat` (`"self"` for this process).
fn cpu_of(pid: &str) -> Option<Duration> {
    stat(pid).map(|(_, spent)| spent)
}

/// The parent and the user plus system time of a process (`/proc/<pid>/stat`, fields
/// 4, 14 and 15; every thread, the exited ones included).
pub fn parent_and_cpu(pid: u32) -> Option<(u32, Duration)> {
    stat(&pid.to_string())
}

fn stat(pid: &str) -> Option<(u32, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    let parent = fields.get(1)?.parse().ok()?;
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some((
        parent,
        Duration::from_secs_f64((user + system) as f64 / ticks_per_second()),
    ))
}

/// The children of process `pid` (a broker that runs a process per connection, such as
/// PostgreSQL, spends its CPU in them): from `/proc/<pid>/task/*/children`, or, on a
/// kernel without those files, every process whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let listed: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        return listed
            .iter()
            .flat_map(|list| list.split_whitespace())
            .filter_map(|child| child.parse().ok())
            .collect();
    }
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|process| process.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| parent_and_cpu(child).is_some_and(|(parent, _)| parent == pid))
        .collect()
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 where it cannot say).
fn ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The process with a socket listening on TCP `port` (IPv4 or IPv6), where this process
/// may read the sockets of its owner (its own user, or root).
pub fn listener(port: u16) -> Option<u32> {
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .find_map(|table| listening_inode(&table, port))?;
    let target = format!("socket:[{inode}]");
    for process in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = process
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == target.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

/// The inode of the socket listening on `port` in a `/proc/net/tcp` table.
fn listening_inode(table: &str, port: u16) -> Option<String> {
    let wanted = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // local_address, state (0A: LISTEN), inode.
        let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
        (local.ends_with(&wanted) && *state == "0A").then(|| (*inode).to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::{CpuClock, Run, listening_inode, markdown_table, port_of};

    #[test]
    fn a_port_is_read_from_a_url() {
        assert_eq!(port_of("amqp://guest:guest@127.0.0.1:5673/%2f", 5672), 5673);
        assert_eq!(port_of("amqp://127.0.0.1/%2f", 5672), 5672);
        assert_eq!(port_of("redis://127.0.0.1:6379", 6379), 6379);
        assert_eq!(port_of("127.0.0.1:4222", 1), 4222);
    }

    #[test]
    fn the_table_compares_with_the_fastest_raw_loop() {
        let run = |rate| Run {
            rate,
            client_us: 1.0,
            broker_us: 2.0,
        };
        let table = markdown_table(&[
            ("raw", vec![run(100.0)]),
            ("raw-batched", vec![run(200.0), run(400.0), run(300.0)]),
            ("adapter", vec![run(150.0)]),
            ("framework", vec![]),
        ]);
        assert!(table.contains("fastest raw loop (raw-batched)"), "{table}");
        assert!(
            table.contains("| adapter | 150 | 50 % | 1.0 | 2.0 |"),
            "{table}"
        );
        assert!(!table.contains("framework"), "{table}");
    }

    #[test]
    fn a_listening_socket_is_found_by_its_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1628 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 4242 1\n   1: 0100007F:1628 0100007F:9C40 01 00000000:00000000 00:00000000 00000000   999        0 4343 1\n";
        assert_eq!(listening_inode(table, 5672).as_deref(), Some("4242"));
        assert_eq!(listening_inode(table, 5673), None);
    }

    #[test]
    fn this_process_is_a_child_of_its_parent() {
        let me = std::process::id();
        let (parent, _) = super::parent_and_cpu(me).expect("this process's stat");
        assert!(super::children(parent).contains(&me));
    }

    #[test]
    fn the_clock_counts_this_process() {
        let clock = CpuClock::start(None);
        let mut x = 0_u64;
        let until = std::time::Instant::now() + std::time::Duration::from_millis(60);
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = clock.stop();
        assert!(
            spent.client >= std::time::Duration::from_millis(20),
            "{spent:?}"
        );
    }
}

/// The payload every adapter's bench sends: a 512-byte JSON order,
/// `{"id":<id>,"pad":"xx…"}`, which a handler reads as an [`Order`].
pub fn order_json(id: usize) -> Vec<u8> {
    let mut json = format!("{{\"id\":{id},\"pad\":\"");
    let pad = 512usize.saturating_sub(json.len() + 2);
    json.push_str(&"x".repeat(pad));
    json.push_str("\"}");
    json.into_bytes()
}

/// The order [`order_json`] encodes.
#[derive(Debug, serde::Deserialize)]
pub struct Order {
    /// Its number.
    pub id: u64,
    /// The padding that makes it 512 bytes.
    pub pad: String,
}

/// A framework run's measured window, started by the first record a handler sees (so
/// that start-up and the group's join are not counted).
#[derive(Debug, Default)]
pub struct FirstRecord {
    window: std::sync::Mutex<Option<Window>>,
    started: std::sync::atomic::AtomicBool,
}

impl FirstRecord {
    /// None seen yet.
    pub const fn new() -> Self {
        Self {
            window: std::sync::Mutex::new(None),
            started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Forgets the last run's window.
    pub fn reset(&self) {
        self.started
            .store(false, std::sync::atomic::Ordering::Relaxed);
        *self.lock() = None;
    }

    /// A record was seen: the first one starts the window (with `broker`'s CPU time).
    pub fn seen(&self, broker: Option<u32>) {
        if !self
            .started
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            *self.lock() = Some(Window::start(broker));
        }
    }

    /// The run of `n` messages since the first record, if one was seen.
    pub fn end(&self, n: usize) -> Option<Run> {
        self.lock().as_ref().map(|window| window.end(n))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Window>> {
        self.window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Counts a framework run's settlements up to `n`: how many failed, and the run, taken
/// when the last one settles.
#[derive(Debug)]
pub struct Countdown {
    n: usize,
    settled: std::sync::atomic::AtomicUsize,
    failed: std::sync::atomic::AtomicUsize,
    finished: std::sync::OnceLock<Run>,
    done: tokio::sync::Notify,
}

impl Countdown {
    /// A countdown of `n` settlements, to share with an `after_settle` hook.
    pub fn new(n: usize) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            n,
            settled: Default::default(),
            failed: Default::default(),
            finished: std::sync::OnceLock::new(),
            done: tokio::sync::Notify::new(),
        })
    }

    /// One settlement, `ok` or not; at the `n`-th, `end(n)` gives the run.
    pub fn settled(&self, ok: bool, end: impl FnOnce(usize) -> Option<Run>) {
        use std::sync::atomic::Ordering;
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        if self.settled.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            if let Some(run) = end(self.n) {
                let _ = self.finished.set(run);
            }
            self.done.notify_one();
        }
    }

    /// Waits (5 minutes at most) for the `n`-th settlement; panics if one failed.
    pub async fn finished(&self) -> Run {
        tokio::time::timeout(Duration::from_secs(300), self.done.notified())
            .await
            .expect("all settled");
        let failed = self.failed.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(failed, 0, "failed settlements");
        *self.finished.get().expect("a window was started")
    }
}

#[cfg(test)]
mod order_tests {
    #[test]
    fn an_order_is_512_bytes_of_json() {
        for id in [0, 7, 123_456_789] {
            let bytes = super::order_json(id);
            assert_eq!(bytes.len(), 512, "{id}");
            let text = String::from_utf8(bytes).expect("text");
            assert!(
                text.starts_with(&format!("{{\"id\":{id},\"pad\":\"x")),
                "{text}"
            );
            assert!(text.ends_with("x\"}"), "{text}");
        }
    }
}
