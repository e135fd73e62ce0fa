//! A scenario on a real broker: the consumer and producer processes, the fault's
//! machinery (the proxy, the harness's own redis-server), and what happened.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::BoxError;
use crate::fault::Fault;
use crate::form::Server;
use crate::lock::Held;
use crate::net::{host_port, via};
use crate::plan::{Plan, Report, report};
use crate::proxy::Proxy;
use crate::record::now_ms;
use crate::server::{Kind, OwnServer};
use crate::sys::Left;
use crate::tally::{Crash, Logs};
use crate::{gaps, jetstream, kafka, mqtt, pending, phase};

mod faults;

/// A run on a real broker: processes, the fault's machinery, and what happened.
pub(crate) struct Run<'a> {
    plan: &'a Plan,
    address: &'a str,
    dir: &'a Path,
    /// The URL the producer and the dead-letter consumer use.
    direct: String,
    /// The URL the service's consumers use (through the proxy if there is one).
    consumer_url: String,
    proxy: Option<Proxy>,
    server: Option<OwnServer>,
    /// The brokers of a cluster of the run's own (`kafka-node-kill`).
    cluster: Vec<OwnServer>,
    nats: Option<OwnServer>,
    /// What the run leaves on an MQTT broker (`sys.rs`), and the lock of a shared one.
    mqtt: Option<(Left, Option<Held>)>,
    consumers: Vec<Child>,
    dead: Option<Child>,
    kills: Vec<(u32, u64)>,
    /// The SIGKILLs of a server of the run's own that saves its state from time to time.
    crashes: Vec<Crash>,
    fault_ends: Vec<u64>,
    dice: u64,
    /// This binary, found once at the start: a rebuild during the run replaces the file,
    /// and `current_exe` would then name a deleted one.
    exe: PathBuf,
}

