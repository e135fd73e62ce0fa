//! TLS for `amqps://` (feature `tls`): the roots a connection trusts, or the caller's own
//! rustls configuration, and the handshake.
//!
//! The crate does the handshake itself, right after the TCP connect, and opens the AMQP
//! connection on the TLS stream (fe2o3-amqp's "alternative TLS establishment"): that is
//! what RabbitMQ's TLS listener speaks (no AMQP TLS protocol header first), and the
//! frame patch of [`crate::transport`] then sees the plain frames under TLS too.

use std::path::PathBuf;
use std::sync::Arc;

use ruststream_adapter::tls::{CaFile, client_config};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use crate::error::ConnectError;

/// The TLS part of [`ConnectOptions`](crate::ConnectOptions).
#[derive(Clone)]
pub(crate) struct TlsOptions {
    pub(crate) ca_files: Vec<PathBuf>,
    pub(crate) default_roots: bool,
    pub(crate) client_config: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A caller's configuration may hold a client key: it is not printed.
        f.debug_struct("TlsOptions")
            .field("ca_files", &self.ca_files)
            .field("default_roots", &self.default_roots)
            .field("client_config", &self.client_config.as_ref().map(|_| ".."))
            .finish()
    }
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            ca_files: Vec::new(),
            default_roots: true,
            client_config: None,
        }
    }
}

impl PartialEq for TlsOptions {
    fn eq(&self, other: &Self) -> bool {
        self.ca_files == other.ca_files
            && self.default_roots == other.default_roots
            && match (&self.client_config, &other.client_config) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for TlsOptions {}

/// What one connection needs to do its handshake: built once, when the broker connects,
/// so that a bad CA file fails `connect` and not each reconnection.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// The connector for `host` (a DNS name or an IP address, checked against the
    /// server certificate's subjectAltName).
    pub(crate) fn new(options: &TlsOptions, host: &str) -> Result<Self, ConnectError> {
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|e| ConnectError::Tls(format!("{host:?} is not a TLS server name: {e}")))?;
        let config = match &options.client_config {
            Some(config) => config.clone(),
            None => Arc::new(rustls_config(options)?),
        };
        Ok(Self {
            connector: tokio_rustls::TlsConnector::from(config),
            server_name,
        })
    }

    /// The TLS handshake on `tcp`.
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
        addr: &str,
    ) -> Result<TlsStream<TcpStream>, ConnectError> {
        self.connector
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| ConnectError::Tls(format!("handshake with {addr} failed: {e}")))
    }
}

fn rustls_config(options: &TlsOptions) -> Result<ClientConfig, ConnectError> {
    let mut roots = RootCertStore::empty();
    if options.default_roots {
        // What fe2o3-amqp trusts for `amqps://`: the Mozilla roots of webpki-roots.
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    for path in &options.ca_files {
        CaFile::read(path)
            .and_then(|ca| ca.add_to(&mut roots))
            .map_err(|e| ConnectError::Tls(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ConnectError::Tls(
            "no root certificate to trust: default roots switched off and no CA file given".into(),
        ));
    }
    // On the process's default provider if one is installed, else ring (the one the
    // `tls` feature brings).
    client_config(roots).map_err(|e| ConnectError::Tls(format!("tls protocol versions: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, content: &[u8]) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("ruststream-amqp-tls-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        path
    }

    fn error(options: &TlsOptions) -> String {
        match Tls::new(options, "localhost") {
            Err(ConnectError::Tls(message)) => message,
            Err(other) => panic!("not a TLS error: {other}"),
            Ok(_) => panic!("a bad CA file was accepted"),
        }
    }

    #[test]
    fn a_missing_ca_file_is_a_clear_error() {
        let options = TlsOptions {
            ca_files: vec!["/nonexistent/ruststream/ca.pem".into()],
            ..TlsOptions::default()
        };
        let message = error(&options);
        assert!(
            message.contains("cannot read CA file /nonexistent/ruststream/ca.pem"),
            "{message}"
        );
    }

    #[test]
    fn a_file_without_pem_certificates_is_a_clear_error() {
        let path = temp_file("not-pem", b"\x30\x82\x01\x0a not PEM at all");
        let options = TlsOptions {
            ca_files: vec![path.clone()],
            ..TlsOptions::default()
        };
        let message = error(&options);
        assert!(message.contains("holds no PEM certificate"), "{message}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_pem_certificate_that_is_not_one_is_a_clear_error() {
        let path = temp_file(
            "bad-cert",
            b"-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
        );
        let options = TlsOptions {
            ca_files: vec![path.clone()],
            ..TlsOptions::default()
        };
        let message = error(&options);
        assert!(message.contains("certificate 1 is not usable"), "{message}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn no_roots_at_all_is_an_error() {
        let options = TlsOptions {
            default_roots: false,
            ..TlsOptions::default()
        };
        assert!(error(&options).contains("no root certificate"));
    }

    #[test]
    fn default_roots_and_ip_addresses_are_fine() {
        assert!(Tls::new(&TlsOptions::default(), "localhost").is_ok());
        assert!(Tls::new(&TlsOptions::default(), "127.0.0.1").is_ok());
        assert!(Tls::new(&TlsOptions::default(), "::1").is_ok());
    }

    #[test]
    fn options_compare_configs_by_identity() {
        let config = Arc::new(rustls_config(&TlsOptions::default()).unwrap());
        let a = TlsOptions {
            client_config: Some(config.clone()),
            ..TlsOptions::default()
        };
        assert_eq!(a, a.clone());
        let b = TlsOptions {
            client_config: Some(Arc::new(ClientConfig::clone(&config))),
            ..TlsOptions::default()
        };
        assert_ne!(a, b);
    }
}
