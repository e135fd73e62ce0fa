//! What the broker's parts (consumers, ackers, the publisher, the dead-letter tools)
//! share.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::watch;

use crate::pending::Pending;
use crate::schema::Names;
use crate::settings::Claim;
use crate::wake::Wake;

/// What the broker's parts share.
pub(crate) struct Inner {
    pub(crate) pool: PgPool,
    pub(crate) names: Names,
    pub(crate) claim: Claim,
    pub(crate) wake: Arc<Wake>,
    pub(crate) closed: watch::Sender<bool>,
    /// Give-backs on their way, which `close` waits for.
    pub(crate) pending: Pending,
}
