//! A TCP forwarder to a real server that a test can break: cut every connection at
//! once, or swallow the server's answers first (the server still runs the commands, the
//! client never hears back), so that the client reconnects and replays what it sent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Default)]
struct Shared {
    connections: Mutex<Vec<JoinHandle<()>>>,
    mute: AtomicBool,
}

/// Forwards 127.0.0.1:`port` to the target; stops when dropped.
pub struct Proxy {
    pub port: u16,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Forwards to `target` (`host:port`).
    pub async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("local address").port();
        let shared = Arc::new(Shared::default());
        let target = target.to_owned();
        let accept = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let server = match TcpStream::connect(&target).await {
                        Ok(server) => server,
                        Err(error) => panic!("proxy cannot reach {target}: {error}"),
                    };
                    let task = tokio::spawn(forward(client, server, shared.clone()));
                    let mut connections = shared
                        .connections
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    connections.retain(|c| !c.is_finished());
                    connections.push(task);
                }
            })
        };
        Self {
            port,
            shared,
            accept,
        }
    }

    /// Forwards to the host and port of a `redis://` URL.
    pub async fn to_url(url: &str) -> Self {
        let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
        let host_port = rest.split('/').next().unwrap_or(rest);
        Self::start(host_port).await
    }

    /// The `redis://` URL through this proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// While `true`, the server's answers are read and thrown away.
    pub fn mute(&self, mute: bool) {
        self.shared.mute.store(mute, Ordering::SeqCst);
    }

    /// Closes every connection open now (new ones are accepted).
    pub fn reset(&self) {
        let connections = std::mem::take(
            &mut *self
                .shared
                .connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for connection in connections {
            connection.abort();
        }
    }

    /// Swallows the server's answers for `quiet`, then closes every connection and
    /// forwards answers again: whatever the client sent meanwhile ran on the server
    /// and was never answered.
    pub async fn lose_answers_then_reset(&self, quiet: std::time::Duration) {
        self.mute(true);
        tokio::time::sleep(quiet).await;
        self.reset();
        self.mute(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset();
    }
}

async fn forward(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if shared.mute.load(Ordering::SeqCst) {
                        continue;
                    }
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
