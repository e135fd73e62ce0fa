//! MQTT: each consumer's identity, the lock of a shared broker, and the clean-up of a
//! run's sessions.
//!
//! The adapter gives a mount's session the client id `<prefix>-<hash of group and
//! filter>`, the prefix being the URL's `client_id`, else `ruststream-<host name>`
//! (`crates/ruststream-mqtt/src/settings.rs`). Two consumers of one mount on one host
//! would have the same id and take the session from each other, so the docs have each
//! replica name itself in its URL, and the harness does so: a service consumer is
//! `soak-main-<slot>` (a killed consumer's replacement takes its slot, and so its
//! session, with what the broker kept there for it), the dead-letter consumer
//! `soak-dead`. The mounts are the adapter's defaults.

use std::path::PathBuf;
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet};
use tokio::time::Instant;

use crate::BoxError;
use crate::consume::dead_letter_of;
use crate::lock::{Held, take};
use crate::net::host_port;
use crate::phase;

/// The URL a consumer in `role` (`main-0`, `dead`) connects with: its own client id.
pub(crate) fn consumer_url(url: &str, role: &str) -> String {
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}client_id=soak-{role}")
}

/// Every session of a run with `consumers` service consumers: theirs, the dead-letter
/// consumer's, and the ones the adapter would open for the dead letter from each
/// service consumer (when a dead letter finds nobody subscribed).
fn sessions(url: &str, address: &str, consumers: usize) -> Result<Vec<String>, BoxError> {
    let dead = dead_letter_of(address);
    let session =
        |role: &str, filter: &str| ruststream::mqtt::session_id(&consumer_url(url, role), filter);
    let mut ids = vec![session("dead", &dead)?];
    for slot in 0..consumers {
        let role = format!("main-{slot}");
        ids.push(session(&role, address)?);
        ids.push(session(&role, &dead)?);
    }
    Ok(ids)
}

/// The options of a connection of the harness's own to the broker at `url` (MQTT 3.1.1,
/// clean session), as `role`.
pub(crate) fn options(url: &str, role: &str) -> Result<MqttOptions, BoxError> {
    let at = host_port(url);
    let (host, port) = at.rsplit_once(':').unwrap_or((at, "1883"));
    let id = format!(
        "soak-{role}-{}-{}",
        std::process::id(),
        crate::record::now_ms() % 1_000_000
    );
    let mut options = MqttOptions::new(id, host, port.parse::<u16>()?);
    options
        .set_clean_session(true)
        .set_keep_alive(Duration::from_secs(30));
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    if let Some((login, _)) = rest
        .split(['/', '?'])
        .next()
        .and_then(|r| r.rsplit_once('@'))
    {
        let (user, password) = login.split_once(':').unwrap_or((login, ""));
        options.set_credentials(user, password);
    }
    Ok(options)
}

/// Ends each session of the run: a connection with its client id and a clean session
/// drops the session and what it held.
pub(crate) async fn clean(url: &str, address: &str, consumers: usize) -> Result<(), BoxError> {
    for id in sessions(url, address, consumers)? {
        let mut options = options(url, "clean")?;
        options.set_client_id(id.clone());
        let (client, mut events) = AsyncClient::new(options, 4);
        let connected = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => return Ok(()),
                    Ok(_) => {}
                    Err(error) => return Err(error),
                }
            }
        })
        .await
        .map_err(|_| format!("no connack for {id}"))?;
        connected?;
        let _ = client.try_disconnect();
        let _ = tokio::time::timeout(Duration::from_secs(1), events.poll()).await;
    }
    Ok(())
}

/// The lock of the broker at `url` (its host and port).
fn lock_path(url: &str) -> PathBuf {
    let at: String = host_port(url)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    std::env::temp_dir().join(format!("ruststream-soak-mqtt-{at}.lock"))
}

/// Holds the broker at `url` for one run at a time (what it holds is counted
/// broker-wide: `sys.rs`); waits up to 20 minutes for another run to let it go.
pub(crate) async fn hold(url: &str) -> Result<Held, BoxError> {
    let path = lock_path(url);
    let deadline = Instant::now() + Duration::from_secs(1_200);
    loop {
        match take(&path)? {
            Ok(held) => return Ok(held),
            Err(_) if Instant::now() < deadline => {
                phase::set("waiting for another run on the MQTT broker to end");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(pid) => {
                return Err(format!("the MQTT broker at {url} is held by process {pid}").into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_named_as_the_adapter_names_them() {
        // As Mosquitto's log named them in a run of `mqtt:kill`.
        let address = "soak-mqtt-kill-26892-746910";
        let ids = sessions("mqtt://127.0.0.1:1883", address, 2).expect("good urls");
        assert_eq!(
            ids,
            [
                "soak-dead-b6757cb4",
                "soak-main-0-da14fb9f",
                "soak-main-0-b6757cb4",
                "soak-main-1-da14fb9f",
                "soak-main-1-b6757cb4",
            ]
        );
    }

    #[test]
    fn consumers_name_themselves() {
        assert_eq!(
            consumer_url("mqtt://127.0.0.1:1883", "main-0"),
            "mqtt://127.0.0.1:1883?client_id=soak-main-0"
        );
        assert_eq!(
            consumer_url("mqtt://h:1?keep_alive=5s", "dead"),
            "mqtt://h:1?keep_alive=5s&client_id=soak-dead"
        );
    }
}
