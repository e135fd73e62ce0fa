//! A Mosquitto of a test's own, for settings the machine's broker does not have (a
//! maximum packet size, no queue limit): the machine's `/usr/sbin/mosquitto` on a free
//! port of 127.0.0.1, killed when dropped.
//!
//! ```no_run
//! use ruststream_conformance::mosquitto::Mosquitto;
//!
//! let own = Mosquitto::start("max_packet_size 4096\n");
//! let url = format!("mqtt://127.0.0.1:{}", own.port());
//! ```

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Mosquitto of this process's own.
#[derive(Debug)]
pub struct Mosquitto {
    child: Child,
    port: u16,
}

impl Mosquitto {
    /// Starts one listening on a free port, anonymous, without persistence, with the
    /// configuration lines `extra`; panics (saying how to install it) if it cannot run
    /// or does not listen within 10 s.
    pub fn start(extra: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let config = std::env::temp_dir().join(format!(
            "ruststream-mosquitto-{}-{port}.conf",
            std::process::id()
        ));
        std::fs::write(
            &config,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n{extra}"),
        )
        .expect("the configuration");
        let child = Command::new("/usr/sbin/mosquitto")
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot run /usr/sbin/mosquitto ({error}): `apt-get install mosquitto`")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id (for its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
