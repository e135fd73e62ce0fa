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

use std::time::Duration;

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

/// User plus system time of `/proc/<pid>/stat` (fields 14 and 15, in clock ticks).
fn cpu_of(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ').skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (user + system) as f64 / ticks_per_second(),
    ))
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
    use super::{CpuClock, listening_inode};

    #[test]
    fn a_listening_socket_is_found_by_its_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1628 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 4242 1\n   1: 0100007F:1628 0100007F:9C40 01 00000000:00000000 00:00000000 00000000   999        0 4343 1\n";
        assert_eq!(listening_inode(table, 5672).as_deref(), Some("4242"));
        assert_eq!(listening_inode(table, 5673), None);
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