impl<'a> Run<'a> {
    pub(crate) async fn new(
        plan: &'a Plan,
        address: &'a str,
        dir: &'a Path,
    ) -> Result<Self, BoxError> {
        let (mut server, mut nats, mut proxy) = (None, None, None);
        let mut cluster = Vec::new();
        let base = match plan.fault {
            Fault::RedisKill => {
                let own = OwnServer::start(Kind::Redis, dir.join("redis-data"))?;
                let url = own.url();
                server = Some(own);
                url
            }
            Fault::NatsRestart => {
                let own = OwnServer::start(Kind::Nats, dir.join("nats-store"))?;
                let url = own.url();
                nats = Some(own);
                url
            }
            Fault::PostgresRestart | Fault::KafkaRestart | Fault::MqttRestart => {
                let (kind, data) = match plan.fault {
                    Fault::KafkaRestart => (Kind::Kafka, "kafka-data"),
                    Fault::MqttRestart => (Kind::Mosquitto, "mosquitto-data"),
                    _ => (Kind::Postgres, "postgres-data"),
                };
                let own = OwnServer::start(kind, dir.join(data))?;
                let url = own.url();
                server = Some(own);
                url
            }
            // Every client is given all three brokers, as a cluster's clients are.
            Fault::KafkaNodeKill => {
                cluster = OwnServer::cluster(dir.join("kafka-cluster"))?;
                let servers: Vec<String> = cluster
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port))
                    .collect();
                format!("kafka://{}", servers.join(","))
            }
            // The machine's Mosquitto drops what a session's queue holds beyond 1,000
            // messages (`max_queued_messages`, its default), after the publisher had its
            // PUBACK: a black hole, a reset or a kill would measure that whenever the
            // consumers fall behind for a second or two (`mosquitto.rs`). So every MQTT
            // fault runs on a Mosquitto of the run's own, without that limit.
            Fault::BlackHole | Fault::Reset | Fault::Kill if plan.form.server() == Server::Mqtt => {
                let own = OwnServer::start(Kind::Mosquitto, dir.join("mosquitto-data"))?;
                let url = own.url();
                server = Some(own);
                url
            }
            // A Kafka client asks the server it was given for the cluster's metadata,
            // then connects to the listener each broker advertises: a proxy on the
            // machine's broker would cut only the first connection. A nisshi of the
            // run's own advertises the proxy, so every connection goes through it (the
            // producer's and the operator's too). In memory: it is not restarted.
            Fault::BlackHole | Fault::Reset if plan.form.server() == Server::Kafka => {
                let port = crate::server::free_port()?;
                let p = Proxy::start(format!("127.0.0.1:{port}")).await?;
                let own =
                    OwnServer::start_on(Kind::KafkaMemory, dir.join("kafka-data"), port, p.port)?;
                let url = own.url();
                server = Some(own);
                proxy = Some(p);
                url
            }
            _ => plan.form.server().url(),
        };
        let mqtt = if plan.form.server() == Server::Mqtt {
            // A broker of the run's own is the run's alone; a shared one, one run's at a time.
            let held = match server {
                Some(_) => None,
                None => Some(mqtt::hold(&base).await?),
            };
            let probe = format!("{address}-probe");
            let left = Left::before(&base, &probe, &dir.join("sys.out")).await?;
            Some((left, held))
        } else {
            None
        };
        let mut consumer_url = base.clone();
        if plan.fault.proxied() {
            let p = match proxy.take() {
                Some(p) => p,
                None => Proxy::start(host_port(&base).to_owned()).await?,
            };
            consumer_url = via(&base, p.port);
            proxy = Some(p);
        }
        Ok(Self {
            plan,
            address,
            dir,
            direct: base,
            consumer_url,
            proxy,
            server,
            cluster,
            nats,
            mqtt,
            consumers: Vec::new(),
            dead: None,
            kills: Vec::new(),
            crashes: Vec::new(),
            fault_ends: Vec::new(),
            dice: now_ms() | 1,
            exe: std::env::current_exe()?,
        })
    }

    fn spawn(&self, role: &str, url: &str, extra: &[&str]) -> Result<Child, BoxError> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{role}.out")))?;
        let child = Command::new(&self.exe)
            .arg(role)
            .args([
                "--url",
                url,
                "--form",
                self.plan.form.name(),
                "--address",
                self.address,
            ])
            .arg("--dir")
            .arg(self.dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()?;
        Ok(child)
    }

    /// The dead-letter consumer (`None`), or the service's consumer in `slot`.
    fn spawn_consumer(&self, slot: Option<usize>) -> Result<Child, BoxError> {
        // Each MQTT consumer names itself, and a slot's replacement takes its session.
        let own = |url: &str, role: &str| match self.plan.form.server() {
            Server::Mqtt => mqtt::consumer_url(url, role),
            _ => url.to_owned(),
        };
        match slot {
            None => self.spawn("consume", &own(&self.direct, "dead"), &["--dead"]),
            Some(slot) => {
                let url = own(&self.consumer_url, &format!("main-{slot}"));
                self.spawn("consume", &url, &[])
            }
        }
    }

    /// Waits until the consumer `pid` has subscribed (it writes `ROLE-PID.ready`).
    async fn ready(&self, child: &mut Child, role: &str) -> Result<(), BoxError> {
        let pid = child.id().ok_or("consumer exited")?;
        let path = self.dir.join(format!("{role}-{pid}.ready"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !path.exists() {
            if let Some(status) = child.try_wait()? {
                return Err(format!(
                    "{role} consumer exited ({status}); see {}",
                    self.dir.display()
                )
                .into());
            }
            if Instant::now() > deadline {
                return Err(format!("{role} consumer not ready after 60 s").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// A number in `0..n`.
    fn roll(&mut self, n: u64) -> u64 {
        self.dice ^= self.dice << 13;
        self.dice ^= self.dice >> 7;
        self.dice ^= self.dice << 17;
        self.dice % n.max(1)
    }

    pub(crate) async fn go(mut self) -> Result<Report, BoxError> {
        phase::set("declaring the queue as an operator would");
        if let Some(kind) = crate::form::operator_made(self.plan.form) {
            crate::operator::declare(&self.direct, self.address, kind).await?;
        }
        if self.plan.form.server() == Server::Kafka {
            kafka::declare(&self.direct, self.address).await?;
        }
        phase::set("starting the consumers");
        let mut dead = self.spawn_consumer(None)?;
        self.ready(&mut dead, "dead").await?;
        self.dead = Some(dead);
        for slot in 0..self.plan.consumers {
            let mut consumer = self.spawn_consumer(Some(slot))?;
            self.ready(&mut consumer, "main").await?;
            self.consumers.push(consumer);
        }
        let (n, rate) = (self.plan.n.to_string(), self.plan.rate.to_string());
        let mut producer = self.spawn(
            "produce",
            &self.direct.clone(),
            &["--n", &n, "--rate", &rate],
        )?;
        let t0 = Instant::now();
        phase::set("publishing and injecting the fault");
        let (published, failures) = self.faults(&mut producer).await?;
        let produced = t0.elapsed();
        phase::set("draining");
        let drained = self.drain(published).await?;
        phase::set("counting what is left on the server");
        let pending = self.pending().await?;
        let mut notes = Vec::new();
        if !drained {
            eprintln!(
                "soak: {}: not everything settled within {:?}",
                self.address, self.plan.drain
            );
            notes = self.notes().await;
        }
        let settled = t0.elapsed();
        phase::set("stopping the consumers");
        self.stop().await;
        eprintln!(
            "soak: {}: produced and faults done {:.1} s, settled {:.1} s, stopped {:.1} s",
            self.address,
            produced.as_secs_f64(),
            settled.as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
        let mut out = report(self.plan);
        out.faults = self.fault_ends.len() as u64;
        out.kills = self.kills.len() as u64;
        out.publish_failures = failures;
        out.pending = pending;
        out.notes = notes;
        out.tally = self.logs()?.tally(
            published,
            &self.kills,
            &self.fault_ends,
            self.plan.form.delays_in_process(),
            &self.crashes,
        );
        if !out.tally.lost_other_ids.is_empty() {
            let logs = self.logs()?;
            let ids = &out.tally.lost_other_ids.clone();
            out.notes.extend(ids.iter().map(|&id| logs.story(id)));
            if self.plan.form.server() == Server::Kafka {
                phase::set("tracing the lost ids on the broker");
                let (lines, found) = kafka::trace(&self.direct, self.address, ids).await;
                out.notes.extend(lines);
                let gaps = gaps::read(self.dir);
                out.tally
                    .count_passed_over(&gaps::passed_over(&found, &gaps));
            }
        }
        if out.tally.lost_other == 0 && pending == 0 {
            phase::set("cleaning up");
            self.clean().await;
        } else {
            eprintln!(
                "soak: {}: keys and queues kept for inspection",
                self.address
            );
        }
        Ok(out)
    }

    /// Waits until every published id is handled or dead-lettered (but the delayed
    /// copies lost with killed processes) and nothing is left on the server, or the
    /// drain time is over.
    async fn drain(&self, published: u64) -> Result<bool, BoxError> {
        let deadline = Instant::now() + self.plan.drain;
        // rabbitmqctl takes a while to answer.
        let every = if self.plan.form.server().is_rabbit() {
            3
        } else {
            1
        };
        let mut quiet_since: Option<Instant> = None;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(every)).await;
            let tally = self.logs()?.tally(
                published,
                &self.kills,
                &[],
                self.plan.form.delays_in_process(),
                &self.crashes,
            );
            let settled = tally.lost_other == 0 && self.pending().await.unwrap_or(1) == 0;
            match (settled, quiet_since) {
                // Two seconds more, for late duplicates.
                (true, Some(since)) if since.elapsed() >= Duration::from_secs(2) => {
                    return Ok(true);
                }
                (true, None) => quiet_since = Some(Instant::now()),
                (false, _) => quiet_since = None,
                _ => {}
            }
        }
        Ok(false)
    }

    /// What may explain a run that did not settle: the consumers' last errors and, on
    /// Kafka, the state of the run's consumer groups.
    async fn notes(&self) -> Vec<String> {
        let mut notes = crate::notes::last_errors(self.dir, 5);
        if self.plan.form.server() == Server::Kafka {
            notes.extend(kafka::groups(&self.direct, self.address).await);
        }
        notes
    }

    fn logs(&self) -> std::io::Result<Logs> {
        let logs = Logs::read(self.dir)?;
        Ok(if self.plan.form.broker_dead_letters() {
            logs.count_broker_dead_letters()
        } else {
            logs
        })
    }

    async fn pending(&self) -> Result<u64, BoxError> {
        Ok(match self.plan.form.server() {
            Server::Amqp | Server::Lapin => pending::amqp(self.address)?,
            Server::Nats => jetstream::pending(&self.direct, self.address).await?,
            Server::Kafka => kafka::pending(&self.direct, self.address).await?,
            Server::Postgres => pending::postgres(&self.direct, self.address)?,
            Server::Mqtt => {
                let (left, _) = self.mqtt.as_ref().ok_or("no $SYS reader")?;
                left.pending().await?
            }
            Server::Memory | Server::Redis => {
                pending::redis(&self.direct, self.plan.form, self.address)?
            }
        })
    }

    /// SIGTERM to every consumer (a graceful stop), SIGKILL after 20 s.
    async fn stop(&mut self) {
        let mut all: Vec<Child> = self.consumers.drain(..).chain(self.dead.take()).collect();
        for child in &all {
            if let Some(pid) = child.id() {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
        }
        for child in &mut all {
            if tokio::time::timeout(Duration::from_secs(20), child.wait())
                .await
                .is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }

    async fn clean(&self) {
        let result = match self.plan.form.server() {
            Server::Amqp | Server::Lapin => pending::amqp_clean(self.address).map_err(Into::into),
            Server::Nats => jetstream::clean(&self.direct, self.address).await,
            Server::Kafka => kafka::clean(&self.direct, self.address).await,
            Server::Postgres => {
                pending::postgres_clean(&self.direct, self.address).map_err(Into::into)
            }
            Server::Mqtt => mqtt::clean(&self.direct, self.address, self.plan.consumers).await,
            Server::Memory | Server::Redis => {
                pending::redis_clean(&self.direct, self.address).map_err(Into::into)
            }
        };
        if let Err(error) = result {
            eprintln!("soak: clean-up of {}: {error}", self.address);
        }
    }
}
