//! Brokers by URL, beyond opening one: the connectors of this build, the server a URL
//! names, a URL without its password.
//!
//! [`connect`](crate::connect) (at the crate's root) opens the broker a URL names with
//! one of [`connectors`], the adapters this build's features turn on; [`server`]
//! describes that broker for the service's AsyncAPI document without connecting, and
//! [`redact`] is how every log line and error of ruststream shows a URL.

pub use crate::connect::{connectors, server};
pub use ruststream_core::redact;
