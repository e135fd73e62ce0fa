//! The harness declares what its subscriptions declare.

use std::sync::{Arc, Mutex};

use crate::Harness;
use crate::inbox::inbox;
use crate::observed::{Observed, snapshot};
use crate::recorder::acking;
use crate::service::Service;

/// A mount of the harness opens a subscription whose capabilities are the ones the
/// harness declares (the other checks skip by the declaration).
pub async fn declared_capabilities(h: &impl Harness) {
    let address = h.fresh_address();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let broker = Arc::new(Observed::new(h.broker().await, seen.clone()));
    let (outbox, _deliveries) = inbox("delivery");
    let mut service =
        Service::start_on(broker, |app| app.mount(h.mount(address), acking(outbox))).await;
    let opened = snapshot(&seen);
    service.stop_ok().await;
    assert_eq!(
        opened,
        [h.capabilities()],
        "{}: the subscription's capabilities differ from the harness's declaration",
        h.name()
    );
}
