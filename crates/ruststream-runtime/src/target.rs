//! Publish targets: the addresses a service declares it publishes to.

use ruststream_core::Address;

/// An address the service publishes to, declared with
/// [`App::publishes`](crate::App::publishes) so that descriptions of the service (its
/// AsyncAPI document) show it. Declaring one changes nothing at run time: publishers
/// publish to any address.
///
/// ```
/// use ruststream::{App, memory::MemoryBroker, publisher::PublishTarget};
///
/// let app = App::new(MemoryBroker::new())
///     .publishes(PublishTarget::new("orders.shipped").description("orders on their way"));
/// # let _ = app;
/// ```
#[derive(Debug, Clone)]
pub struct PublishTarget {
    pub(crate) address: Address,
    pub(crate) description: Option<String>,
    #[cfg(feature = "asyncapi")]
    pub(crate) payload: Option<crate::schema::PayloadSchema>,
}

impl PublishTarget {
    /// A target at `address`, its payload not described.
    pub fn new(address: impl Into<Address>) -> Self {
        Self {
            address: address.into(),
            description: None,
            #[cfg(feature = "asyncapi")]
            payload: None,
        }
    }

    /// The address published to.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// What is published there, in a sentence.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Documents the payload as `T` (feature `asyncapi`).
    ///
    /// ```
    /// use ruststream::publisher::PublishTarget;
    ///
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Shipped { id: u64 }
    ///
    /// let target = PublishTarget::new("orders.shipped").payload::<Shipped>();
    /// # let _ = target;
    /// ```
    #[cfg(feature = "asyncapi")]
    pub fn payload<T: schemars::JsonSchema + 'static>(mut self) -> Self {
        self.payload = Some(crate::schema::PayloadSchema::of::<T>());
        self
    }
}

impl<T: Into<Address>> From<T> for PublishTarget {
    fn from(address: T) -> Self {
        Self::new(address)
    }
}
