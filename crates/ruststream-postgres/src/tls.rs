//! TLS to PostgreSQL: the URL's `sslmode` (and `sslrootcert`, `sslcert`, `sslkey`), read
//! by the client, which speaks TLS only when the crate's `tls` feature builds it in.

use ruststream_core::split_query;

use crate::ConnectError;

/// Whether this build speaks TLS to PostgreSQL.
pub(crate) const BUILT_IN: bool = cfg!(feature = "tls");

/// Refuses, in a build without TLS, a URL that needs it (`sslmode=require`,
/// `verify-ca`, `verify-full`, or a certificate file): the client would refuse it too,
/// without saying how to get TLS. `prefer` (the client's default) and `allow` connect
/// without TLS in such a build.
pub(crate) fn check(client_url: &str) -> Result<(), ConnectError> {
    if BUILT_IN {
        return Ok(());
    }
    let (_, query) = split_query(client_url, |_| false);
    let needs = query.iter().find(|s| match s.key.as_str() {
        "sslmode" => matches!(s.value.as_str(), "require" | "verify-ca" | "verify-full"),
        "sslrootcert" | "sslcert" | "sslkey" => true,
        _ => false,
    });
    match needs {
        Some(setting) => Err(ConnectError::BadUrl(format!(
            "{}={} needs TLS, and this build has none: turn on the `tls` feature of \
             ruststream-postgres (ruststream: `postgres-tls`)",
            setting.key, setting.value
        ))),
        None => Ok(()),
    }
}

#[cfg(all(test, not(feature = "tls")))]
mod tests {
    use super::check;

    #[test]
    fn a_url_that_needs_tls_is_refused_with_the_feature_to_turn_on() {
        for url in [
            "postgres://h/db?sslmode=require",
            "postgres://h/db?sslmode=verify-full",
            "postgres://h/db?schema=x&sslrootcert=/ca.pem",
        ] {
            let error = check(url).expect_err(url).to_string();
            assert!(error.contains("postgres-tls"), "{url}: {error}");
        }
        for url in [
            "postgres://h/db",
            "postgres://h/db?sslmode=prefer",
            "postgres://h/db?sslmode=disable",
        ] {
            assert!(check(url).is_ok(), "{url}");
        }
    }
}
