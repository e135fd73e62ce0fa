//! Concurrency per subscription: one at a time in order, N workers, N ordered lanes, and
//! back-pressure (deliveries are not taken while the handlers are full).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{App, Delivery, Mount};
use ruststream_core::Broker;
use support::{Gauge, queue, settle, wait_until};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Events `(key, seq, started)` in the order they happened.
type Log = Arc<Mutex<Vec<(u64, u32, bool)>>>;

fn push(log: &Log, event: (u64, u32, bool)) {
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(event);
}

fn events(log: &Log) -> Vec<(u64, u32, bool)> {
    log.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

fn key_of(d: &Delivery) -> u64 {
    d.headers()
        .get_str("key")
        .and_then(|k| k.parse().ok())
        .unwrap_or(0)
}

/// Sets a mount's concurrency.
type Concurrency = fn(Mount) -> Mount;

/// By default one delivery at a time, in the order published, whatever each one takes.
#[tokio::test(start_paused = true)]
async fn sequential_by_default_in_order() {
    let (gauge, log) = (Gauge::default(), Log::default());
    let (g, l) = (gauge.clone(), log.clone());
    let app = TestApp::start(|b| {
        App::new(b).mount("q", move |seq: u32| {
            let (g, l) = (g.clone(), l.clone());
            async move {
                let _running = g.enter();
                push(&l, (0, seq, true));
                // Earlier messages take longer: a concurrent runtime would reorder them.
                tokio::time::sleep(Duration::from_millis(u64::from(60 - seq * 10))).await;
                push(&l, (0, seq, false));
            }
        })
    })
    .await;
    for seq in 0..6 {
        app.publish("q", &seq).await;
    }
    settle(&app).await;
    let expected: Vec<_> = (0..6)
        .flat_map(|seq| [(0, seq, true), (0, seq, false)])
        .collect();
    assert_eq!(events(&log), expected);
    assert_eq!(gauge.max(), 1);
    app.stop().await.expect("clean stop");
}

/// `workers(n)` runs up to n at once, and never more.
#[tokio::test(start_paused = true)]
async fn workers_run_up_to_n_at_once() {
    for n in [2_usize, 4] {
        let gauge = Gauge::default();
        let g = gauge.clone();
        let app = TestApp::start(|b| {
            App::new(b).mount(Mount::new("q").workers(n), move |_: u32| {
                let g = g.clone();
                async move {
                    let _running = g.enter();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        })
        .await;
        let started = Instant::now();
        for i in 0..10 {
            app.publish("q", &i).await;
        }
        settle(&app).await;
        assert_eq!(gauge.max(), n, "workers({n})");
        assert_eq!(gauge.started(), 10);
        let rounds = 10_u32.div_ceil(u32::try_from(n).expect("small"));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100) * rounds
                && took < Duration::from_millis(100) * rounds + Duration::from_millis(50),
            "workers({n}): 10 messages of 100 ms took {took:?}"
        );
        assert!(app.broker().is_idle());
        app.stop().await.expect("clean stop");
    }
}

/// `lanes(n, key)`: deliveries with the same key one at a time in order; different keys at
/// the same time.
#[tokio::test(start_paused = true)]
async fn lanes_keep_per_key_order_while_keys_overlap() {
    let (gauge, log) = (Gauge::default(), Log::default());
    let per_key = [Gauge::default(), Gauge::default()];
    let (g, l, k) = (gauge.clone(), log.clone(), per_key.clone());
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").lanes(2, key_of),
            move |headers: ruststream::Headers, seq: u32| {
                let (g, l, k) = (g.clone(), l.clone(), k.clone());
                let key: u64 = headers
                    .get_str("key")
                    .and_then(|k| k.parse().ok())
                    .unwrap_or(9);
                async move {
                    let _running = g.enter();
                    let _in_key = k[usize::try_from(key).expect("small")].enter();
                    push(&l, (key, seq, true));
                    // Key 0 is slow, key 1 quick; later messages quicker than earlier ones.
                    let ms = if key == 0 { 50 } else { 10 } + 5 * u64::from(6 - seq);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    push(&l, (key, seq, false));
                }
            },
        )
    })
    .await;
    for seq in 0..6_u32 {
        for key in ["0", "1"] {
            app.publisher()
                .message("q", &seq)
                .header("key", key)
                .send()
                .await
                .expect("published");
        }
    }
    settle(&app).await;
    let all = events(&log);
    for key in [0, 1] {
        let starts: Vec<_> = all
            .iter()
            .filter(|e| e.0 == key && e.2)
            .map(|e| e.1)
            .collect();
        assert_eq!(starts, [0, 1, 2, 3, 4, 5], "key {key} in order");
        assert_eq!(per_key[key as usize].max(), 1, "key {key} one at a time");
    }
    assert_eq!(gauge.max(), 2, "the two keys overlapped");
    // The quick key finished before the slow one: the keys did not wait for each other.
    let last_of = |key| all.iter().rposition(|e| *e == (key, 5, false));
    assert!(last_of(1) < last_of(0), "{all:?}");
    app.stop().await.expect("clean stop");
}

