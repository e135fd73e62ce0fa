//! Creating a stream, again when the server failed to make its store.
//!
//! A JetStream server answers a stream it could not make on disk with a fixed sentence
//! ("error creating store for stream", code 500) and writes the cause only to its own
//! log. Servers give it for a moment under load and while an earlier stream's files are
//! still being removed; a subscribe that gives up at once stops a service that would
//! have started a second later. So the adapter asks again a few times, briefly, and
//! reports the server's answer if it does not change.

use std::time::Duration;

use async_nats::jetstream::{
    self,
    context::{CreateStreamError, CreateStreamErrorKind},
    stream,
};

/// The pauses before each further attempt: about two seconds in all.
const PAUSES: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(500),
    Duration::from_secs(1),
];

/// Creates the stream of `config`, again after a pause while the server's store fails.
pub(crate) async fn create_stream(
    js: &jetstream::Context,
    config: stream::Config,
) -> Result<stream::Stream, CreateStreamError> {
    let mut pauses = PAUSES.iter();
    loop {
        match js.create_stream(config.clone()).await {
            Err(error) if store_failed(error.kind()) => {
                let Some(pause) = pauses.next() else {
                    return Err(error);
                };
                tracing::warn!(stream = %config.name, %error, ?pause, "nats: creating the stream again");
                tokio::time::sleep(*pause).await;
            }
            answer => return answer,
        }
    }
}

/// Whether the server could not make the stream's store (and may on a later attempt).
fn store_failed(kind: CreateStreamErrorKind) -> bool {
    match kind {
        CreateStreamErrorKind::JetStream(error) => {
            error.code() == 500
                && [
                    jetstream::ErrorCode::STREAM_CREATE,
                    jetstream::ErrorCode::STREAM_STORE_FAILED,
                ]
                .contains(&error.error_code())
                && error.to_string().contains("store")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: usize, err_code: u64, description: &str) -> CreateStreamErrorKind {
        let error: jetstream::Error = serde_json::from_value(serde_json::json!({
            "code": code, "err_code": err_code, "description": description,
        }))
        .expect("a JetStream error");
        CreateStreamErrorKind::JetStream(error)
    }

    #[test]
    fn only_a_failed_store_is_asked_again() {
        assert!(store_failed(answer(
            500,
            10049,
            "error creating store for stream"
        )));
        assert!(!store_failed(answer(
            500,
            10049,
            "maximum number of streams reached"
        )));
        assert!(!store_failed(answer(
            400,
            10058,
            "stream name already in use with a different configuration"
        )));
        assert!(store_failed(answer(
            500,
            10077,
            "error creating store for stream"
        )));
        assert!(!store_failed(CreateStreamErrorKind::TimedOut));
    }
}
