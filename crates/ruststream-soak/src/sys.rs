//! What a Mosquitto holds, read from its `$SYS` tree: the "still pending" of an MQTT run.
//!
//! Mosquitto cannot be asked what a session holds (no queue inspection, no admin API in
//! 2.0). What it does publish is `$SYS/broker/store/messages/count`: every message it
//! keeps, whether queued for a session (connected or not), sent and waiting for its
//! PUBACK, or retained. Retained messages, its own `$SYS` values first among them, are
//! counted in `$SYS/broker/retained messages/count` too, so the messages held for
//! sessions are the first less the second. That is the measure: it sees a message
//! stranded in any session, the run's own or one nobody reads (a session a consumer
//! left, the one the adapter opens for a dead letter nobody subscribed to), which a
//! count over the sessions the harness knows of would miss.
//!
//! It is broker-wide, so it is taken as a difference from its value before the run's
//! consumers start, and a run on a shared broker holds the broker's lock meanwhile
//! (`mqtt::hold`): two runs at once would count each other's messages. It says nothing
//! of anybody else's work on a shared broker: a client that leaves or takes messages
//! there during the run is counted with the run.
//!
//! The values are published once every `sys_interval` (10 s by default; 1 s on the
//! harness's own Mosquitto), and only when they changed; a retained `$SYS` value expires
//! after 60 s, so a new subscriber may get none at all. So a reader subscribes, and
//! publishes retained messages of the run's own (removed once read) until it has both:
//! each changes both counts, which makes Mosquitto publish them (one may not be enough:
//! a subscription to `$SYS` drops the values that expired, which changes both counts
//! too, and may undo the probe's change). From then on it keeps the last value of each,
//! and a reading waits for a round of values that began after it was asked
//! (`$SYS/broker/uptime` opens each round).
//!
//! No reader is connected while the faults run: one reads before them (the baseline) and
//! one from the drain on. A subscriber on a clean session whose messages are in flight
//! when Mosquitto saves its database leaves them in the file, and after a SIGKILL they
//! come back referenced by no session, counted for ever: with a `$SYS/#` subscriber
//! connected, a Mosquitto holding 5 messages for a session counted 105 stored and 54
//! retained after a SIGKILL and a restart (Mosquitto 2.0.11).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, EventLoop, Packet, QoS};
use tokio::sync::{OnceCell, watch};
use tokio::task::JoinHandle;

use crate::BoxError;
use crate::mqtt::options;
use crate::record::now_ms;

const STORED: &str = "$SYS/broker/store/messages/count";
const RETAINED: &str = "$SYS/broker/retained messages/count";
const UPTIME: &str = "$SYS/broker/uptime";

/// How long the values of one round take to arrive after its `uptime`.
const ROUND: Duration = Duration::from_millis(300);

/// How long a reading may wait for a round (two of the default `sys_interval`, and more).
const WAIT: Duration = Duration::from_secs(30);

/// The most retained messages published to have both counts published.
const PROBES: usize = 5;

/// What a run has left on a Mosquitto: what it holds for sessions beyond what it held
/// before the run.
pub(crate) struct Left {
    url: String,
    probe: String,
    log: PathBuf,
    baseline: i64,
    reader: OnceCell<Reader>,
}

impl Left {
    /// Reads what the broker at `url` holds before the run (`probe`: a topic of the
    /// run's own for the retained messages; the values seen are written to `log`).
    pub(crate) async fn before(url: &str, probe: &str, log: &Path) -> Result<Self, BoxError> {
        let reader = Reader::open(url, probe, log).await?;
        let baseline = reader.held().await?;
        Ok(Self {
            url: url.to_owned(),
            probe: probe.to_owned(),
            log: log.to_owned(),
            baseline,
            reader: OnceCell::new(),
        })
    }

    /// The messages held for sessions now beyond those held before the run (a reader is
    /// connected at the first call, and stays).
    pub(crate) async fn pending(&self) -> Result<u64, BoxError> {
        let reader = self
            .reader
            .get_or_try_init(|| Reader::open(&self.url, &self.probe, &self.log))
            .await?;
        let held = reader.held().await?;
        Ok(u64::try_from(held - self.baseline).unwrap_or(0))
    }
}

