//! The HTTP endpoint: `/health`, `/ready`, `/metrics`.
//!
//! A minimal HTTP/1.1 server on tokio: three `GET` routes with small bodies, one request
//! per connection. Hand-written rather than hyper: it needs no more than this, and adds
//! no dependency to a service that asks for it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Metrics, Readiness};

/// The largest request head read; a longer one is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `/health` (200 while the service's runtime runs), `/ready` (200 when
/// `readiness` says so, else 503 with the reason) and, given `metrics`, `/metrics`
/// (Prometheus text) on `listener`, until the future is dropped.
///
/// [`App::http`](crate::App::http) runs it for a service; call it yourself to serve on a
/// listener of your own.
pub async fn serve(listener: TcpListener, readiness: Readiness, metrics: Option<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let readiness = readiness.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _ = answer(stream, &readiness, metrics.as_ref()).await;
        });
    }
}

async fn answer(
    mut stream: TcpStream,
    readiness: &Readiness,
    metrics: Option<&Metrics>,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => {
            return respond(&mut stream, 431, "text/plain", "request too large\n").await;
        }
        Ok(Err(error)) => return Err(error),
        Err(_) => return Ok(()),
    };
    let mut words = head.split(' ');
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    if method != "GET" {
        return respond(&mut stream, 405, "text/plain", "only GET\n").await;
    }
    match path {
        "/health" => respond(&mut stream, 200, "text/plain", "ok\n").await,
        "/ready" if readiness.is_ready() => {
            respond(&mut stream, 200, "text/plain", "ready\n").await
        }
        "/ready" => {
            let mut body = String::from("not ready:");
            if readiness.is_stopping() {
                body.push_str(" stopping;");
            }
            for address in readiness.detached() {
                body.push_str(" reconnecting ");
                body.push_str(address.as_str());
                body.push(';');
            }
            for (subscription, to, n) in readiness.failing_copies() {
                use std::fmt::Write as _;
                let _ = write!(
                    body,
                    " {n} cop{} from {subscription} not published to {to};",
                    if n == 1 { "y" } else { "ies" }
                );
            }
            body.push('\n');
            respond(&mut stream, 503, "text/plain", &body).await
        }
        "/metrics" => match metrics {
            Some(metrics) => {
                let body = metrics.render();
                respond(&mut stream, 200, "text/plain; version=0.0.4", &body).await
            }
            None => respond(&mut stream, 404, "text/plain", "no metrics\n").await,
        },
        _ => respond(&mut stream, 404, "text/plain", "not found\n").await,
    }
}

/// The request line, once the whole head is in (`None`: too large).
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]);
            return Ok(Some(head.lines().next().unwrap_or("").to_owned()));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
