//! The broker's version, from the `properties` of its `open` frame (RabbitMQ sends
//! `product` and `version`): a queue's defaults depend on it (RabbitMQ 4 gives a quorum
//! queue without `x-delivery-limit` a limit of 20). fe2o3-amqp keeps the remote `open`
//! to itself, so the crate's frame reader ([`Patched`](super::Patched)) reads it as it
//! passes.

use std::sync::{Arc, OnceLock};

use fe2o3_amqp_types::performatives::Open;
use fe2o3_amqp_types::primitives::Value;

/// The version the broker announced, once its `open` frame has passed.
pub(crate) type Announced = Arc<OnceLock<String>>;

/// The `version` property of an AMQP `open` frame (`frame`: a whole frame); `None` for
/// any other frame.
pub(crate) fn version_of_open(frame: &[u8]) -> Option<String> {
    // Type 0 is an AMQP frame (1: SASL), its body after the data offset.
    if *frame.get(5)? != 0 {
        return None;
    }
    let doff = usize::from(*frame.get(4)?) * 4;
    let body = frame.get(doff.max(8)..)?;
    let mut pos = 0;
    if super::descriptor(body, &mut pos)? != 0x10 {
        return None;
    }
    let open: Open = serde_amqp::from_slice(body).ok()?;
    open.properties?.iter().find_map(|(k, v)| match v {
        Value::String(s) if k.0 == "version" => Some(s.clone()),
        _ => None,
    })
}

/// The major version (`4` of `4.0.5`).
pub(crate) fn major(version: &str) -> Option<u32> {
    version.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp_types::definitions::Fields;
    use fe2o3_amqp_types::primitives::Symbol;

    #[test]
    fn reads_the_version_of_an_open_frame() {
        let mut properties = Fields::new();
        properties.insert(Symbol::from("product"), Value::String("RabbitMQ".into()));
        properties.insert(Symbol::from("version"), Value::String("4.0.5".into()));
        let open = Open {
            container_id: "rabbit@host".into(),
            hostname: None,
            max_frame_size: 65536.into(),
            channel_max: 2047.into(),
            idle_time_out: None,
            outgoing_locales: None,
            incoming_locales: None,
            offered_capabilities: None,
            desired_capabilities: None,
            properties: Some(properties),
        };
        let body = serde_amqp::to_vec(&open).expect("encoded");
        let mut frame = u32::try_from(body.len() + 8)
            .expect("small")
            .to_be_bytes()
            .to_vec();
        frame.extend_from_slice(&[2, 0, 0, 0]);
        frame.extend_from_slice(&body);
        assert_eq!(version_of_open(&frame).as_deref(), Some("4.0.5"));
        frame[5] = 1;
        assert_eq!(version_of_open(&frame), None);
        assert_eq!(major("4.0.5"), Some(4));
        assert_eq!(major("x"), None);
    }
}
