//! A message whose values claim more bytes than it has (a `vbin32` or `str32` length of
//! 4 GiB in a message of a few bytes), sent raw to RabbitMQ 4.0 (4.3 refuses it at
//! publish, which this test checks there instead), reaches a consumer whose
//! process may not allocate that much (a virtual memory limit, as in a container with
//! `ulimit -v` or strict overcommit). fe2o3-amqp 0.18 would allocate the claimed length
//! while decoding it, fail and abort the process; the transport's size check refuses
//! the message first, so the decode-failure policy settles it and the service goes on.
//! Its own test binary: the limit is on the whole process.

mod support;

use std::time::Duration;

use fe2o3_amqp::types::messaging::{Data, Message as AmqpMessage};
use fe2o3_amqp::types::primitives::Binary;
use fe2o3_amqp::{Connection, Sender, Session};
use ruststream::{App, Mount, Raw, ack};
use ruststream_conformance::logs::logs;
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("claims");
}

/// A line of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// Limits this process's address space to what it uses now plus `extra` bytes.
fn limit_address_space(extra: u64) {
    let limit = status_kib("VmSize:") * 1024 + extra;
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--as={limit}:{limit}"))
        .status()
        .expect("run prlimit (util-linux)");
    assert!(status.success(), "prlimit failed");
}

/// A body section with one value of type `code` (`0xb0` vbin32 in a data section,
/// `0xb1` str32 in an amqp-value section) that claims `claimed` bytes and holds `held`.
fn claiming(code: u8, claimed: u32, held: usize) -> Vec<u8> {
    let section = if code == 0xb0 { 0x75 } else { 0x77 };
    let mut m = vec![0x00, 0x53, section, code];
    m.extend_from_slice(&claimed.to_be_bytes());
    m.extend(std::iter::repeat_n(b'x', held));
    m
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// Sends `body` in one data section with fe2o3-amqp.
async fn send_data(queue: &str, body: &[u8]) {
    let mut connection = Connection::open("claims-sender", url().as_str())
        .await
        .expect("raw connection");
    let mut session = Session::begin(&mut connection).await.expect("session");
    let mut sender = Sender::attach(&mut session, "raw", format!("/queues/{queue}"))
        .await
        .expect("attach");
    let message = AmqpMessage::builder()
        .data(Data(Binary::from(body.to_vec())))
        .build();
    let outcome = sender.send(message).await.expect("send");
    assert!(outcome.is_accepted());
    let _ = sender.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
}

#[tokio::test]
async fn a_message_claiming_gigabytes_is_refused_before_decoding_and_the_consumer_goes_on() {
    let lines = logs();
    let queue = q("claims");
    let address = url();
    let host_port = address
        .rsplit('@')
        .next()
        .and_then(|h| h.split('/').next())
        .expect("host:port");
    // RabbitMQ 4.0 does not read a body: it takes them all. From 4.3 it parses what it
    // takes and refuses them at publish (its stricter parsing), so no consumer sees them
    // and the size check is left untried there. Values in one frame (fe2o3-amqp's slice
    // reader) and over 80 frames (its IoReader); a vbin32 in a data section and a str32
    // in an amqp-value section.
    let parsed = release() >= (4, 3);
    for code in [0xb0, 0xb1] {
        for (held, frame) in [(16, 4096), (320_000, 4000)] {
            let message = claiming(code, 0xffff_ff00, held);
            let answer =
                support::raw::send(host_port, "guest", "guest", &queue, &message, frame).await;
            if parsed {
                assert!(
                    matches!(answer, support::raw::Answer::Refused(_)),
                    "{code:x}: {held} bytes: {answer:?}"
                );
            } else {
                assert_eq!(
                    answer,
                    support::raw::Answer::Accepted,
                    "{code:x}: {held} bytes"
                );
            }
        }
    }
    let hostile = if parsed { 0 } else { 4 };
    send_data(&queue, b"good").await;
    // From here the process may not take 4 GiB more address space.
    limit_address_space(2 << 30);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |Raw(body): Raw| {
        let _ = tx.send(body);
        async { ack() }
    };
    let running = App::new(broker().await)
        .mount(Mount::new(queue.as_str()), handler)
        .start()
        .await
        .expect("starts");
    let body = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("the good message within 20 s")
        .expect("running");
    assert_eq!(
        &body[..],
        b"good",
        "only the good message reaches the handler"
    );
    let refused = lines
        .text()
        .matches("amqp message refused before decoding")
        .count();
    assert_eq!(refused, hostile, "{}", lines.text());
    let policy = lines.text().matches("payload did not decode").count();
    assert_eq!(
        policy,
        hostile,
        "the decode policy settled each:\n{}",
        lines.text()
    );
    if !parsed {
        let line = lines
            .line_with(&["payload did not decode", &format!("address={queue}")])
            .unwrap_or_else(|| panic!("no policy line:\n{}", lines.text()));
        assert!(line.contains("undecodable amqp message"), "{line}");
    }
    running.stop().await.expect("a graceful stop");
    empty(&broker().await, &queue, 500).await;
}
