//! The conformance suite on the in-memory broker: with every capability, and with
//! settling only (every retry a runtime copy).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream::memory::MemoryBroker;
use ruststream_conformance::Harness;
use ruststream_core::{Address, Broker, Capabilities};

/// One memory broker per check; each service gets a connection of its own.
struct Memory {
    broker: MemoryBroker,
    capabilities: Capabilities,
    next: AtomicUsize,
}

impl Memory {
    fn new(capabilities: Capabilities) -> Self {
        Self {
            broker: MemoryBroker::with_capabilities(capabilities),
            capabilities,
            next: AtomicUsize::new(0),
        }
    }
}

impl Harness for Memory {
    fn name(&self) -> &str {
        "memory"
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        // A clone is another connection to the same queues.
        Arc::new(self.broker.clone())
    }

    fn fresh_address(&self) -> Address {
        Address::new(format!(
            "conformance-{}",
            self.next.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }
}

mod full {
    use super::*;
    ruststream_conformance::conformance_tests!(Memory::new(MemoryBroker::FULL));
}

mod settles {
    use super::*;
    ruststream_conformance::conformance_tests!(Memory::new(Capabilities::SETTLES));
}
