//! TLS for the adapters (feature `tls`): CA files read and parsed once, with errors that
//! name the file, and the rustls client configuration they build from them.
//!
//! Each adapter still chooses its own roots (webpki's, the system's) and hands the
//! result to its client library its own way; what is the same everywhere is here.

mod ca_file;
mod config;

pub use ca_file::{CaFile, CaFileError};
pub use config::client_config;
