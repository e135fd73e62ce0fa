//! The broker's version, from the server properties of `connection.start`.
//!
//! lapin 4.12 reads the server properties and drops them, and a queue's defaults depend
//! on the version (RabbitMQ 4 gives a quorum queue without `x-delivery-limit` a limit of
//! 20; RabbitMQ 3 none). So the adapter opens one short connection of its own and reads
//! them: protocol header, `connection.start` (the properties), `start-ok` (PLAIN, the
//! URL's user), `tune-ok`, `open` of the URL's vhost, then `close`: a whole handshake
//! and a clean close, so that the broker logs no dropped client. `amqps://` and the
//! `EXTERNAL` mechanism are not read (the version stays unknown, and the adapter says so
//! where it matters).

use std::time::Duration;

use lapin::types::{AMQPValue, FieldTable};
use lapin::uri::{AMQPScheme, AMQPUri, SASLMechanism};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(5);
const FRAME_END: u8 = 0xCE;

/// What the broker said it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Server {
    /// `product` (RabbitMQ).
    pub(crate) product: String,
    /// `version` (`4.0.5`).
    pub(crate) version: String,
}

impl Server {
    /// The major version (`4` of `4.0.5`), if the version reads.
    pub(crate) fn major(&self) -> Option<u32> {
        self.version.split('.').next()?.parse().ok()
    }
}

/// The broker's major version, read at the first subscription that needs it.
#[derive(Debug)]
pub(crate) struct Version {
    /// The URL's broker first, then the failover addresses.
    uris: Vec<AMQPUri>,
    /// `Some` once read (`Some(None)`: could not be).
    major: tokio::sync::Mutex<Option<Option<u32>>>,
}

impl Version {
    pub(crate) fn new(uris: Vec<AMQPUri>) -> Self {
        Self {
            uris,
            major: tokio::sync::Mutex::new(None),
        }
    }

    /// The major version of the first broker that answers, `None` (logged once) if none
    /// is read.
    pub(crate) async fn major(&self) -> Option<u32> {
        let mut major = self.major.lock().await;
        if let Some(known) = *major {
            return known;
        }
        let mut why = Vec::new();
        for uri in &self.uris {
            match read(uri).await {
                Ok(server) => {
                    tracing::info!(product = %server.product, version = %server.version,
                        "lapin: broker version");
                    *major = Some(server.major());
                    return server.major();
                }
                Err(e) => why.push(e),
            }
        }
        tracing::warn!(reason = %why.join("; "),
            "lapin: cannot read the broker's version; its queue defaults are not known");
        *major = Some(None);
        None
    }
}

/// The server properties of the broker at `uri`; `Err` says why they were not read.
pub(crate) async fn read(uri: &AMQPUri) -> Result<Server, String> {
    if uri.scheme != AMQPScheme::AMQP {
        return Err("not read over amqps://".into());
    }
    if uri
        .query
        .auth_mechanism
        .is_some_and(|m| m != SASLMechanism::Plain)
    {
        return Err("not read with another mechanism than PLAIN".into());
    }
    tokio::time::timeout(TIMEOUT, handshake(uri))
        .await
        .map_err(|_| format!("no answer within {TIMEOUT:?}"))?
}

async fn handshake(uri: &AMQPUri) -> Result<Server, String> {
    let io = |e: std::io::Error| e.to_string();
    let mut stream = TcpStream::connect((uri.authority.host.as_str(), uri.authority.port))
        .await
        .map_err(io)?;
    stream
        .write_all(b"AMQP\x00\x00\x09\x01")
        .await
        .map_err(io)?;
    let start = method(&mut stream, (10, 10)).await?;
    let properties = start
        .get(2..)
        .and_then(|t| lapin::types::parsing::parse_field_table(t).ok())
        .map(|(_, table)| table)
        .ok_or("unreadable connection.start")?;
    let server = Server {
        product: text(&properties, "product"),
        version: text(&properties, "version"),
    };
    // start-ok: client properties, mechanism, response, locale.
    let mut table = Vec::new();
    short(&mut table, b"connection_name");
    table.push(b'S');
    long(&mut table, b"ruststream version check");
    let mut body = Vec::new();
    long(&mut body, &table);
    short(&mut body, b"PLAIN");
    let user = &uri.authority.userinfo;
    let response = format!("\0{}\0{}", user.username, user.password);
    long(&mut body, response.as_bytes());
    short(&mut body, b"en_US");
    send(&mut stream, (10, 11), &body).await?;
    let tune = method(&mut stream, (10, 30)).await?;
    // tune-ok: the broker's channel and frame maximums, no heartbeats.
    let mut body = tune.get(..6).ok_or("unreadable connection.tune")?.to_vec();
    body.extend_from_slice(&0u16.to_be_bytes());
    send(&mut stream, (10, 31), &body).await?;
    let mut body = Vec::new();
    short(&mut body, uri.vhost.as_bytes());
    short(&mut body, b"");
    body.push(0);
    send(&mut stream, (10, 40), &body).await?;
    method(&mut stream, (10, 41)).await?;
    let mut body = 200u16.to_be_bytes().to_vec();
    short(&mut body, b"checked");
    body.extend_from_slice(&[0, 0, 0, 0]);
    send(&mut stream, (10, 50), &body).await?;
    method(&mut stream, (10, 51)).await?;
    Ok(server)
}

fn text(table: &FieldTable, key: &str) -> String {
    match table.inner().get(key) {
        Some(AMQPValue::LongString(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        _ => String::new(),
    }
}

fn short(out: &mut Vec<u8>, s: &[u8]) {
    out.push(u8::try_from(s.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(&s[..s.len().min(255)]);
}

fn long(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(s);
}

/// Sends a method frame on channel 0.
async fn send(stream: &mut TcpStream, (class, id): (u16, u16), body: &[u8]) -> Result<(), String> {
    let mut frame = vec![1, 0, 0];
    let size = u32::try_from(body.len() + 4).map_err(|e| e.to_string())?;
    frame.extend_from_slice(&size.to_be_bytes());
    frame.extend_from_slice(&class.to_be_bytes());
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(body);
    frame.push(FRAME_END);
    stream.write_all(&frame).await.map_err(|e| e.to_string())
}

/// Reads the next frame, which must be method `want` on channel 0: its arguments.
async fn method(stream: &mut TcpStream, want: (u16, u16)) -> Result<Vec<u8>, String> {
    let mut head = [0u8; 7];
    stream
        .read_exact(&mut head)
        .await
        .map_err(|e| format!("the broker closed the connection ({e})"))?;
    let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
    if head[0] != 1 || !(4..=1 << 20).contains(&size) {
        return Err(format!("unexpected frame (type {}, {size} bytes)", head[0]));
    }
    let mut payload = vec![0u8; size + 1];
    stream
        .read_exact(&mut payload)
        .await
        .map_err(|e| e.to_string())?;
    let got = (
        u16::from_be_bytes([payload[0], payload[1]]),
        u16::from_be_bytes([payload[2], payload[3]]),
    );
    if got == (10, 50) {
        return Err("the broker refused the connection".into());
    }
    if got != want || payload[size] != FRAME_END {
        return Err(format!("expected method {want:?}, got {got:?}"));
    }
    payload.truncate(size);
    Ok(payload.split_off(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version() {
        let server = |v: &str| Server {
            product: "RabbitMQ".into(),
            version: v.into(),
        };
        assert_eq!(server("4.0.5").major(), Some(4));
        assert_eq!(server("3.10.8").major(), Some(3));
        assert_eq!(server("").major(), None);
    }
}
