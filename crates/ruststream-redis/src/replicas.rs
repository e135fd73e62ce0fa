//! `WAIT` after a write: a publish done only once enough replicas have it.

use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::{ClusterHash, CustomCommand, Value};

/// How many replicas must have a write, and how long to wait for them
/// ([`Settings::wait_for_replicas`](crate::Settings::wait_for_replicas)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Replicas {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

/// Why a write was not confirmed by the replicas.
#[derive(Debug)]
pub(crate) enum Unconfirmed {
    /// The command failed (the connection, the server).
    Failed(fred::error::Error),
    /// Fewer replicas than asked acknowledged it in time.
    Short {
        got: u64,
        wanted: u32,
        timeout: Duration,
    },
}

impl Replicas {
    /// Waits until the replicas have every write `client` sent so far (the one just made
    /// among them: `WAIT` counts the replication offset of its connection), on the node
    /// serving `key`.
    pub(crate) async fn wait(&self, client: &Client, key: &str) -> Result<(), Unconfirmed> {
        let slot = fred::util::redis_keyslot(key.as_bytes());
        let cmd = CustomCommand::new_static("WAIT", ClusterHash::Custom(slot), false);
        let ms = u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let args = vec![
            Value::from(i64::from(self.replicas)),
            Value::from(i64::try_from(ms).unwrap_or(i64::MAX)),
        ];
        let got = client
            .custom::<Value, Value>(cmd, args)
            .await
            .map_err(Unconfirmed::Failed)?
            .as_u64()
            .unwrap_or(0);
        if got >= u64::from(self.replicas) {
            Ok(())
        } else {
            Err(Unconfirmed::Short {
                got,
                wanted: self.replicas,
                timeout: self.timeout,
            })
        }
    }
}

impl std::fmt::Display for Unconfirmed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(e) => write!(f, "WAIT failed: {e}"),
            Self::Short {
                got,
                wanted,
                timeout,
            } => write!(
                f,
                "written to the master, but {got} of {wanted} replicas had it within \
                 {timeout:?} (WAIT): publishing again may duplicate it"
            ),
        }
    }
}
