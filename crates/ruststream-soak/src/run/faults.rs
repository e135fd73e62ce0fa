//! A run's fault: injected while the producer runs, and at least the fault's minimum
//! number of times.

use std::time::Duration;

use tokio::process::Child;

use super::Run;
use crate::BoxError;
use crate::fault::Fault;
use crate::record::now_ms;
use crate::tally::Crash;
use crate::{phase, restart};

impl Run<'_> {
    /// Injects the fault until the producer is done and at least the fault's minimum
    /// count was injected. Returns what the producer published.
    pub(super) async fn faults(&mut self, producer: &mut Child) -> Result<(u64, u64), BoxError> {
        let mut stdout = producer.stdout.take().ok_or("producer stdout")?;
        let collect = tokio::spawn(async move {
            let mut text = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut text).await;
            text
        });
        let mut done = None;
        let rare = self.plan.rare_faults.max(self.plan.fault.at_least());
        loop {
            let wait = match self.plan.fault {
                Fault::None => Duration::from_secs(3600),
                Fault::Kill | Fault::Reset => Duration::from_millis(1_000 + self.roll(2_000)),
                Fault::RedisKill
                | Fault::NatsRestart
                | Fault::PostgresRestart
                | Fault::KafkaRestart
                | Fault::KafkaNodeKill
                | Fault::MqttRestart => Duration::from_millis(3_000 + self.roll(2_000)),
                Fault::RabbitRestart => {
                    Duration::from_secs(if self.fault_ends.is_empty() { 2 } else { 20 })
                }
                Fault::BlackHole => {
                    Duration::from_secs(if self.fault_ends.is_empty() { 1 } else { 10 })
                }
            };
            let enough = self.fault_ends.len() >= self.plan.fault.at_least();
            let rare_spent = matches!(self.plan.fault, Fault::RabbitRestart | Fault::BlackHole)
                && self.fault_ends.len() >= rare;
            if done.is_some() && (enough || self.plan.fault == Fault::None) {
                break;
            }
            tokio::select! {
                status = producer.wait(), if done.is_none() => {
                    let status = status?;
                    if !status.success() {
                        return Err(format!("producer failed ({status}); see {}", self.dir.display()).into());
                    }
                    done = Some(());
                }
                () = tokio::time::sleep(wait), if !rare_spent => self.inject().await?,
            }
            if done.is_some() && rare_spent {
                break;
            }
        }
        let text = collect.await?;
        let mut words = text.split_whitespace();
        let published = words
            .nth(1)
            .and_then(|n| n.parse().ok())
            .ok_or("producer said nothing")?;
        let failures = words.nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        Ok((published, failures))
    }

    async fn inject(&mut self) -> Result<(), BoxError> {
        match self.plan.fault {
            Fault::None => {}
            Fault::Kill => {
                let i = self.roll(self.consumers.len() as u64) as usize;
                let victim = &mut self.consumers[i];
                let pid = victim.id().ok_or("consumer gone")?;
                victim.start_kill()?;
                let at = now_ms();
                let _ = victim.wait().await;
                self.kills.push((pid, at));
                self.consumers[i] = self.spawn_consumer(Some(i))?;
                self.fault_ends.push(now_ms());
            }
            Fault::RedisKill
            | Fault::PostgresRestart
            | Fault::KafkaRestart
            | Fault::MqttRestart => {
                let server = self.server.as_mut().ok_or("no server")?;
                let killed = now_ms();
                server.kill();
                if let Some(saved) = server.saved_at() {
                    self.crashes.push(Crash { killed, saved });
                }
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                server.restart()?;
                self.fault_ends.push(now_ms());
            }
            Fault::KafkaNodeKill => {
                // The broker the clients are on (a random one of the others would cut
                // nothing): the one with the most connections.
                let i = (0..self.cluster.len())
                    .max_by_key(|&i| crate::net::established(self.cluster[i].port))
                    .ok_or("no cluster")?;
                let node = &mut self.cluster[i];
                node.kill();
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                node.restart()?;
                self.fault_ends.push(now_ms());
            }
            Fault::NatsRestart => {
                let server = self.nats.as_mut().ok_or("no server")?;
                server.kill();
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                server.restart()?;
                self.fault_ends.push(now_ms());
            }
            Fault::RabbitRestart => {
                phase::set("restarting RabbitMQ");
                let back = restart::rabbit(&self.direct).await?;
                phase::set("publishing and injecting the fault");
                self.fault_ends.push(back);
            }
            Fault::Reset => {
                if let Some(proxy) = &self.proxy {
                    proxy.reset();
                }
                self.fault_ends.push(now_ms());
            }
            Fault::BlackHole => {
                if let Some(proxy) = &self.proxy {
                    proxy.black_hole(true);
                    tokio::time::sleep(self.plan.hole).await;
                    proxy.black_hole(false);
                }
                self.fault_ends.push(now_ms());
            }
        }
        Ok(())
    }
}
