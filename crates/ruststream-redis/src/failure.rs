//! Mapping client errors onto the contract's errors.

use fred::error::{Error, ErrorKind};
use ruststream_core::{AckError, PublishErrorKind};

/// Whether the error is about the connection rather than the command.
pub(crate) fn is_connection(error: &Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Timeout | ErrorKind::Routing
    )
}

/// A settlement error.
pub(crate) fn ack(error: &Error) -> AckError {
    if is_connection(error) {
        AckError::Disconnected
    } else {
        AckError::Refused(error.details().to_owned())
    }
}

/// A publish error kind.
pub(crate) fn publish(error: &Error) -> PublishErrorKind {
    if is_connection(error) {
        PublishErrorKind::Disconnected
    } else {
        PublishErrorKind::Refused(error.details().to_owned())
    }
}

/// Whether the server said the group (or the stream) does not exist.
pub(crate) fn is_nogroup(error: &Error) -> bool {
    error.details().starts_with("NOGROUP")
}
