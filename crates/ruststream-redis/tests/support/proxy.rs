//! A TCP proxy in front of the real server that can reset every connection through it,
//! as a network failure or a load balancer would.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards `127.0.0.1:<port>` to the server; [`Proxy::reset`] cuts every connection.
pub struct Proxy {
    pub addr: SocketAddr,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let connections = connections.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let upstream = upstream.clone();
                    let task = tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(&upstream).await else {
                            return;
                        };
                        // A reset, not a clean close, when the task is aborted. A zero
                        // linger never blocks the drop (it sends RST at once).
                        #[allow(deprecated)]
                        {
                            let _ = client.set_linger(Some(Duration::ZERO));
                            let _ = server.set_linger(Some(Duration::ZERO));
                        }
                        let (mut client, mut server) = (client, server);
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    });
                    connections
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(task);
                }
            }
        });
        Self {
            addr,
            connections,
            accept,
        }
    }

    /// Resets every connection open through the proxy now; new ones are accepted.
    pub fn reset(&self) -> usize {
        let tasks: Vec<_> = std::mem::take(
            &mut *self
                .connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let n = tasks.len();
        for task in tasks {
            task.abort();
        }
        n
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset();
    }
}
