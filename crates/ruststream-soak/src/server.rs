//! A server of the harness's own, on a free port, with its data in a directory of its
//! own: the one a server-kill scenario kills and starts again (never the machine's
//! servers, which others use). A redis-server with AOF `appendfsync always` for the
//! Redis-kill scenario; a nats-server with JetStream for the NATS restart scenario; a
//! PostgreSQL cluster (`initdb` in the run's folder, run as the `postgres` user, fsync
//! on) for the PostgreSQL restart scenario, killed as a machine crash would: every
//! process of it at once; a nisshi (Kafka protocol) storing in a database of its own on
//! the machine's PostgreSQL for the Kafka restart scenario; a Mosquitto saving its state
//! every second, without a queue limit, for the MQTT restart and black hole scenarios
//! (`mosquitto.rs`).

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Redis,
    Nats,
    Postgres,
    /// nisshi storing in a database of its own on the machine's PostgreSQL (survives a
    /// SIGKILL).
    Kafka,
    /// nisshi keeping everything in memory (as the machine's 9092): for faults that do
    /// not restart it, where PostgreSQL storage would only slow every fetch and commit.
    KafkaMemory,
    Mosquitto,
}

/// A server the harness runs; killed on drop, its data removed.
pub(crate) struct OwnServer {
    kind: Kind,
    pub(crate) port: u16,
    /// The port a nisshi tells its clients to connect to (its own, or a proxy's).
    advertised: u16,
    /// A nisshi on PostgreSQL storage: the port of the one whose database it stores in
    /// (its own, or a cluster's first broker's). The owner drops it.
    store: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl OwnServer {
    /// Starts one of `kind` with its data in `dir`, on a free port.
    pub(crate) fn start(kind: Kind, dir: PathBuf) -> std::io::Result<Self> {
        let port = free_port()?;
        Self::start_on(kind, dir, port, port)
    }

    /// Starts one of `kind` with its data in `dir` on `port`; a nisshi advertises
    /// `advertised` as its listener (a proxy in front of it: a Kafka client connects to
    /// the listener the metadata names, not to the one it was given).
    pub(crate) fn start_on(
        kind: Kind,
        dir: PathBuf,
        port: u16,
        advertised: u16,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        match kind {
            Kind::Postgres => initdb(&dir)?,
            Kind::Kafka => crate::pending::psql(
                &storage("postgres"),
                &format!("CREATE DATABASE {}", database(port)),
            )
            .map(drop)?,
            Kind::Mosquitto => crate::mosquitto::configure(&dir, port)?,
            Kind::Redis | Kind::Nats | Kind::KafkaMemory => {}
        }
        let mut server = Self {
            kind,
            port,
            advertised,
            store: port,
            dir,
            child: None,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Three nisshi on one PostgreSQL database (one cluster id, nisshi's default), each
    /// with its data folder in `dir`: each answers for the whole cluster as its one
    /// broker, at its own address, so a client whose broker is gone asks another and
    /// goes on there. The first owns the database.
    pub(crate) fn cluster(dir: PathBuf) -> std::io::Result<Vec<Self>> {
        let first = Self::start(Kind::Kafka, dir.join("node-1"))?;
        let mut nodes = vec![];
        for n in 2..=3 {
            let port = free_port()?;
            let dir = dir.join(format!("node-{n}"));
            std::fs::create_dir_all(&dir)?;
            let mut node = Self {
                kind: Kind::Kafka,
                port,
                advertised: port,
                store: first.port,
                dir,
                child: None,
            };
            node.spawn()?;
            nodes.push(node);
        }
        nodes.insert(0, first);
        Ok(nodes)
    }

    /// The variable that names the binary, and the binary (from it, else on the path).
    fn binary(&self) -> (&'static str, String) {
        let (variable, default) = match self.kind {
            Kind::Redis => ("RUSTSTREAM_REDIS_SERVER", "redis-server"),
            Kind::Nats => ("RUSTSTREAM_NATS_SERVER", "nats-server"),
            Kind::Mosquitto => ("RUSTSTREAM_MOSQUITTO", "mosquitto"),
            Kind::Postgres => return ("RUSTSTREAM_POSTGRES_BIN", postgres_bin("postgres")),
            Kind::Kafka | Kind::KafkaMemory => {
                let cache = std::env::var("RUSTSTREAM_CACHE")
                    .unwrap_or_else(|_| "/var/cache/ruststream".to_owned());
                let built = format!("{cache}/nisshi-0.8.1/bin/nisshi");
                return (
                    "RUSTSTREAM_NISSHI",
                    std::env::var("RUSTSTREAM_NISSHI").unwrap_or(built),
                );
            }
        };
        let binary = std::env::var(variable).unwrap_or_else(|_| default.to_owned());
        (variable, binary)
    }

    /// The command that runs it.
    fn command(&self, binary: &str) -> Command {
        let port = self.port.to_string();
        let mut command = Command::new(binary);
        match self.kind {
            Kind::Redis => command
                .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
                .args(["--appendonly", "yes", "--appendfsync", "always"])
                .arg("--dir"),
            Kind::Nats => command.args(["-js", "-a", "127.0.0.1", "-p", &port, "-sd"]),
            Kind::Mosquitto => {
                command
                    .arg("-c")
                    .arg(crate::mosquitto::config_path(&self.dir));
                return command;
            }
            Kind::Kafka | Kind::KafkaMemory => {
                let listener = format!("tcp://127.0.0.1:{port}");
                let advertised = format!("tcp://127.0.0.1:{}", self.advertised);
                let storage = match self.kind {
                    Kind::Kafka => storage(&database(self.store)),
                    _ => "memory://nisshi/".to_owned(),
                };
                command
                    .args(["broker", "--listener-url", &listener])
                    .args(["--advertised-listener-url", &advertised])
                    .args(["--storage-engine", &storage])
                    .args(["--group-initial-rebalance-delay", "0s"]);
                return command;
            }
            Kind::Postgres => {
                let mut as_postgres = as_postgres();
                as_postgres
                    .arg(binary)
                    .args(["-p", &port, "-c", "listen_addresses=127.0.0.1"])
                    .args(["-c", "fsync=on", "-c", "unix_socket_directories="])
                    .arg("-D")
                    .arg(&self.dir)
                    // Its own process group: the kill takes every process of it.
                    .process_group(0);
                return as_postgres;
            }
        };
        command.arg(&self.dir);
        command
    }

    /// Whether it answers.
    fn ready(&self) -> bool {
        match self.kind {
            Kind::Redis => {
                crate::pending::redis_cli(&self.url(), &["PING"]).is_ok_and(|r| r.trim() == "PONG")
            }
            Kind::Nats | Kind::Kafka | Kind::KafkaMemory | Kind::Mosquitto => {
                std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            }
            Kind::Postgres => Command::new(postgres_bin("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success()),
        }
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let (variable, binary) = self.binary();
        let child = self
            .command(&binary)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                std::io::Error::other(format!(
                    "cannot run {binary} ({e}): install it or set {variable}"
                ))
            })?;
        self.child = Some(child);
        for _ in 0..200 {
            if self.ready() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(std::io::Error::other(format!(
            "{binary} did not start on port {}",
            self.port
        )))
    }

    /// `redis://`, `nats://`, `kafka://` or `mqtt://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        let scheme = match self.kind {
            Kind::Redis => "redis",
            Kind::Nats => "nats",
            Kind::Kafka | Kind::KafkaMemory => "kafka",
            Kind::Mosquitto => "mqtt",
            Kind::Postgres => {
                return format!("postgres://postgres@127.0.0.1:{}/postgres", self.port);
            }
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// SIGKILL (PostgreSQL: every process of its group, and waits until none is left,
    /// so that a restart finds its shared memory free).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.kind == Kind::Postgres {
                let group = format!("-{}", child.id());
                let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
                let _ = child.wait();
                for _ in 0..200 {
                    let alive = Command::new("kill")
                        .args(["-0", "--", &group])
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success());
                    if !alive {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// When a Mosquitto last saved its state (ms), if it did.
    pub(crate) fn saved_at(&self) -> Option<u64> {
        match self.kind {
            Kind::Mosquitto => crate::mosquitto::saved_at(&self.dir),
            Kind::Redis | Kind::Nats | Kind::Postgres | Kind::Kafka | Kind::KafkaMemory => None,
        }
    }

    /// Starts it again on the same port and data.
    pub(crate) fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.spawn()
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.kind == Kind::Kafka && self.store == self.port {
            let drop = format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                database(self.port)
            );
            let _ = crate::pending::psql(&storage("postgres"), &drop);
        }
    }
}

/// A port free now on 127.0.0.1.
pub(crate) fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The database of the nisshi on `port`, on the machine's PostgreSQL.
fn database(port: u16) -> String {
    format!("soak_kafka_{port}")
}

/// The URL of `database` on the machine's PostgreSQL (`RUSTSTREAM_KAFKA_STORAGE`, else
/// `postgres://postgres@localhost`): nisshi's storage, and where the harness makes and
/// drops that database. `localhost`, not `127.0.0.1`: nisshi's PostgreSQL client checks
/// the server's name for TLS, and fails on an address.
fn storage(database: &str) -> String {
    let server = std::env::var("RUSTSTREAM_KAFKA_STORAGE")
        .unwrap_or_else(|_| "postgres://postgres@localhost".to_owned());
    format!("{}/{database}", server.trim_end_matches('/'))
}

/// A PostgreSQL program: `RUSTSTREAM_POSTGRES_BIN`'s, else the newest under
/// `/usr/lib/postgresql/<version>/bin` (Debian's layout), else on the path.
fn postgres_bin(program: &str) -> String {
    let dir = std::env::var("RUSTSTREAM_POSTGRES_BIN").ok().or_else(|| {
        let mut versions: Vec<u32> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        versions.sort_unstable();
        versions
            .last()
            .map(|v| format!("/usr/lib/postgresql/{v}/bin"))
    });
    match dir {
        Some(dir) => format!("{dir}/{program}"),
        None => program.to_owned(),
    }
}

/// A command run as the `postgres` user (PostgreSQL refuses to run as root).
fn as_postgres() -> Command {
    let mut command = Command::new("setpriv");
    command.args(["--reuid=postgres", "--regid=postgres", "--clear-groups"]);
    command
}

/// A new cluster in `dir`: owned by `postgres`, trust authentication.
fn initdb(dir: &std::path::Path) -> std::io::Result<()> {
    let chown = Command::new("chown")
        .arg("postgres:postgres")
        .arg(dir)
        .status()?;
    let made = as_postgres()
        .arg(postgres_bin("initdb"))
        .args(["-A", "trust", "-U", "postgres", "-D"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if chown.success() && made.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "initdb in {} failed (needs root, the postgres user and {})",
            dir.display(),
            postgres_bin("initdb")
        )))
    }
}
