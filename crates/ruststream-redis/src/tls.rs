//! TLS for `rediss://` (feature `tls`): the roots a connection trusts, or the caller's own
//! rustls configuration, turned into fred's connector.

use std::path::PathBuf;
use std::sync::Arc;

use fred::rustls::{ClientConfig, RootCertStore};
use fred::types::config::{TlsConfig, TlsConnector, TlsHostMapping};
use ruststream_adapter::tls::{CaFile, client_config};

use crate::ConnectError;

/// The TLS part of [`Settings`](crate::Settings).
#[derive(Clone)]
pub(crate) struct TlsSettings {
    pub(crate) ca_files: Vec<PathBuf>,
    pub(crate) system_roots: bool,
    pub(crate) client_config: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A caller's configuration may hold a client key: it is not printed.
        f.debug_struct("TlsSettings")
            .field("ca_files", &self.ca_files)
            .field("system_roots", &self.system_roots)
            .field("client_config", &self.client_config.as_ref().map(|_| ".."))
            .finish()
    }
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            ca_files: Vec::new(),
            system_roots: true,
            client_config: None,
        }
    }
}

impl TlsSettings {
    /// fred's TLS configuration: the caller's rustls configuration as it is, or one
    /// trusting the system's roots (unless switched off) and the CA files.
    pub(crate) fn fred_config(&self) -> Result<TlsConfig, ConnectError> {
        let config = match &self.client_config {
            Some(config) => ClientConfig::clone(config),
            None => self.rustls_config()?,
        };
        Ok(TlsConfig {
            connector: TlsConnector::from(config),
            hostnames: TlsHostMapping::None,
        })
    }

    fn rustls_config(&self) -> Result<ClientConfig, ConnectError> {
        let mut roots = RootCertStore::empty();
        if self.system_roots {
            // What fred itself trusts for `rediss://`: the platform's store (or the
            // files named by SSL_CERT_FILE / SSL_CERT_DIR).
            let native = fred::rustls_native_certs::load_native_certs();
            for error in &native.errors {
                tracing::warn!(%error, "redis tls: a system root certificate could not be read");
            }
            roots.add_parsable_certificates(native.certs);
        }
        for path in &self.ca_files {
            CaFile::read(path)
                .and_then(|ca| ca.add_to(&mut roots))
                .map_err(|e| ConnectError::Tls(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ConnectError::Tls(
                "no root certificate to trust: the system has none and no CA file was given".into(),
            ));
        }
        // On the process's default provider if one is installed, else ring (the one the
        // `tls` feature brings).
        client_config(roots).map_err(|e| ConnectError::Tls(format!("tls protocol versions: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, content: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "ruststream-redis-tls-{}-{name}",
            std::process::id()
        ));
        std::fs::write(&path, content).expect("write temp file");
        path
    }

    fn error(settings: &TlsSettings) -> String {
        match settings.fred_config() {
            Err(ConnectError::Tls(message)) => message,
            Err(other) => panic!("not a TLS error: {other}"),
            Ok(_) => panic!("a bad CA file was accepted"),
        }
    }

    #[test]
    fn a_missing_ca_file_is_a_clear_error() {
        let settings = TlsSettings {
            ca_files: vec!["/nonexistent/ruststream/ca.pem".into()],
            ..TlsSettings::default()
        };
        let message = error(&settings);
        assert!(
            message.contains("cannot read CA file /nonexistent/ruststream/ca.pem"),
            "{message}"
        );
    }

    #[test]
    fn a_file_without_pem_certificates_is_a_clear_error() {
        let path = temp_file("not-pem", b"this is not a certificate\n");
        let settings = TlsSettings {
            ca_files: vec![path.clone()],
            ..TlsSettings::default()
        };
        let message = error(&settings);
        assert!(message.contains("holds no PEM certificate"), "{message}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_pem_certificate_that_is_not_one_is_a_clear_error() {
        let path = temp_file(
            "bad-cert",
            b"-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
        );
        let settings = TlsSettings {
            ca_files: vec![path.clone()],
            system_roots: false,
            client_config: None,
        };
        let message = error(&settings);
        assert!(message.contains("certificate 1 is not usable"), "{message}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn no_roots_at_all_is_an_error() {
        let settings = TlsSettings {
            system_roots: false,
            ..TlsSettings::default()
        };
        assert!(error(&settings).contains("no root certificate"));
    }
}
