//! Requests from the client side: `Publisher::request` and its reply subscription.

use std::time::Duration;

use ruststream::core::{CORRELATION_ID, Message};
use ruststream::{Publisher, Reply, publisher::RequestError};
use tokio::task::JoinSet;

use super::{Numbered, sent};
use crate::Harness;
use crate::inbox::{WAIT, within};
use crate::service::Service;

/// How long the slow handler sleeps before it answers.
const SLOW: Duration = Duration::from_millis(1500);
/// How long a request to the slow handler waits.
const SHORT: Duration = Duration::from_millis(300);

/// A client on a connection of its own asks a service three handlers: one that doubles,
/// one that answers with a text, one that is slow once. One request gets its typed
/// reply; 100 concurrent ones each get their own; a request to the slow handler times
/// out, its late reply does not answer the next request there, and nothing is left
/// waiting; a text reply to a number request is a decode error; a reply with a
/// correlation id nobody waits for is dropped, and the replies after it still arrive.
pub async fn request_reply(h: &impl Harness) {
    let (double, text, slow) = (h.fresh_address(), h.fresh_address(), h.fresh_address());
    let mut service = Service::start(h, |app| {
        app.mount(h.mount(double.clone()), |item: Numbered| async move {
            Reply::new(Numbered { n: item.n * 2 })
        })
        .mount(h.mount(text.clone()), |_: Numbered| async move {
            Reply::new("not a number".to_owned())
        })
        .mount(h.mount(slow.clone()), |item: Numbered| async move {
            if item.n == 1 {
                tokio::time::sleep(SLOW).await;
            }
            Reply::new(item)
        })
    })
    .await;
    let client = h.broker().await;
    let publisher = Publisher::for_broker(client.clone());
    let name = h.name();

    // One request.
    let answer: Result<Numbered, _> = publisher
        .request(double.clone(), &Numbered { n: 21 }, WAIT)
        .await;
    match answer {
        Ok(answer) => assert_eq!(answer, Numbered { n: 42 }, "{name}: one request"),
        Err(error) => panic!("{name}: one request: {error}"),
    }

    // 100 at once, on one reply subscription.
    let mut requests = JoinSet::new();
    for n in 0..100u32 {
        let (publisher, to) = (publisher.clone(), double.clone());
        requests.spawn(async move {
            let answer: Result<Numbered, _> = publisher.request(to, &Numbered { n }, WAIT).await;
            (n, answer)
        });
    }
    let all = within("100 concurrent requests", async {
        let mut all = Vec::new();
        while let Some(done) = requests.join_next().await {
            all.push(done);
        }
        all
    })
    .await;
    assert_eq!(all.len(), 100, "{name}: every request finished");
    for done in all {
        let (n, answer) = done.unwrap_or_else(|e| panic!("{name}: request task: {e}"));
        match answer {
            Ok(answer) => assert_eq!(answer, Numbered { n: n * 2 }, "{name}: request {n}"),
            Err(error) => panic!("{name}: request {n} of 100: {error}"),
        }
    }
    assert_eq!(
        publisher.waiting_requests().await,
        0,
        "{name}: nothing left waiting"
    );

    // A timeout; the late reply does not answer the next request.
    let late: Result<Numbered, _> = publisher
        .request(slow.clone(), &Numbered { n: 1 }, SHORT)
        .await;
    assert!(
        matches!(late, Err(RequestError::Timeout { .. })),
        "{name}: a slow reply is a timeout, got {late:?}"
    );
    assert_eq!(
        publisher.waiting_requests().await,
        0,
        "{name}: a timed-out request is forgotten"
    );
    let next: Result<Numbered, _> = publisher
        .request(slow.clone(), &Numbered { n: 2 }, WAIT)
        .await;
    match next {
        Ok(next) => assert_eq!(
            next,
            Numbered { n: 2 },
            "{name}: the reply after a late one"
        ),
        Err(error) => panic!("{name}: the request after a timeout: {error}"),
    }
    tokio::time::sleep(SLOW).await; // the late reply has come and gone

    // A reply that does not decode.
    let bad: Result<Numbered, _> = publisher
        .request(text.clone(), &Numbered { n: 3 }, WAIT)
        .await;
    match bad {
        Err(RequestError::Decode { address, .. }) => {
            assert_eq!(
                address,
                text.to_string(),
                "{name}: the error names the address"
            );
        }
        other => panic!("{name}: a text reply to a number request: {other:?}"),
    }

    // A reply nobody waits for.
    let reply_to = match publisher.reply_address().await {
        Ok(address) => address,
        Err(error) => panic!("{name}: reply address: {error}"),
    };
    let stray = Message::new("{\"n\":7}").with_header(CORRELATION_ID, "nobody-waits-for-this");
    sent(
        h,
        &reply_to,
        publisher.publish_message(reply_to.clone(), stray),
    )
    .await;
    let after: Result<Numbered, _> = publisher
        .request(double.clone(), &Numbered { n: 5 }, WAIT)
        .await;
    match after {
        Ok(after) => assert_eq!(after, Numbered { n: 10 }, "{name}: after a stray reply"),
        Err(error) => panic!("{name}: the request after a stray reply: {error}"),
    }
    assert_eq!(
        publisher.waiting_requests().await,
        0,
        "{name}: nothing left waiting"
    );

    within("closing the client", client.close()).await;
    service.stop_ok().await;
}
