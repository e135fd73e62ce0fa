//! Addresses: a URL's host and port, the same URL through the proxy, and waiting for a
//! server to go down and come back.

use std::time::Duration;

use tokio::time::Instant;

use crate::record::now_ms;

/// Waits (up to 5 min) for `addr` to refuse connections, then to take them again;
/// returns when it did (ms), or `None` if it never went down.
pub(crate) async fn back_up(addr: String) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(300);
    let up = || async {
        tokio::time::timeout(
            Duration::from_millis(500),
            tokio::net::TcpStream::connect(&addr),
        )
        .await
        .is_ok_and(|c| c.is_ok())
    };
    let mut was_down = false;
    while Instant::now() < deadline {
        match (up().await, was_down) {
            (false, _) => was_down = true,
            (true, true) => return Some(now_ms()),
            (true, false) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// `host:port` of a URL.
pub(crate) fn host_port(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The URL with its host and port replaced by 127.0.0.1:`port`.
pub(crate) fn via(url: &str, port: u16) -> String {
    url.replacen(host_port(url), &format!("127.0.0.1:{port}"), 1)
}

/// How many TCP connections to 127.0.0.1:`port` are established now, from
/// `/proc/net/tcp` (0 where it cannot be read).
pub(crate) fn established(port: u16) -> usize {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace().skip(1);
            let (Some(at), _, Some(state)) = (fields.next(), fields.next(), fields.next()) else {
                return false;
            };
            at == local && state == "01"
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn established_connections_are_counted_on_their_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
        let port = listener.local_addr().expect("address").port();
        assert_eq!(established(port), 0);
        let _a = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connected");
        let _b = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connected");
        assert_eq!(established(port), 2, "the accepted ends, not the clients'");
    }

    #[test]
    fn urls_through_the_proxy() {
        assert_eq!(
            host_port("amqp://guest:guest@127.0.0.1:5673"),
            "127.0.0.1:5673"
        );
        assert_eq!(
            via("amqp://guest:guest@127.0.0.1:5673", 9),
            "amqp://guest:guest@127.0.0.1:9"
        );
        assert_eq!(via("redis://127.0.0.1:6379/0", 9), "redis://127.0.0.1:9/0");
    }
}
