//! The configuration of the harness's own Mosquitto, the one the MQTT restart and black
//! hole scenarios use: written into its folder, with its persistence file beside it.
//!
//! Mosquitto keeps everything in memory and writes all of it (`mosquitto.db`: the
//! messages, the sessions with what each holds and their subscriptions, shared ones left
//! out; a new file, fsynced, renamed over the old one) when it saves: every
//! `autosave_interval` seconds (1,800 by default) and when it stops gracefully. A SIGKILL
//! loses what it acknowledged since its last save and had not handed on. This one saves
//! every second (`autosave_interval 1`; its clock counts whole seconds, so every one to
//! two). Saving at every change instead (`autosave_on_changes true`) would lose the
//! least, but the whole database is written each time: measured with 20,000 messages
//! and a SIGKILL every 3-5 s, a backlog of some 15,000 messages built up, Mosquitto
//! managed 40 saves a second, answered its clients' pings too late, and the run never
//! settled (30,000 duplicates, 15,000 messages still held after the drain). So the
//! scenario tells what Mosquitto acknowledged after its last save before a SIGKILL, and
//! lost, from every other loss (`tally.rs`), knowing when it saved from its file's time
//! (`saved_at`).
//!
//! `max_queued_messages 0` lets it queue without limit for a session: past the default,
//! 1,000, it drops what arrives for that session, after the publisher had its PUBACK, and
//! a session whose connection is black-holed goes on being sent to (a 5 s black hole at
//! 1,000 messages a second lost 1,965 of 5,000 on the machine's Mosquitto: its log says
//! "Outgoing messages are being dropped"). `sys_interval 1` has
//! its `$SYS` counters published every second (`sys.rs`). `user root` keeps the user it
//! is started as: run as root (as `scripts/soak` is), Mosquitto would otherwise switch
//! to the user `mosquitto`, who cannot write the run's folder.

use std::path::{Path, PathBuf};

/// The configuration file in the server's folder `dir`.
pub(crate) fn config_path(dir: &Path) -> PathBuf {
    dir.join("mosquitto.conf")
}

/// Writes the configuration of a Mosquitto on `port` keeping its data in `dir`; it
/// logs to `mosquitto.log` beside `dir` (with the run's other logs, kept after it).
pub(crate) fn configure(dir: &Path, port: u16) -> std::io::Result<()> {
    let log = dir.parent().unwrap_or(dir).join("mosquitto.log");
    let config = format!(
        "listener {port} 127.0.0.1\n\
         allow_anonymous true\n\
         persistence true\n\
         persistence_location {}/\n\
         autosave_interval 1\n\
         max_queued_messages 0\n\
         sys_interval 1\n\
         user root\n\
         log_dest file {}\n\
         log_timestamp_format %H:%M:%S\n",
        dir.display(),
        log.display()
    );
    std::fs::write(config_path(dir), config)
}

/// When the Mosquitto keeping its data in `dir` last saved it (ms): the time its
/// persistence file was written, each save being a new file renamed over the last.
pub(crate) fn saved_at(dir: &Path) -> Option<u64> {
    let written = std::fs::metadata(dir.join("mosquitto.db"))
        .and_then(|m| m.modified())
        .ok()?;
    let since = written.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}
