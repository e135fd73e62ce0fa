//! Headers as MQTT 5 properties: `content-type` is the content type, `correlation-id` the
//! correlation data, `reply-to` the response topic, every other header a user property.

use rumqttc::v5::mqttbytes::v5::PublishProperties;
use ruststream_core::{CONTENT_TYPE, CORRELATION_ID, HeaderValue, Headers, REPLY_TO};

/// A header MQTT cannot carry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("header {0}: mqtt properties are text (utf-8)")]
pub(crate) struct NotText(pub(crate) String);

/// The properties of a publish carrying `headers`.
pub(crate) fn to_properties(headers: &Headers) -> Result<PublishProperties, NotText> {
    let mut properties = PublishProperties::default();
    for (name, value) in headers.iter() {
        let name = name.as_str();
        if name.eq_ignore_ascii_case(CORRELATION_ID) {
            properties.correlation_data = Some(value.to_bytes());
            continue;
        }
        let text = value.to_str().ok_or_else(|| NotText(name.to_owned()))?;
        if name.eq_ignore_ascii_case(CONTENT_TYPE) {
            properties.content_type = Some(text.to_owned());
        } else if name.eq_ignore_ascii_case(REPLY_TO) {
            properties.response_topic = Some(text.to_owned());
        } else {
            properties
                .user_properties
                .push((name.to_owned(), text.to_owned()));
        }
    }
    Ok(properties)
}

/// The headers a delivery's properties carry.
pub(crate) fn from_properties(properties: Option<&PublishProperties>) -> Headers {
    let mut headers = Headers::new();
    let Some(properties) = properties else {
        return headers;
    };
    if let Some(content_type) = &properties.content_type {
        headers.insert(CONTENT_TYPE, content_type.clone());
    }
    if let Some(data) = &properties.correlation_data {
        headers.insert(CORRELATION_ID, HeaderValue::from(data.clone()));
    }
    if let Some(topic) = &properties.response_topic {
        headers.insert(REPLY_TO, topic.clone());
    }
    for (name, value) in &properties.user_properties {
        headers.append(name.clone(), value.clone());
    }
    headers
}

#[cfg(test)]
mod tests {
    use ruststream_core::{HeaderValue, Headers, RETRY_COUNT};

    use super::{from_properties, to_properties};

    #[test]
    fn headers_survive_a_round_trip() {
        let mut headers = Headers::new();
        headers.insert("content-type", "application/json");
        headers.insert("correlation-id", "c-1");
        headers.insert("reply-to", "replies/7");
        headers.insert(RETRY_COUNT, "2");
        headers.append("x-many", "a");
        headers.append("x-many", "b");
        let properties = to_properties(&headers).expect("text");
        assert_eq!(properties.content_type.as_deref(), Some("application/json"));
        assert_eq!(properties.response_topic.as_deref(), Some("replies/7"));
        let back = from_properties(Some(&properties));
        assert_eq!(back.get_str("correlation-id"), Some("c-1"));
        assert_eq!(back.retry_count(), 2);
        let many: Vec<_> = back
            .iter()
            .filter(|(n, _)| n.as_str() == "x-many")
            .collect();
        assert_eq!(many.len(), 2);
    }

    #[test]
    fn a_header_that_is_not_text_is_refused_by_name() {
        let mut headers = Headers::new();
        headers.insert("x-bin", HeaderValue::from(vec![0xff, 0x00]));
        let error = to_properties(&headers).expect_err("binary");
        assert!(error.to_string().contains("x-bin"), "{error}");
        headers = Headers::new();
        headers.insert("correlation-id", HeaderValue::from(vec![0xff]));
        assert!(to_properties(&headers).is_ok(), "correlation data is bytes");
    }
}
