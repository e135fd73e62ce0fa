//! A `nats-server` of the test's own, on a port of its own with a store directory of
//! its own, that the test can kill and start again (never the machine's 4222 server).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The `nats-server` binary: `RUSTSTREAM_NATS_SERVER`, default `nats-server` on `PATH`.
fn binary() -> String {
    std::env::var("RUSTSTREAM_NATS_SERVER").unwrap_or_else(|_| "nats-server".to_owned())
}

/// A server process with JetStream, killed when dropped.
pub struct Server {
    pub port: u16,
    store: PathBuf,
    child: Option<Child>,
}

impl Server {
    /// Starts one on a free port, with a fresh store directory.
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let store = std::env::temp_dir().join(super::unique("store"));
        let mut server = Self {
            port,
            store,
            child: None,
        };
        server.run();
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the process again (after `kill`), on the same port and store.
    pub fn run(&mut self) {
        let child = Command::new(binary())
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run {} ({error}): install nats-server (apt-get install nats-server), \
                     or set RUSTSTREAM_NATS_SERVER to its path",
                    binary()
                )
            });
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nats-server on port {} did not start", self.port);
    }

    /// Kills the process (SIGKILL), keeping its store.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}
