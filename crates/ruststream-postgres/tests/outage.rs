//! PostgreSQL away for a while (every connection cut and new ones refused, through a TCP
//! proxy): the consumer hands the runtime one error for the outage (the runtime logs
//! each as a WARN), not one per failed claim, and claims again once the server is back.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards connections to the server under test; while down, cuts them all and closes
/// each new one at once.
struct Proxy {
    port: u16,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    down: Arc<AtomicBool>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bound");
        let port = listener.local_addr().expect("address").port();
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let down = Arc::new(AtomicBool::new(false));
        let (kept, refusing) = (links.clone(), down.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if refusing.load(Ordering::SeqCst) {
                    continue;
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                kept.lock().expect("links").push(link);
            }
        });
        Self { port, links, down }
    }

    fn down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            for link in self.links.lock().expect("links").drain(..) {
                link.abort();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_one_error_not_one_per_claim() {
    let schema = support::unique_schema("outage");
    let direct = support::url_for(&schema, "");
    let (scheme, rest) = direct.split_once("://").expect("a url");
    let (credentials, rest) = rest.rsplit_once('@').map_or(("", rest), |(c, r)| (c, r));
    let (server, path) = rest.split_once('/').expect("a database");
    let proxy = Proxy::start(server.to_owned()).await;
    let at = if credentials.is_empty() {
        String::new()
    } else {
        format!("{credentials}@")
    };
    let through = format!("{scheme}://{at}127.0.0.1:{}/{path}", proxy.port);
    let producer = support::broker(&schema, "").await;
    let consumer = ruststream_postgres::PostgresBroker::connect(&through)
        .await
        .unwrap_or_else(|error| panic!("{}", support::missing(&error)));
    let mut stream = consumer
        .subscribe(SubscribeSpec::new("jobs"))
        .await
        .expect("subscribed")
        .deliveries;

    proxy.down(true);
    // Claims keep failing meanwhile (each waits for a connection up to 5 s).
    let mut errors = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(14);
    while let Ok(Some(item)) = tokio::time::timeout_at(until, stream.next()).await {
        errors += usize::from(item.is_err());
    }
    proxy.down(false);
    assert_eq!(errors, 1, "errors handed over for one outage");

    producer
        .publisher()
        .publish("jobs".into(), Message::new("after"))
        .await
        .expect("published");
    let delivery = match tokio::time::timeout(Duration::from_secs(20), stream.next()).await {
        Ok(Some(Ok(delivery))) => delivery,
        Ok(Some(Err(error))) => panic!("another error after the outage: {error}"),
        Ok(None) => panic!("the stream ended"),
        Err(_) => panic!("nothing within 20 s after the outage"),
    };
    assert_eq!(delivery.payload().as_ref(), b"after");
    delivery.settle(Settlement::Accept).await.expect("accepted");
    consumer.close().await;
    producer.close().await;
    support::drop_schema(&schema);
}
