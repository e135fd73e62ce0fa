//! A message as a row: the payload, and the headers as two arrays (names and values).

use bytes::Bytes;
use ruststream_core::{Headers, Message};

/// A message's headers as the row's `header_names` and `header_values`.
pub(crate) fn columns(message: &Message) -> (Vec<String>, Vec<Vec<u8>>) {
    message
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .unzip()
}

/// The message of a row; the defect where its arrays do not pair up.
pub(crate) fn message(
    payload: Vec<u8>,
    names: Vec<String>,
    values: Vec<Vec<u8>>,
) -> (Message, Option<String>) {
    let defect = (names.len() != values.len())
        .then(|| format!("{} header names but {} values", names.len(), values.len()));
    let mut headers = Headers::new();
    for (name, value) in names.into_iter().zip(values) {
        headers.append(name, value);
    }
    let message = Message {
        payload: Bytes::from(payload),
        headers,
    };
    (message, defect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_survive_the_columns_with_their_bytes_and_order() {
        let sent = Message::new("p")
            .with_header("a", "1")
            .with_header("b", vec![0xff_u8, 0]);
        let (names, values) = columns(&sent);
        let (back, defect) = message(sent.payload.to_vec(), names, values);
        assert_eq!((back, defect), (sent, None));
        let (_, defect) = message(Vec::new(), vec!["a".into()], Vec::new());
        assert!(defect.is_some());
    }
}
