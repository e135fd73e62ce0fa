//! A PEM file of CA certificates: read, parsed, and added to a root store.

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// A PEM file of CA certificates, read and parsed: what a connection trusts besides (or
/// instead of) the default roots.
///
/// [`read`](Self::read) fails if the file cannot be read, is not valid PEM, or holds no
/// `CERTIFICATE` block; [`add_to`](Self::add_to) fails if one of the certificates is not
/// usable as a root. Every error names the file.
///
/// ```no_run
/// use ruststream_adapter::tls::CaFile;
/// use rustls::RootCertStore;
///
/// let mut roots = RootCertStore::empty();
/// let added = CaFile::read("/etc/ssl/private-ca.pem")?.add_to(&mut roots)?;
/// assert!(added > 0);
/// # Ok::<(), ruststream_adapter::tls::CaFileError>(())
/// ```
#[derive(Debug, Clone)]
pub struct CaFile {
    path: PathBuf,
    pem: Vec<u8>,
    certificates: Vec<CertificateDer<'static>>,
}

/// Why a [`CaFile`] could not be read or used; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaFileError {
    /// The file could not be read.
    #[error("cannot read CA file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        #[source]
        error: std::io::Error,
    },
    /// A PEM block of the file is broken.
    #[error("CA file {} is not valid PEM: {error}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        #[source]
        error: rustls::pki_types::pem::Error,
    },
    /// The file holds no `CERTIFICATE` block.
    #[error("CA file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A certificate of the file cannot be a root (not X.509, or not a CA's).
    #[error("CA file {}: certificate {number} is not usable: {error}", path.display())]
    Unusable {
        /// The file.
        path: PathBuf,
        /// Which certificate of the file, from 1.
        number: usize,
        /// What rustls said.
        #[source]
        error: rustls::Error,
    },
}

impl CaFile {
    /// Reads the file at `path` and parses its `CERTIFICATE` blocks (other blocks are
    /// skipped).
    pub fn read(path: impl Into<PathBuf>) -> Result<Self, CaFileError> {
        let path = path.into();
        let pem = match std::fs::read(&path) {
            Ok(pem) => pem,
            Err(error) => return Err(CaFileError::Read { path, error }),
        };
        let mut certificates = Vec::new();
        for certificate in CertificateDer::pem_slice_iter(&pem) {
            match certificate {
                Ok(certificate) => certificates.push(certificate),
                Err(error) => return Err(CaFileError::Pem { path, error }),
            }
        }
        if certificates.is_empty() {
            return Err(CaFileError::Empty { path });
        }
        Ok(Self {
            path,
            pem,
            certificates,
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its certificates (DER), in the file's order; never empty.
    pub fn certificates(&self) -> &[CertificateDer<'static>] {
        &self.certificates
    }

    /// The file as it was read, for a client library that takes PEM text.
    pub fn pem(&self) -> &[u8] {
        &self.pem
    }

    /// Adds every certificate to `roots`, returning how many.
    pub fn add_to(&self, roots: &mut RootCertStore) -> Result<usize, CaFileError> {
        for (i, certificate) in self.certificates.iter().enumerate() {
            roots
                .add(certificate.clone())
                .map_err(|error| CaFileError::Unusable {
                    path: self.path.clone(),
                    number: i + 1,
                    error,
                })?;
        }
        Ok(self.certificates.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA made with openssl for these tests (valid for a century).
    const CA: &[u8] = include_bytes!("testdata/ca.pem");

    /// A file of its own for `content`, removed on drop.
    struct Temp(PathBuf);

    impl Temp {
        fn new(name: &str, content: &[u8]) -> Self {
            let path = std::env::temp_dir().join(format!(
                "ruststream-adapter-tls-{}-{name}",
                std::process::id()
            ));
            std::fs::write(&path, content).expect("write a temporary file");
            Self(path)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn read_error(content: &[u8], name: &str) -> String {
        let file = Temp::new(name, content);
        match CaFile::read(&file.0) {
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains(&file.0.display().to_string()), "{message}");
                message
            }
            Ok(_) => panic!("{name} was read as a CA file"),
        }
    }

    #[test]
    fn a_ca_file_is_read_and_added_to_the_roots() {
        let mut text = b"a comment before the block\n".to_vec();
        text.extend_from_slice(CA);
        text.extend_from_slice(CA);
        let file = Temp::new("good", &text);
        let ca = CaFile::read(&file.0).expect("a CA file");
        assert_eq!(ca.path(), file.0);
        assert_eq!(ca.certificates().len(), 2);
        assert_eq!(ca.pem(), &text[..]);
        let mut roots = RootCertStore::empty();
        assert_eq!(ca.add_to(&mut roots).expect("usable"), 2);
        assert!(!roots.is_empty());
    }

    #[test]
    fn a_missing_file_is_a_clear_error() {
        let error = CaFile::read("/nonexistent/ruststream/ca.pem").expect_err("no such file");
        assert!(matches!(error, CaFileError::Read { .. }));
        let message = error.to_string();
        assert!(
            message.starts_with("cannot read CA file /nonexistent/ruststream/ca.pem: "),
            "{message}"
        );
    }

    #[test]
    fn a_file_without_a_certificate_is_a_clear_error() {
        let message = read_error(b"\x30\x82\x01\x0a not PEM at all", "not-pem");
        assert!(message.contains("holds no PEM certificate"), "{message}");
    }

    #[test]
    fn a_broken_pem_block_is_a_clear_error() {
        let message = read_error(b"-----BEGIN CERTIFICATE-----\n!!!\n", "broken");
        assert!(message.contains("is not valid PEM"), "{message}");
    }

    #[test]
    fn a_certificate_block_that_is_no_certificate_is_a_clear_error() {
        let file = Temp::new(
            "bad-cert",
            b"-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
        );
        let ca = CaFile::read(&file.0).expect("valid PEM");
        let error = ca
            .add_to(&mut RootCertStore::empty())
            .expect_err("not a certificate");
        let message = error.to_string();
        assert!(message.contains("certificate 1 is not usable"), "{message}");
        assert!(message.contains(&file.0.display().to_string()), "{message}");
    }
}
