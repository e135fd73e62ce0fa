//! A lock file across the scenarios running on the machine: one holder at a time (the
//! file holds its pid), taken over when its holder is gone. The RabbitMQ restarts share
//! one (`restart.rs`); an MQTT run holds its broker's (`mqtt.rs`).

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;

/// The lock, removed when dropped.
pub(crate) struct Held(PathBuf);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Takes the lock at `path`, or says which live process holds it (a stale one, of a
/// process gone, is taken over).
pub(crate) fn take(path: &std::path::Path) -> std::io::Result<Result<Held, u32>> {
    let path = path.to_owned();
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => {
                std::fs::write(&path, std::process::id().to_string())?;
                return Ok(Ok(Held(path)));
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                let holder: Option<u32> = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|pid| pid.trim().parse().ok());
                match holder {
                    Some(pid) if std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                        return Ok(Err(pid));
                    }
                    // Written just now (no pid yet): the holder is alive.
                    None if fresh(&path) => return Ok(Err(0)),
                    _ => {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
            Err(error) => return Err(error),
        }
    }
}

/// Whether the file was made in the last second.
fn fresh(path: &std::path::Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| at.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_stale_locks_taken_over() {
        let path = std::env::temp_dir().join(format!("soak-lock-test-{}", std::process::id()));
        let held = take(&path).expect("io").expect("free");
        assert_eq!(take(&path).expect("io").err(), Some(std::process::id()));
        drop(held);
        assert!(!path.exists());
        // A lock left by a process that is gone (no such pid) is taken over.
        std::fs::write(&path, "4294967295").expect("write");
        let held = take(&path).expect("io").expect("stale lock taken over");
        drop(held);
        assert!(!path.exists());
    }
}
