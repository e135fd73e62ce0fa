//! Per-mount settings from the environment: `RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>=value`.

use ruststream_core::Setting;

/// The start of a per-mount setting's variable name.
pub const MOUNT_ENV_PREFIX: &str = "RUSTSTREAM_MOUNT__";

/// An address as it appears in variable names: ASCII letters and digits upper-cased,
/// every other character `_` (`orders.dead` is `ORDERS_DEAD`).
///
/// ```
/// assert_eq!(ruststream::mount::mount_env_name("orders.dead"), "ORDERS_DEAD");
/// assert_eq!(ruststream::mount::mount_env_name("/queues/a-b"), "_QUEUES_A_B");
/// ```
pub fn mount_env_name(address: &str) -> String {
    address
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// One variable of the table: the address part of its name and the setting.
pub(crate) struct Entry {
    pub(crate) address: String,
    pub(crate) setting: Setting,
}

/// A variable whose name is not `RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>`.
#[derive(Debug)]
pub(crate) struct BadName(pub(crate) String);

/// The per-mount settings among `vars` (other variables are left alone).
pub(crate) fn table(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<Entry>, BadName> {
    let mut entries = Vec::new();
    for (name, value) in vars {
        let Some(rest) = name.strip_prefix(MOUNT_ENV_PREFIX) else {
            continue;
        };
        match rest.rsplit_once("__") {
            Some((address, key)) if !address.is_empty() && !key.is_empty() => {
                entries.push(Entry {
                    address: address.to_owned(),
                    setting: Setting::new(key, value, name.clone()),
                });
            }
            _ => return Err(BadName(name)),
        }
    }
    // The same order whatever the environment's: a later key wins, so be predictable.
    entries.sort_by(|a, b| a.setting.origin.cmp(&b.setting.origin));
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn variables_name_an_address_and_a_key() {
        let table = table(vars(&[
            ("PATH", "/bin"),
            ("RUSTSTREAM_MOUNT__ORDERS_DEAD__MIN_IDLE", "30s"),
            ("RUSTSTREAM_MOUNT__ORDERS__FORM", "list"),
        ]))
        .expect("table");
        let found: Vec<_> = table
            .iter()
            .map(|e| {
                (
                    e.address.as_str(),
                    e.setting.key.as_str(),
                    e.setting.origin.as_str(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "ORDERS_DEAD",
                    "min_idle",
                    "RUSTSTREAM_MOUNT__ORDERS_DEAD__MIN_IDLE"
                ),
                ("ORDERS", "form", "RUSTSTREAM_MOUNT__ORDERS__FORM"),
            ]
        );
    }

    #[test]
    fn a_name_without_a_key_is_refused() {
        for name in [
            "RUSTSTREAM_MOUNT__ORDERS",
            "RUSTSTREAM_MOUNT____FORM",
            "RUSTSTREAM_MOUNT__ORDERS__",
        ] {
            let refused = table(vars(&[(name, "x")]));
            assert!(
                matches!(refused, Err(BadName(ref n)) if n == name),
                "{name}"
            );
        }
    }
}
