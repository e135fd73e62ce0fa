//! A TCP proxy between the consumers and their broker that can cut connections: reset
//! every connection open now, or black-hole them all (stop forwarding, closing nothing)
//! until told to resume.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Forwards 127.0.0.1:`port` to a target; stops when dropped.
pub(crate) struct Proxy {
    pub(crate) port: u16,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    hole: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free port and forwards to `target` (`host:port`).
    pub(crate) async fn start(target: String) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (hole, _) = watch::channel(false);
        let accept = {
            let connections = connections.clone();
            let hole = hole.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&target).await else {
                        continue; // the client sees its connection closed, and tries again
                    };
                    let task = tokio::spawn(forward(client, server, hole.subscribe()));
                    let mut open = connections.lock().unwrap_or_else(PoisonError::into_inner);
                    open.retain(|c| !c.is_finished());
                    open.push(task);
                }
            })
        };
        Ok(Self {
            port,
            connections,
            hole,
            accept,
        })
    }

    /// Closes every connection open now; new ones are accepted.
    pub(crate) fn reset(&self) -> usize {
        let open = std::mem::take(
            &mut *self
                .connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let count = open.iter().filter(|c| !c.is_finished()).count();
        for connection in open {
            connection.abort();
        }
        count
    }

    /// While `true`, nothing is forwarded either way (bytes read are held), and
    /// nothing is closed.
    pub(crate) fn black_hole(&self, on: bool) {
        self.hole.send_replace(on);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset();
    }
}

async fn forward(client: TcpStream, server: TcpStream, hole: watch::Receiver<bool>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        () = pipe(client_read, server_write, hole.clone()) => {}
        () = pipe(server_read, client_write, hole) => {}
    }
}

async fn pipe(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut hole: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if hole.wait_for(|on| !on).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Bytes read just before the hole opened are held until it closes.
        if hole.wait_for(|on| !on).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