/// Back-pressure: while the handlers are full, the subscription is not polled, so the
/// broker holds at most as many unsettled deliveries as can be handled (plus, for lanes,
/// what waits in the lanes), and the rest stay ready.
#[tokio::test(start_paused = true)]
async fn blocked_handlers_hold_back_the_subscription() {
    let modes: [(&str, Concurrency, usize, usize); 3] = [
        ("sequential", |m| m, 1, 1),
        ("workers(2)", |m| m.workers(2), 2, 2),
        // Two lanes: one being handled and one waiting in each, and one waiting for a lane.
        ("lanes(2)", |m| m.lanes(2, key_of), 2, 5),
    ];
    for (name, concurrency, handling, held) in modes {
        let broker = MemoryBroker::new();
        let publish = broker.publisher();
        for i in 0..10_u32 {
            let message = ruststream_core::Message::new(i.to_string())
                .with_header("key", if i % 2 == 0 { "0" } else { "1" });
            publish
                .publish("q".into(), message)
                .await
                .expect("published");
        }
        let (gauge, gate) = (Gauge::default(), Arc::new(Semaphore::new(0)));
        let (g, s) = (gauge.clone(), gate.clone());
        let app = TestApp::try_start(broker, |b| {
            App::new(b).mount(concurrency(Mount::new("q")), move |_: u32| {
                let (g, s) = (g.clone(), s.clone());
                async move {
                    let _running = g.enter();
                    let _permit = s.acquire().await.expect("open");
                }
            })
        })
        .await
        .expect("starts");
        wait_until("the handlers are full", || gauge.now() == handling).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let q = queue(app.broker(), "q");
        assert_eq!(gauge.started(), handling, "{name}");
        assert_eq!(
            (q.unsettled, q.ready),
            (held, 10 - held),
            "{name}: the broker holds back the rest"
        );
        gate.add_permits(10);
        settle(&app).await;
        assert_eq!(gauge.started(), 10, "{name}");
        assert!(app.broker().is_idle());
        app.stop().await.expect("clean stop");
    }
}

/// A stream that is always ready (a handler that retries at once on a broker that hands
/// the message straight back) does not hold its thread: a timer of another task still
/// fires, and the service stops.
#[tokio::test]
async fn an_always_ready_stream_lets_other_tasks_run() {
    let broker = MemoryBroker::new();
    let handled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let h = handled.clone();
    let app = App::new(broker.clone()).mount("spin", move |_: u32| {
        h.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { ruststream::retry() }
    });
    let publisher = app.publisher();
    let running = app.start().await.expect("starts");
    // A loop that held the thread would stop every timer here, the test's own included.
    let watched = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let w = watched.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        if !w.load(std::sync::atomic::Ordering::Acquire) {
            eprintln!("the handling loop held its thread for 30 s");
            std::process::exit(1);
        }
    });
    publisher.publish("spin", &1u32).await.expect("published");
    // On this single-threaded runtime the sleep only ends if the loop yields.
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::time::sleep(Duration::from_millis(50)),
    )
    .await
    .expect("the handling loop lets the timer run");
    assert!(
        handled.load(std::sync::atomic::Ordering::Relaxed) > 1,
        "it kept retrying"
    );
    tokio::time::timeout(Duration::from_secs(10), running.stop())
        .await
        .expect("stops in time")
        .expect("stops cleanly");
}

/// A sequential mount does not wait for the broker to confirm a bare settlement before
/// the next handler runs: the handlers still run one at a time and in order, the
/// settlements trail behind (counted in flight), and a stop waits until they are over.
#[tokio::test(start_paused = true)]
async fn sequential_settlements_trail_behind_the_handlers() {
    let memory = MemoryBroker::new();
    let broker = support::Faulty::new(memory.clone()).slow_settlement(Duration::from_secs(1));
    let (gauge, log) = (Gauge::default(), Log::default());
    let (g, l) = (gauge.clone(), log.clone());
    let app = App::new(broker).mount("q", move |seq: u32| {
        let (g, l) = (g.clone(), l.clone());
        async move {
            let _running = g.enter();
            push(&l, (0, seq, true));
            tokio::time::sleep(Duration::from_millis(10)).await;
            push(&l, (0, seq, false));
        }
    });
    let publisher = app.publisher();
    for seq in 0..20u32 {
        publisher.publish("q", &seq).await.expect("published");
    }
    let started = Instant::now();
    let running = app.start().await.expect("starts");
    wait_until("every handler ran", || events(&log).len() == 40).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the handlers did not wait for the settlements: {:?}",
        started.elapsed()
    );
    let expected: Vec<_> = (0..20)
        .flat_map(|seq| [(0, seq, true), (0, seq, false)])
        .collect();
    assert_eq!(events(&log), expected, "one at a time, in order");
    assert_eq!(gauge.max(), 1);
    assert!(
        queue(&memory, "q").unsettled > 1,
        "settlements are still under way: {:?}",
        queue(&memory, "q")
    );
    assert!(running.in_flight() > 1, "they count as in flight");
    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("stops in time")
        .expect("stops cleanly");
    let q = queue(&memory, "q");
    assert!(
        q.is_empty(),
        "every settlement went through before the stop: {q:?}"
    );
}

