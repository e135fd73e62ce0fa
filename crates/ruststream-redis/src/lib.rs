//! Redis adapter for ruststream.
//!
//! (crate docs: see below)

mod acker;
mod broker;
mod client;
mod delayed;
mod entry;
mod error;
mod failure;
mod form;
mod frame;
mod keys;
mod options;
mod publisher;
mod reply;
mod url;

pub use broker::{RedisBroker, Settings};
pub use error::ConnectError;
pub use options::{
    Claiming, DelayedRetry, Form, GroupStart, List, Pattern, PubSub, ReliableList, Stream, Trim,
};
pub use publisher::{RedisPublisher, Target};
