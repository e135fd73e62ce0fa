//! A TCP proxy in front of a broker, for tests of what crosses the network: it cuts the
//! connections through it (a network blip), stops listening (the broker down: new
//! connections are refused) until it is let up again, or stalls (a network that drops
//! everything: connections stay open and nothing crosses) until it resumes.
//!
//! ```no_run
//! # async fn f() {
//! use ruststream_conformance::proxy::Proxy;
//!
//! let proxy = Proxy::start("127.0.0.1:5432").await;
//! let url = format!("postgres://postgres@127.0.0.1:{}/test", proxy.port());
//! proxy.down(); // every connection cut, new ones refused
//! proxy.up();
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// A proxy on a port of 127.0.0.1 to an upstream `host:port`; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    down: watch::Sender<bool>,
    stalled: watch::Sender<bool>,
    task: AbortHandle,
}

impl Proxy {
    /// A proxy on a free port to `upstream`.
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        Self::serving(listener, upstream.to_owned())
    }

    /// A proxy on `port` (a port a broker advertises, say) to `upstream`.
    pub async fn on(port: u16, upstream: &str) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the proxy's port");
        Self::serving(listener, upstream.to_owned())
    }

    fn serving(listener: TcpListener, upstream: String) -> Self {
        let port = listener.local_addr().expect("an address").port();
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (down, mut watching) = watch::channel(false);
        let (stalled, _) = watch::channel(false);
        let stall = stalled.clone();
        let kept = links.clone();
        let task = tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                let Some(open) = listener.take() else {
                    // Down: nothing listens, so a connection is refused, until it is up.
                    if watching.wait_for(|down| !*down).await.is_err() {
                        return;
                    }
                    match TcpListener::bind(("127.0.0.1", port)).await {
                        Ok(again) => listener = Some(again),
                        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                    }
                    continue;
                };
                tokio::select! {
                    accepted = open.accept() => {
                        listener = Some(open);
                        let Ok((client, _)) = accepted else { continue };
                        let upstream = upstream.clone();
                        let stall = stall.clone();
                        let link = tokio::spawn(async move {
                            if let Ok(server) = TcpStream::connect(&upstream).await {
                                let (from_client, to_client) = client.into_split();
                                let (from_server, to_server) = server.into_split();
                                tokio::select! {
                                    () = pump(from_client, to_server, stall.subscribe()) => {}
                                    () = pump(from_server, to_client, stall.subscribe()) => {}
                                }
                            }
                        });
                        kept.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(link.abort_handle());
                    }
                    changed = watching.wait_for(|down| *down) => {
                        drop(open);
                        if changed.is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .abort_handle();
        Self {
            port,
            links,
            down,
            stalled,
            task,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Drops every connection through it, as a dead network would; new ones are taken.
    pub fn cut(&self) {
        for link in self
            .links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            link.abort();
        }
    }

    /// Cuts every connection and stops listening: the broker is away.
    pub fn down(&self) {
        self.down.send_replace(true);
        self.cut();
    }

    /// Listens again after [`down`](Self::down).
    pub fn up(&self) {
        self.down.send_replace(false);
    }

    /// Forwards nothing either way from now on, closing nothing: a network that drops
    /// every packet. What was read meanwhile is held, not lost.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again after [`stall`](Self::stall), what was held first.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

/// Copies `from` to `to` until either ends, holding each chunk while stalled.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut stalled: watch::Receiver<bool>) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stalled.wait_for(|stalled| !*stalled).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}
