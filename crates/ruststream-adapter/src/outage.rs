//! Whether a lost connection was said: an outage is reported once (one WARN, one error
//! for the runtime) however many tries it takes to end, and its end once.

/// The state of one connection's outage.
///
/// ```
/// use ruststream_adapter::Outage;
///
/// let mut outage = Outage::default();
/// assert!(outage.lost(), "the first failure is said");
/// assert!(!outage.lost(), "the tries after it are not");
/// assert!(outage.back(), "the end of a said outage is said");
/// assert!(!outage.back(), "a connection that works is not news");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outage {
    said: bool,
}

impl Outage {
    /// A try failed: whether to say so (the first failure since the connection last
    /// worked).
    pub fn lost(&mut self) -> bool {
        !std::mem::replace(&mut self.said, true)
    }

    /// The connection works: whether an outage was said and is now over.
    pub fn back(&mut self) -> bool {
        std::mem::take(&mut self.said)
    }
}
