//! A nats-server of the harness's own, on a free port, with JetStream and a store
//! directory of its own: the one the NATS restart scenario kills and starts again
//! (never the machine's server on 4222, which others use).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A nats-server the harness runs; killed on drop, its store removed.
pub(crate) struct NatsServer {
    port: u16,
    store: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts one with its JetStream store in `store`.
    pub(crate) fn start(store: PathBuf) -> std::io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        std::fs::create_dir_all(&store)?;
        let mut server = Self {
            port,
            store,
            child: None,
        };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let binary =
            std::env::var("RUSTSTREAM_NATS_SERVER").unwrap_or_else(|_| "nats-server".to_owned());
        let child = Command::new(&binary)
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
            .map_err(|e| {
                std::io::Error::other(format!(
                    "cannot run {binary} ({e}): install nats-server or set RUSTSTREAM_NATS_SERVER"
                ))
            })?;
        self.child = Some(child);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(std::io::Error::other(format!(
            "{binary} did not start on port {}",
            self.port
        )))
    }

    /// `nats://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// SIGKILL.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and store.
    pub(crate) fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.spawn()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}
