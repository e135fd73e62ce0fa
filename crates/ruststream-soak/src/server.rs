//! A server of the harness's own, on a free port, with its data in a directory of its
//! own: the one a server-kill scenario kills and starts again (never the machine's
//! servers, which others use). A redis-server with AOF `appendfsync always` for the
//! Redis-kill scenario; a nats-server with JetStream for the NATS restart scenario.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Redis,
    Nats,
}

/// A server the harness runs; killed on drop, its data removed.
pub(crate) struct OwnServer {
    kind: Kind,
    pub(crate) port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl OwnServer {
    /// Starts one of `kind` with its data in `dir`.
    pub(crate) fn start(kind: Kind, dir: PathBuf) -> std::io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        std::fs::create_dir_all(&dir)?;
        let mut server = Self {
            kind,
            port,
            dir,
            child: None,
        };
        server.spawn()?;
        Ok(server)
    }

    /// The variable that names the binary, and the binary (from it, else on the path).
    fn binary(&self) -> (&'static str, String) {
        let (variable, default) = match self.kind {
            Kind::Redis => ("RUSTSTREAM_REDIS_SERVER", "redis-server"),
            Kind::Nats => ("RUSTSTREAM_NATS_SERVER", "nats-server"),
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
            Kind::Nats => std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok(),
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

    /// `redis://127.0.0.1:PORT` or `nats://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        let scheme = match self.kind {
            Kind::Redis => "redis",
            Kind::Nats => "nats",
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// SIGKILL.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
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
    }
}
