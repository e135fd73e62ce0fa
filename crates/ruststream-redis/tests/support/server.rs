//! A redis-server of a test's own, on a free port (never the shared one): for restarts
//! and for settings the shared server does not have (passwords, users).
//!
//! The server binary is `redis-server`, or `RUSTSTREAM_REDIS_SERVER` (e.g.
//! `valkey-server`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One restart test at a time: each runs a server of its own on a free port, and two
/// at once could be handed the same port.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether a server on `port` answers `PING` (or asks for a password first).
fn pong(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 5];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && (&reply == b"+PONG" || &reply == b"-NOAU")
}

/// A redis-server of this test's own; killed on drop.
pub struct Server {
    pub port: u16,
    dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl Server {
    pub fn start(persistent: bool) -> Self {
        Self::start_with(persistent, &[])
    }

    /// A server started with `args` added to its command line.
    pub fn start_with(persistent: bool, args: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("rst-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("data dir");
        let mut server = Self {
            port,
            dir,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            child: None,
        };
        server.spawn(persistent);
        server
    }

    fn spawn(&mut self, persistent: bool) {
        let binary =
            std::env::var("RUSTSTREAM_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let mut cmd = Command::new(&binary);
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&self.dir)
        .args(&self.args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if persistent {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot run {binary} ({e}): install redis-server or set RUSTSTREAM_REDIS_SERVER")
        });
        self.child = Some(child);
        // Wait until this very server answers (not another one that took the port).
        for _ in 0..100 {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("{binary} exited ({status}) on port {}", self.port);
            }
            if pong(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{binary} did not start on port {}", self.port);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self, persistent: bool) {
        self.kill();
        std::thread::sleep(Duration::from_millis(300));
        self.spawn(persistent);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