/// The last `$SYS` values seen.
#[derive(Clone, Debug, Default)]
struct Seen {
    stored: Option<i64>,
    retained: Option<i64>,
    /// The rounds seen.
    rounds: u64,
}

impl Seen {
    /// The messages held for sessions, if both counts are known.
    fn held(&self) -> Option<i64> {
        Some(self.stored? - self.retained?)
    }
}

/// A subscription to the `$SYS` counters of one Mosquitto.
struct Reader {
    seen: watch::Receiver<Seen>,
    task: JoinHandle<()>,
}

impl Reader {
    /// Subscribes and probes until both counts are known.
    async fn open(url: &str, probe: &str, log: &Path) -> Result<Self, BoxError> {
        let (client, mut events) = AsyncClient::new(options(url, "sys")?, 16);
        let (tell, seen) = watch::channel(Seen::default());
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let task = tokio::spawn(async move {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        for topic in [STORED, RETAINED, UPTIME] {
                            let _ = client.try_subscribe(topic, QoS::AtMostOnce);
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(publish))) => {
                        let text = String::from_utf8_lossy(&publish.payload);
                        let number = text.split_whitespace().next().and_then(|n| n.parse().ok());
                        let _ = writeln!(log, "{} {} {text}", now_ms(), publish.topic);
                        tell.send_modify(|seen| match publish.topic.as_str() {
                            STORED => seen.stored = number,
                            RETAINED => seen.retained = number,
                            UPTIME if !publish.retain => seen.rounds += 1,
                            _ => {}
                        });
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
        let reader = Self { seen, task };
        // The round after the subscription has what it changed (expired values dropped).
        reader.rounds(1).await?;
        let (publisher, mut events) = AsyncClient::new(options(url, "probe")?, 16);
        let mut probes = Vec::new();
        while reader.seen.borrow().held().is_none() && probes.len() < PROBES {
            let topic = format!("{probe}/{}", probes.len());
            publisher
                .publish(topic.as_str(), QoS::AtLeastOnce, true, b"soak".to_vec())
                .await?;
            acknowledged(&mut events).await?;
            probes.push(topic);
            // The round that began after the probe was taken has both counts.
            reader.rounds(1).await?;
            tokio::time::sleep(ROUND).await;
        }
        for topic in probes {
            publisher
                .publish(topic, QoS::AtLeastOnce, true, Vec::<u8>::new())
                .await?;
            acknowledged(&mut events).await?;
        }
        let _ = publisher.try_disconnect();
        let _ = tokio::time::timeout(Duration::from_secs(1), events.poll()).await;
        Ok(reader)
    }

    /// Waits until `n` more rounds began.
    async fn rounds(&self, n: u64) -> Result<(), BoxError> {
        let mut watch = self.seen.clone();
        let until = watch.borrow().rounds + n;
        match tokio::time::timeout(WAIT, watch.wait_for(|seen| seen.rounds >= until)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(
                format!("no $SYS round within {WAIT:?} (is the broker's sys_interval 0?)").into(),
            ),
        }
    }

    /// The messages held for sessions, from a round of `$SYS` values that began after
    /// the call.
    async fn held(&self) -> Result<i64, BoxError> {
        self.rounds(1).await?;
        tokio::time::sleep(ROUND).await;
        let seen = self.seen.borrow().clone();
        seen.held().ok_or_else(|| {
            format!("no {STORED} and {RETAINED} from the broker: cannot count what it holds").into()
        })
    }
}

/// Reads the probe connection's events until a PUBACK.
async fn acknowledged(events: &mut EventLoop) -> Result<(), BoxError> {
    let acked = tokio::time::timeout(WAIT, async {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Packet::PubAck(_))) => return Ok(()),
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
    });
    Ok(acked.await.map_err(|_| "no puback for a $SYS probe")??)
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}
