//! Where the cluster is and how to talk to it: the bootstrap servers, TLS and SASL,
//! set alike on every librdkafka client the adapter makes.

use std::fmt;
use std::path::PathBuf;

use rdkafka::ClientConfig;

/// The cluster a broker talks to: every client of the adapter (consumers, the producer,
/// admin and tools clients) is made from [`config`](Self::config).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Cluster {
    /// `host:port`, comma-separated, as librdkafka's `bootstrap.servers`.
    servers: String,
    /// `kafkas://`: TLS.
    pub(crate) tls: Option<Tls>,
    /// A user in the URL: SASL.
    pub(crate) sasl: Option<Sasl>,
}

/// TLS to every server (`kafkas://`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tls {
    /// `tls_ca_file`'s certificates (PEM), trusted instead of the system's.
    pub(crate) ca_pem: Option<String>,
    /// `tls_cert_file` and `tls_key_file`: a client certificate and its key (PEM).
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

/// SASL: the URL's user and password, by `mechanism`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Sasl {
    pub(crate) user: String,
    pub(crate) password: String,
    /// `sasl_mechanism`; `None`: the strongest the broker offers, chosen at connect.
    pub(crate) mechanism: Option<Mechanism>,
}

/// A SASL mechanism librdkafka speaks with a user and a password.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    /// What this build can speak, the strongest first: SCRAM needs librdkafka built
    /// with OpenSSL (the `tls` feature).
    pub(crate) const SPOKEN: &'static [Mechanism] = if cfg!(feature = "tls") {
        &[Self::ScramSha512, Self::ScramSha256, Self::Plain]
    } else {
        &[Self::Plain]
    };

    /// Its name, as Kafka and librdkafka spell it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (any case).
    pub(crate) fn named(name: &str) -> Option<Self> {
        [Self::Plain, Self::ScramSha256, Self::ScramSha512]
            .into_iter()
            .find(|mechanism| mechanism.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The strongest of [`SPOKEN`](Self::SPOKEN) that a broker offering `offered` takes.
    pub(crate) fn strongest_of(offered: &[&str]) -> Option<Self> {
        Self::SPOKEN.iter().copied().find(|mechanism| {
            offered
                .iter()
                .any(|name| name.trim().eq_ignore_ascii_case(mechanism.name()))
        })
    }
}

impl Cluster {
    /// The cluster at `servers`, in plain text and without SASL.
    pub(crate) fn plain(servers: impl Into<String>) -> Self {
        Self {
            servers: servers.into(),
            tls: None,
            sasl: None,
        }
    }

    /// The bootstrap servers, as given.
    pub(crate) fn servers(&self) -> &str {
        &self.servers
    }

    /// A client configuration for this cluster: the servers, and the security protocol
    /// with its TLS and SASL settings. A SASL mechanism not chosen yet is the strongest
    /// this build speaks.
    pub(crate) fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.servers);
        let protocol = match (&self.tls, &self.sasl) {
            (None, None) => "plaintext",
            (Some(_), None) => "ssl",
            (None, Some(_)) => "sasl_plaintext",
            (Some(_), Some(_)) => "sasl_ssl",
        };
        config.set("security.protocol", protocol);
        if let Some(tls) = &self.tls {
            // Servers' names checked against their certificates: librdkafka's default
            // since 1.9, declared so that no build or default change turns it off.
            config.set("ssl.endpoint.identification.algorithm", "https");
            if let Some(pem) = &tls.ca_pem {
                config.set("ssl.ca.pem", pem);
            }
            if let Some((cert, key)) = &tls.client {
                config
                    .set("ssl.certificate.location", cert.to_string_lossy())
                    .set("ssl.key.location", key.to_string_lossy());
            }
        }
        if let Some(sasl) = &self.sasl {
            let mechanism = sasl.mechanism.unwrap_or(Mechanism::SPOKEN[0]);
            config
                .set("sasl.mechanism", mechanism.name())
                .set("sasl.username", &sasl.user)
                .set("sasl.password", &sasl.password);
        }
        config
    }

    /// Where the SASL mechanism is not chosen and `refusal` is librdkafka's answer to a
    /// broker that does not take the one tried: the strongest this build speaks of the
    /// ones the broker offers, `Err` saying so where it speaks none of them. `Ok(None)`:
    /// nothing to choose (the refusal is about something else).
    pub(crate) fn negotiate(&mut self, refusal: &str) -> Result<Option<Mechanism>, String> {
        let Some(sasl) = self.sasl.as_mut().filter(|sasl| sasl.mechanism.is_none()) else {
            return Ok(None);
        };
        let Some(offered) = offered(refusal) else {
            return Ok(None);
        };
        match Mechanism::strongest_of(&offered) {
            Some(mechanism) if mechanism != Mechanism::SPOKEN[0] => {
                sasl.mechanism = Some(mechanism);
                Ok(Some(mechanism))
            }
            // The one tried: the refusal was not about the mechanism after all.
            Some(_) => Ok(None),
            None => Err(format!(
                "the broker offers the SASL mechanisms {}, and this client speaks {}{}",
                offered.join(", "),
                Mechanism::SPOKEN
                    .iter()
                    .map(|mechanism| mechanism.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                if cfg!(feature = "tls") {
                    ""
                } else {
                    " (SCRAM needs the tls feature of ruststream-kafka)"
                }
            )),
        }
    }
}

