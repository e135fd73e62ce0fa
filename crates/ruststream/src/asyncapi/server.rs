//! The broker a service runs on, from its URL, as an AsyncAPI server.

use serde_json::{Value, json};

use super::AsyncApiError;

/// The server object for `url`: host and path, the scheme as the protocol; the user
/// information and the query are left out, the password of the URL shown in
/// `x-ruststream-url` replaced by `***`.
pub(crate) fn server(url: &str) -> Result<Value, AsyncApiError> {
    let bad = |reason: &str| AsyncApiError::Server {
        url: crate::redact(url),
        reason: reason.to_owned(),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("no scheme (memory://, redis://, amqp://, amqp091://, nats://…)"))?;
    let scheme = scheme.to_ascii_lowercase();
    let (protocol, version, what) = match scheme.as_str() {
        "memory" => ("memory", None, "the in-memory broker (one process)"),
        "redis" | "redis-cluster" => ("redis", None, "Redis"),
        "rediss" | "rediss-cluster" => ("rediss", None, "Redis over TLS"),
        "amqp" => ("amqp", Some("1.0"), "AMQP 1.0 (RabbitMQ 4)"),
        "amqps" => ("amqps", Some("1.0"), "AMQP 1.0 over TLS (RabbitMQ 4)"),
        "amqp091" => ("amqp", Some("0.9.1"), "RabbitMQ over AMQP 0-9-1"),
        "amqps091" => ("amqps", Some("0.9.1"), "RabbitMQ over AMQP 0-9-1 with TLS"),
        "nats" => ("nats", None, "NATS"),
        "tls" | "nats+tls" => ("nats", None, "NATS over TLS"),
        _ => return Err(bad("unknown scheme")),
    };
    // A NATS URL may list several servers (`nats://a:4222,nats://b:4222`): the first.
    let rest = if protocol == "nats" {
        rest.split(',').next().unwrap_or_default()
    } else {
        rest
    };
    let without_query = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match without_query.find('/') {
        Some(at) => without_query.split_at(at),
        None => (without_query, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if host.is_empty() {
        if scheme != "memory" {
            return Err(bad("no host"));
        }
        "localhost"
    } else {
        host
    };
    let mut server = json!({
        "host": host,
        "protocol": protocol,
        "description": what,
        "x-ruststream-url": crate::redact(&format!("{scheme}://{without_query}")),
    });
    if let Some(version) = version {
        server["protocolVersion"] = json!(version);
    }
    if !path.is_empty() && path != "/" {
        server["pathname"] = json!(path);
    }
    if scheme.ends_with("-cluster") {
        let nodes: Vec<&str> = rest
            .split_once('?')
            .map(|(_, query)| query.split('#').next().unwrap_or_default())
            .unwrap_or_default()
            .split('&')
            .filter_map(|pair| pair.strip_prefix("node="))
            .collect();
        server["x-ruststream-cluster-nodes"] = json!(nodes);
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::server;
    use serde_json::json;

    #[test]
    fn passwords_never_show() {
        let s = server("amqp://guest:secret@rabbit:5673/vhost?x=1").expect("described");
        assert_eq!(s["host"], "rabbit:5673");
        assert_eq!(s["pathname"], "/vhost");
        assert_eq!(s["protocol"], "amqp");
        assert_eq!(s["protocolVersion"], "1.0");
        assert_eq!(s["x-ruststream-url"], "amqp://guest:***@rabbit:5673/vhost");
        assert!(!s.to_string().contains("secret"));
    }

    #[test]
    fn clusters_list_their_nodes() {
        let s = server("redis-cluster://:pw@a:7001?node=b:7002&node=c:7003").expect("described");
        assert_eq!(s["host"], "a:7001");
        assert_eq!(s["x-ruststream-cluster-nodes"], json!(["b:7002", "c:7003"]));
        assert!(!s.to_string().contains("pw"));
    }

    #[test]
    fn amqp_0_9_1_and_nats() {
        let s = server("amqp091://guest:secret@rabbit:5672/%2f").expect("described");
        assert_eq!(s["protocol"], "amqp");
        assert_eq!(s["protocolVersion"], "0.9.1");
        assert_eq!(s["host"], "rabbit:5672");
        assert_eq!(s["x-ruststream-url"], "amqp091://guest:***@rabbit:5672/%2f");
        let s = server("nats://a:4222,nats://b:4222").expect("described");
        assert_eq!(s["protocol"], "nats");
        assert_eq!(s["host"], "a:4222");
        assert_eq!(
            server("nats+tls://a:4222").expect("described")["description"],
            "NATS over TLS"
        );
    }

    #[test]
    fn memory_and_bad_urls() {
        assert_eq!(
            server("memory://").expect("described")["protocol"],
            "memory"
        );
        assert!(server("kafka://h").is_err());
        assert!(server("redis://").is_err());
        let error = server("127.0.0.1:6379").expect_err("refused").to_string();
        assert!(error.contains("no scheme"), "{error}");
    }
}
