//! The broker a service runs on as an AsyncAPI server object.

use ruststream_core::Server;
use serde_json::{Value, json};

/// The server object of `server` (as its adapter's connector describes it: see
/// `ruststream::broker::server`): host and path, the protocol and its version; the password of
/// the URL shown in `x-ruststream-url` is already `***`.
pub(crate) fn server(server: &Server) -> Value {
    let mut object = json!({
        "host": server.host,
        "protocol": server.protocol,
        "description": server.description,
        "x-ruststream-url": server.url,
    });
    if let Some(version) = server.protocol_version {
        object["protocolVersion"] = json!(version);
    }
    if !server.pathname.is_empty() {
        object["pathname"] = json!(server.pathname);
    }
    if !server.nodes.is_empty() {
        object["x-ruststream-cluster-nodes"] = json!(server.nodes);
    }
    object
}

#[cfg(test)]
mod tests {
    use ruststream_core::Server;
    use serde_json::json;

    #[test]
    fn a_server_is_its_host_path_protocol_and_nodes() {
        let mut described = Server::from_url(
            "amqp://guest:secret@rabbit:5673/vhost?x=1",
            "amqp",
            Some("1.0"),
            "AMQP 1.0",
        )
        .expect("described");
        described.nodes = vec!["b:5673".into()];
        let s = super::server(&described);
        assert_eq!(s["host"], "rabbit:5673");
        assert_eq!(s["pathname"], "/vhost");
        assert_eq!(s["protocol"], "amqp");
        assert_eq!(s["protocolVersion"], "1.0");
        assert_eq!(s["x-ruststream-url"], "amqp://guest:***@rabbit:5673/vhost");
        assert_eq!(s["x-ruststream-cluster-nodes"], json!(["b:5673"]));
        assert!(!s.to_string().contains("secret"));
        let plain = super::server(
            &Server::from_url("redis://h:6379", "redis", None, "Redis").expect("described"),
        );
        assert!(plain.get("pathname").is_none() && plain.get("protocolVersion").is_none());
    }
}
