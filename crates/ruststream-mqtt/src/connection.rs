//! The options of every connection this adapter opens.

use std::time::Duration;

use rumqttc::v5::MqttOptions;

use crate::settings::Url;

/// The largest packet MQTT can carry (268,435,455 bytes), which this client accepts: a
/// smaller maximum would make the broker drop larger messages meant for a subscription.
pub(crate) const MAX_PACKET: u32 = 268_435_455;

/// How long connecting (TCP and CONNACK) may take.
const CONNECT_TIMEOUT_SECS: u64 = 10;

/// The options of a connection as `client_id`. `session_expiry` of `None` is a clean
/// start whose session ends with the connection.
pub(crate) fn options(
    url: &Url,
    client_id: &str,
    session_expiry: Option<Duration>,
    receive_maximum: u16,
) -> MqttOptions {
    let mut options = MqttOptions::new(client_id, url.host.clone(), url.port);
    options
        .set_transport(url.transport.0.clone())
        .set_keep_alive(url.keep_alive)
        .set_connection_timeout(CONNECT_TIMEOUT_SECS)
        .set_manual_acks(true)
        .set_max_packet_size(Some(MAX_PACKET))
        .set_receive_maximum(Some(receive_maximum.max(1)));
    match session_expiry {
        Some(expiry) => {
            let secs = u32::try_from(expiry.as_secs()).unwrap_or(u32::MAX);
            options
                .set_clean_start(false)
                .set_session_expiry_interval(Some(secs));
        }
        None => {
            options
                .set_clean_start(true)
                .set_session_expiry_interval(None);
        }
    }
    if let Some((user, password)) = &url.login {
        options.set_credentials(user.clone(), password.clone());
    }
    options
}

/// A client id of its own for a connection that keeps no session (publishing, replies).
pub(crate) fn throwaway_id(role: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("ruststream-{role}-{}-{nanos:x}-{n}", std::process::id())
}

/// Completes once `closed` says the broker is closed (or its sender is gone).
pub(crate) async fn closing(closed: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = closed.wait_for(|closed| *closed).await;
}