/// How many of 200 deliveries `mount` handles before the first settlement is over, on a
/// broker whose settlements take a second and that declares `declared` may trail; then
/// a stop, after which every one handled is settled.
async fn handled_before_a_settlement(declared: Option<usize>, mount: Mount) -> usize {
    let memory = MemoryBroker::new();
    let mut broker = support::Faulty::new(memory.clone()).slow_settlement(Duration::from_secs(1));
    if let Some(n) = declared {
        broker = broker.trailing(n);
    }
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let app = App::new(broker).mount(mount, move |_: u32| {
        let h = h.clone();
        async move {
            h.fetch_add(1, Ordering::Relaxed);
        }
    });
    let publisher = app.publisher();
    for seq in 0..200u32 {
        publisher.publish("q", &seq).await.expect("published");
    }
    let running = app.start().await.expect("starts");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = handled.load(Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(60), running.stop())
        .await
        .expect("stops in time")
        .expect("stops cleanly");
    let q = queue(&memory, "q");
    assert_eq!(
        q.unsettled, 0,
        "{declared:?}: every one handled is settled: {q:?}"
    );
    before
}

/// A sequential loop lets as many settlements trail as the broker declares
/// ([`Broker::trailing`]; 64 by default): with settlements that take a second, 200
/// handlers run at once where the broker declares 256, and the 66th waits for the first
/// settlement where it declares nothing.
#[tokio::test(start_paused = true)]
async fn a_broker_declares_how_many_settlements_trail() {
    let declared = handled_before_a_settlement(Some(256), Mount::new("q")).await;
    assert_eq!(declared, 200, "every handler ran before a settlement");
    let default = handled_before_a_settlement(None, Mount::new("q")).await;
    assert_eq!(default, 65, "one in hand and 64 trailing");
}

/// Workers share what the broker declares may trail: each of 4 workers lets 16 of 64
/// trail behind it (4 × 17 handlers before the first settlement is over), and none
/// where the broker declares nothing (4: each worker waits for its settlement).
#[tokio::test(start_paused = true)]
async fn workers_share_the_settlements_a_broker_lets_trail() {
    let workers = || Mount::new("q").workers(4);
    assert_eq!(
        handled_before_a_settlement(Some(64), workers()).await,
        4 * 17
    );
    assert_eq!(handled_before_a_settlement(None, workers()).await, 4);
}

/// The service's `after_settle` hooks do not make a sequential loop wait either: they are
/// told of each trailing settlement once the broker confirmed it.
#[tokio::test(start_paused = true)]
async fn hooks_learn_of_trailing_settlements_once_they_are_over() {
    let memory = MemoryBroker::new();
    let broker = support::Faulty::new(memory.clone()).slow_settlement(Duration::from_secs(1));
    let handled = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let told: Arc<Mutex<Vec<(u32, bool, Instant)>>> = Arc::default();
    let (h, t) = (handled.clone(), told.clone());
    let app = App::new(broker)
        .mount("q", move |_: u32| {
            h.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async {}
        })
        .after_settle(move |settled: &ruststream::Settled| {
            t.lock().unwrap_or_else(PoisonError::into_inner).push((
                settled.attempt(),
                settled.is_ok(),
                Instant::now(),
            ));
        });
    let publisher = app.publisher();
    for seq in 0..10u32 {
        publisher.publish("q", &seq).await.expect("published");
    }
    let started = Instant::now();
    let running = app.start().await.expect("starts");
    wait_until("every handler ran", || {
        handled.load(std::sync::atomic::Ordering::Relaxed) == 10
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(1), "no waiting");
    assert!(
        told.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty(),
        "nothing confirmed yet"
    );
    wait_until("every settlement told", || {
        told.lock().unwrap_or_else(PoisonError::into_inner).len() == 10
    })
    .await;
    for (attempt, ok, at) in told.lock().unwrap_or_else(PoisonError::into_inner).iter() {
        assert_eq!((*attempt, *ok), (1, true));
        assert!(
            *at - started >= Duration::from_secs(1),
            "told once confirmed"
        );
    }
    assert!(queue(&memory, "q").is_empty());
    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("stops in time")
        .expect("stops cleanly");
}
