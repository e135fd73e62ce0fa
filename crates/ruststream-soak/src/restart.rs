//! RabbitMQ 4 restarts, one at a time across every scenario on the machine: scenarios
//! that want a restart while one is under way join it instead of starting another, so
//! restart scenarios of several forms can run side by side and share each restart.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use crate::BoxError;
use crate::lock::take;
use crate::net::{back_up, host_port};
use crate::record::now_ms;

/// The lock a restarting scenario holds (the file holds its pid) from the restart's
/// start until the AMQP port answers again.
fn lock_path() -> PathBuf {
    std::env::temp_dir().join("ruststream-soak-rabbit-restart.lock")
}

/// Restarts RabbitMQ 4 (`scripts/rabbitmq4.sh restart`), or joins the restart another
/// scenario is making; returns when the fault ended (ms): when the AMQP port at
/// `direct`, gone for the restart, answers again.
pub(crate) async fn rabbit(direct: &str) -> Result<u64, BoxError> {
    let held = match take(&lock_path())? {
        Ok(held) => held,
        Err(_) => {
            // Another scenario's restart: over when its lock is gone; it ended when the
            // port came back, if this scenario saw it go down.
            let watch = tokio::spawn(back_up(host_port(direct).to_owned()));
            let deadline = Instant::now() + Duration::from_secs(300);
            while lock_path().exists() && Instant::now() < deadline {
                if take(&lock_path())?.is_ok() {
                    break; // its holder died: taken and dropped at once
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let back = if watch.is_finished() {
                watch.await.ok().flatten()
            } else {
                watch.abort();
                None
            };
            return Ok(back.unwrap_or_else(now_ms));
        }
    };
    // Bounded: a node that does not come back fails the scenario, it does not hold it.
    let restart = Command::new("timeout")
        .args(["--kill-after=10", "300", "scripts/rabbitmq4.sh", "restart"])
        .kill_on_drop(true)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    // The node takes connections again before the script is done (it waits for the
    // boot and imports definitions): the fault ends when the AMQP port, gone for the
    // restart, answers again.
    let (status, back) = tokio::join!(restart, back_up(host_port(direct).to_owned()));
    drop(held);
    if !status?.success() {
        return Err("scripts/rabbitmq4.sh restart failed or took over 300 s".into());
    }
    Ok(back.unwrap_or_else(now_ms))
}
