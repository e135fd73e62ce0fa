//! The rustls client configuration the adapters build from their roots.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};

/// A rustls client configuration trusting `roots`, without a client certificate, on
/// the process's default crypto provider if one is installed, else ring.
///
/// Never rustls' own guess of a provider, which panics when a build has both ring and
/// aws-lc-rs (another crate of the application may bring the second). Fails only if the
/// provider supports none of rustls' safe default protocol versions.
///
/// ```no_run
/// use ruststream_adapter::tls::{CaFile, client_config};
/// use rustls::RootCertStore;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut roots = RootCertStore::empty();
/// CaFile::read("/etc/ssl/private-ca.pem")?.add_to(&mut roots)?;
/// let config = std::sync::Arc::new(client_config(roots)?);
/// # let _ = config;
/// # Ok(())
/// # }
/// ```
pub fn client_config(roots: RootCertStore) -> Result<ClientConfig, rustls::Error> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_is_built_without_a_default_provider() {
        let mut roots = RootCertStore::empty();
        crate::tls::CaFile::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/tls/testdata/ca.pem"
        ))
        .expect("the test CA")
        .add_to(&mut roots)
        .expect("usable");
        let config = client_config(roots).expect("a config");
        assert!(!config.client_auth_cert_resolver.has_certs());
        assert!(client_config(RootCertStore::empty()).is_ok());
    }
}