/// The mechanisms a broker offers, from librdkafka's refusal of the one it was asked
/// ("… broker's supported mechanisms: SCRAM-SHA-256,SCRAM-SHA-512").
fn offered(refusal: &str) -> Option<Vec<&str>> {
    const SAID: &str = "broker's supported mechanisms:";
    let (_, list) = refusal.split_once(SAID)?;
    let offered: Vec<&str> = list
        .split([',', ' '])
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    (!offered.is_empty()).then_some(offered)
}

/// The password never shows.
impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("servers", &self.servers)
            .field("tls", &self.tls.as_ref().map(|_| "on"))
            .field("sasl", &self.sasl)
            .finish()
    }
}

impl fmt::Debug for Sasl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sasl")
            .field("user", &self.user)
            .field("password", &"***")
            .field("mechanism", &self.mechanism)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{Cluster, Mechanism, Sasl, Tls, offered};

    fn sasl(mechanism: Option<Mechanism>) -> Option<Sasl> {
        Some(Sasl {
            user: "alice".into(),
            password: "s3cret".into(),
            mechanism,
        })
    }

    #[test]
    fn each_form_sets_its_security_protocol() {
        let plain = Cluster::plain("a:9092,b:9092");
        let config = plain.config();
        assert_eq!(config.get("bootstrap.servers"), Some("a:9092,b:9092"));
        assert_eq!(config.get("security.protocol"), Some("plaintext"));
        assert_eq!(config.get("sasl.username"), None);

        let tls = Cluster {
            tls: Some(Tls {
                ca_pem: Some("PEM".into()),
                client: Some(("/c.pem".into(), "/k.pem".into())),
            }),
            ..plain.clone()
        };
        let config = tls.config();
        assert_eq!(config.get("security.protocol"), Some("ssl"));
        assert_eq!(config.get("ssl.ca.pem"), Some("PEM"));
        assert_eq!(
            config.get("ssl.endpoint.identification.algorithm"),
            Some("https")
        );
        assert_eq!(config.get("ssl.certificate.location"), Some("/c.pem"));
        assert_eq!(config.get("ssl.key.location"), Some("/k.pem"));

        let sasl_ssl = Cluster {
            sasl: sasl(Some(Mechanism::ScramSha256)),
            ..tls
        };
        let config = sasl_ssl.config();
        assert_eq!(config.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-256"));
        assert_eq!(config.get("sasl.username"), Some("alice"));
        assert_eq!(config.get("sasl.password"), Some("s3cret"));

        let sasl_plain = Cluster {
            sasl: sasl(None),
            ..plain
        };
        let config = sasl_plain.config();
        assert_eq!(config.get("security.protocol"), Some("sasl_plaintext"));
        assert_eq!(
            config.get("sasl.mechanism"),
            Some(Mechanism::SPOKEN[0].name()),
            "not chosen yet: the strongest spoken"
        );
    }

    #[test]
    fn the_password_never_shows() {
        let cluster = Cluster {
            sasl: sasl(None),
            ..Cluster::plain("a:9092")
        };
        let shown = format!("{cluster:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("alice"), "{shown}");
    }

    #[test]
    fn the_offered_mechanisms_are_read_from_librdkafka_s_refusal() {
        let said = "127.0.0.1:9094/bootstrap: SASL SCRAM-SHA-512 mechanism handshake failed: \
                    Broker: Unsupported SASL mechanism: broker's supported mechanisms: \
                    PLAIN,SCRAM-SHA-256";
        assert_eq!(offered(said), Some(vec!["PLAIN", "SCRAM-SHA-256"]));
        assert_eq!(offered("SASL authentication error: bad password"), None);
        assert_eq!(offered("broker's supported mechanisms: "), None);
    }

    #[test]
    fn negotiation_takes_the_strongest_offered_that_is_spoken() {
        let refusal = |offered: &str| {
            format!(
                "SASL {} mechanism handshake failed: Broker: Unsupported SASL mechanism: \
                 broker's supported mechanisms: {offered}",
                Mechanism::SPOKEN[0].name()
            )
        };
        let mut cluster = Cluster {
            sasl: sasl(None),
            ..Cluster::plain("a:9092")
        };
        // (offered, chosen; None: nothing chosen, Err: none spoken)
        let mut table: Vec<(&str, Result<Option<Mechanism>, ()>)> =
            vec![("GSSAPI,OAUTHBEARER", Err(()))];
        if cfg!(feature = "tls") {
            table.extend([
                ("GSSAPI,PLAIN", Ok(Some(Mechanism::Plain))),
                ("PLAIN,SCRAM-SHA-256", Ok(Some(Mechanism::ScramSha256))),
                // The one tried is offered: the refusal is about something else.
                ("SCRAM-SHA-512", Ok(None)),
            ]);
        } else {
            // PLAIN was tried: the refusal is about something else.
            table.push(("GSSAPI,PLAIN", Ok(None)));
        }
        for (offers, expected) in table {
            let mut asked = cluster.clone();
            let got = asked.negotiate(&refusal(offers));
            match (&got, &expected) {
                (Ok(chosen), Ok(want)) => {
                    assert_eq!(chosen, want, "{offers}");
                    assert_eq!(asked.sasl.as_ref().and_then(|s| s.mechanism), *want);
                }
                (Err(why), Err(())) => assert!(why.contains("GSSAPI"), "{why}"),
                _ => panic!("{offers}: {got:?}"),
            }
        }
        // Chosen by the URL: never negotiated.
        cluster.sasl = sasl(Some(Mechanism::Plain));
        assert_eq!(cluster.negotiate(&refusal("SCRAM-SHA-256")), Ok(None));
        // No SASL: nothing to negotiate.
        assert_eq!(
            Cluster::plain("a:9092").negotiate(&refusal("PLAIN")),
            Ok(None)
        );
    }

    #[test]
    fn mechanisms_are_named_in_any_case() {
        assert_eq!(
            Mechanism::named("scram-sha-512"),
            Some(Mechanism::ScramSha512)
        );
        assert_eq!(Mechanism::named(" PLAIN "), Some(Mechanism::Plain));
        assert_eq!(Mechanism::named("GSSAPI"), None);
    }
}
