//! A raw AMQP 1.0 sender: frames written by hand over TCP, to send message bytes no
//! client library would write (values that claim more bytes than they have).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the broker answered to a raw transfer.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// A disposition with `accepted`.
    Accepted,
    /// Anything else (another outcome, a detach, end or close), by its descriptor.
    Refused(u64),
}

/// Sends `message` (encoded sections, as they go on the wire) to `/queues/<queue>` over
/// frames of at most `frame` message bytes, with SASL PLAIN `user`/`password`, and
/// returns the broker's answer.
pub async fn send(
    host_port: &str,
    user: &str,
    password: &str,
    queue: &str,
    message: &[u8],
    frame: usize,
) -> Answer {
    let mut s = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(host_port))
        .await
        .expect("connect in time")
        .expect("connect");
    s.write_all(b"AMQP\x03\x01\x00\x00")
        .await
        .expect("sasl header");
    read_header(&mut s).await;
    let _ = read_frame(&mut s).await; // sasl-mechanisms
    let mut response = vec![0u8];
    response.extend_from_slice(user.as_bytes());
    response.push(0);
    response.extend_from_slice(password.as_bytes());
    let init = list(0x41, &[sym("PLAIN"), vbin(&response)]);
    write_frame(&mut s, 1, 0, &init).await;
    let _ = read_frame(&mut s).await; // sasl-outcome
    s.write_all(b"AMQP\x00\x01\x00\x00")
        .await
        .expect("amqp header");
    read_header(&mut s).await;
    write_frame(&mut s, 0, 0, &list(0x10, &[str8("raw-sender")])).await;
    let window = vec![0x70, 0, 0, 0x13, 0x88]; // uint 5000
    let begin = list(0x11, &[vec![0x40], vec![0x43], window.clone(), window]);
    write_frame(&mut s, 0, 0, &begin).await;
    let target = list(0x29, &[str8(&format!("/queues/{queue}"))]);
    let attach = list(
        0x12,
        &[
            str8("raw-link"),
            vec![0x43],      // handle 0
            vec![0x42],      // role sender
            vec![0x40],      // snd-settle-mode
            vec![0x40],      // rcv-settle-mode
            list(0x28, &[]), // source
            target,          // target
            vec![0x40],      // unsettled
            vec![0x42],      // incomplete-unsettled
            vec![0x43],      // initial-delivery-count 0
        ],
    );
    write_frame(&mut s, 0, 0, &attach).await;
    // Credit comes in a flow frame.
    loop {
        match read_frame(&mut s).await.map(|f| f.0) {
            Some(0x13) => break,
            Some(0x10..=0x12) => continue,
            other => return Answer::Refused(other.unwrap_or(0)),
        }
    }
    let chunks: Vec<&[u8]> = message.chunks(frame.max(1)).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let more = i + 1 < chunks.len();
        let transfer = list(
            0x14,
            &[
                vec![0x43],    // handle 0
                vec![0x43],    // delivery-id 0
                vbin(b"\x01"), // delivery-tag
                vec![0x43],    // message-format 0
                vec![0x42],    // settled false
                vec![if more { 0x41 } else { 0x42 }],
            ],
        );
        let mut body = transfer;
        body.extend_from_slice(chunk);
        write_frame(&mut s, 0, 0, &body).await;
    }
    let answer = loop {
        match read_frame(&mut s).await {
            // accepted is the described list 0x24; anything else is a refusal.
            Some((0x15, body)) if body.windows(3).any(|w| w == [0x00, 0x53, 0x24]) => {
                break Answer::Accepted;
            }
            Some((0x13, _)) => continue, // flow
            other => break Answer::Refused(other.map_or(0, |f| f.0)),
        }
    };
    write_frame(&mut s, 0, 0, &list(0x18, &[])).await;
    answer
}

async fn read_header(s: &mut TcpStream) {
    let mut header = [0u8; 8];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut header))
        .await
        .expect("header in time")
        .expect("header");
    assert_eq!(&header[..4], b"AMQP", "protocol header");
}

/// Reads one frame past any empty one: its performative's descriptor and its body;
/// `None` at the end of the stream.
async fn read_frame(s: &mut TcpStream) -> Option<(u64, Vec<u8>)> {
    loop {
        let mut size = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut size))
            .await
            .expect("a frame in time")
            .ok()?;
        let size = u32::from_be_bytes(size) as usize;
        let mut rest = vec![0u8; size.checked_sub(4)?];
        s.read_exact(&mut rest).await.ok()?;
        let doff = usize::from(rest[0]) * 4;
        let body = rest.get(doff.checked_sub(4)?..)?.to_vec();
        if body.is_empty() {
            continue; // heartbeat
        }
        let code = match body.get(..3) {
            Some([0x00, 0x53, code]) => u64::from(*code),
            _ => 0,
        };
        return Some((code, body));
    }
}

async fn write_frame(s: &mut TcpStream, kind: u8, channel: u16, body: &[u8]) {
    let mut frame = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0x02, kind]);
    frame.extend_from_slice(&channel.to_be_bytes());
    frame.extend_from_slice(body);
    s.write_all(&frame).await.expect("write frame");
}

/// A described list (`descriptor`, a small ulong) of encoded `fields`.
fn list(descriptor: u8, fields: &[Vec<u8>]) -> Vec<u8> {
    let items: Vec<u8> = fields.concat();
    let mut out = vec![0x00, 0x53, descriptor, 0xd0];
    out.extend_from_slice(&((items.len() + 4) as u32).to_be_bytes());
    out.extend_from_slice(&(fields.len() as u32).to_be_bytes());
    out.extend_from_slice(&items);
    out
}

fn str8(s: &str) -> Vec<u8> {
    let mut out = vec![0xa1, s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

fn sym(s: &str) -> Vec<u8> {
    let mut out = vec![0xa3, s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

fn vbin(b: &[u8]) -> Vec<u8> {
    let mut out = vec![0xa0, b.len() as u8];
    out.extend_from_slice(b);
    out
}
