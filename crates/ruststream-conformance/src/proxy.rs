//! A TCP proxy in front of a broker, for tests of what crosses the network: it cuts the
//! connections through it (a network blip), stops listening (the broker down: new
//! connections are refused) until it is let up again, stalls (a network that drops
//! everything: connections stay open and nothing crosses) until it resumes, or mutes
//! the broker (it runs what it is sent; its answers are thrown away).
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
    muted: watch::Sender<bool>,
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

    /// A proxy to the host and port of a broker's `url` (`scheme://[user@]host:port/…`).
    pub async fn to_url(url: &str) -> Self {
        Self::start(&host_port(url)).await
    }

    fn serving(listener: TcpListener, upstream: String) -> Self {
        let port = listener.local_addr().expect("an address").port();
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (down, mut watching) = watch::channel(false);
        let (stalled, _) = watch::channel(false);
        let (muted, _) = watch::channel(false);
        let (stall, mute) = (stalled.clone(), muted.clone());
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
                        let (stall, mute) = (stall.clone(), mute.clone());
                        let link = tokio::spawn(async move {
                            if let Ok(server) = TcpStream::connect(&upstream).await {
                                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                                let (from_client, to_client) = client.into_split();
                                let (from_server, to_server) = server.into_split();
                                let up = pump(from_client, to_server, stall.subscribe(), None);
                                let down = pump(from_server, to_client, stall.subscribe(), Some(mute.subscribe()));
                                tokio::select! {
                                    () = up => {}
                                    () = down => {}
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
            muted,
            task,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A broker's `url` through this proxy: its host and port replaced by the proxy's.
    pub fn through(&self, url: &str) -> String {
        url.replacen(&host_port(url), &format!("127.0.0.1:{}", self.port), 1)
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

    /// While `true`, the upstream's answers are read and thrown away: it runs what it
    /// is sent, and the client never hears back.
    pub fn mute(&self, mute: bool) {
        self.muted.send_replace(mute);
    }
}

/// The `host:port` of a URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

/// Copies `from` to `to` until either ends, holding each chunk while stalled, and
/// throwing it away while `muted`.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
    muted: Option<watch::Receiver<bool>>,
) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if muted.as_ref().is_some_and(|muted| *muted.borrow()) {
            continue;
        }
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
