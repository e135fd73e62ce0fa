//! `mqtts://`: the rustls configuration rumqttc connects with (feature `tls`).

use std::path::Path;
use std::sync::Arc;

use rumqttc::tokio_rustls::rustls::RootCertStore;
use rumqttc::{TlsConfiguration, Transport};
use ruststream_adapter::tls::{CaFile, client_config};

use crate::error::ConnectError;

/// TLS trusting the webpki roots and, if named, the certificates of `ca_file`.
pub(crate) fn transport(ca_file: Option<&Path>) -> Result<Transport, ConnectError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let ca = CaFile::read(path).map_err(|error| ConnectError::Tls(error.to_string()))?;
        ca.add_to(&mut roots)
            .map_err(|error| ConnectError::Tls(error.to_string()))?;
    }
    let config = client_config(roots).map_err(|error| ConnectError::Tls(error.to_string()))?;
    Ok(Transport::Tls(TlsConfiguration::Rustls(Arc::new(config))))
}
