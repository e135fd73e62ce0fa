//! Per-mount settings from the environment on the memory broker, which reads none.

use ruststream::memory::MemoryBroker;
use ruststream::{App, RunError};

#[tokio::test]
async fn the_memory_broker_refuses_every_setting_by_name() {
    let error = App::new(MemoryBroker::new())
        .mount("orders", |_: u32| async {})
        .mount_settings([("RUSTSTREAM_MOUNT__ORDERS__FORM", "list")])
        .start()
        .await
        .err()
        .expect("refused");
    assert!(matches!(error, RunError::Subscribe { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "subscribe to orders: bad option: setting form=\"list\" \
         (RUSTSTREAM_MOUNT__ORDERS__FORM): unknown key for the memory broker (it reads no settings)"
    );
}

#[tokio::test]
async fn a_malformed_variable_name_is_refused() {
    let error = App::new(MemoryBroker::new())
        .mount("orders", |_: u32| async {})
        .mount_settings([("RUSTSTREAM_MOUNT__ORDERS", "list")])
        .start()
        .await
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        "RUSTSTREAM_MOUNT__ORDERS: expected RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>"
    );
}

#[tokio::test]
async fn other_variables_are_left_alone() {
    let running = App::new(MemoryBroker::new())
        .mount("orders", |_: u32| async {})
        .mount_settings([("RUSTSTREAM_BROKER_URL", "memory://"), ("PATH", "/bin")])
        .start()
        .await
        .expect("starts");
    running.stop().await.expect("stops");
}

/// The process environment is the table unless one is given, even an empty one: a child
/// process of this test binary runs `environment_child` with a misspelt variable set
/// (a test cannot set a variable of its own process without `unsafe`).
#[test]
fn the_environment_is_the_table_unless_one_is_given() {
    let exe = std::env::current_exe().expect("this test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", "environment_child", "--ignored", "--nocapture"])
        .env("RUSTSTREAM_MOUNT__ORDRES__FORM", "list")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("both starts checked"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by the_environment_is_the_table_unless_one_is_given, with its variable set"]
async fn environment_child() {
    // Only the test above sets the variable; run on its own (`--include-ignored`), this
    // helper has nothing to check.
    if std::env::var_os("RUSTSTREAM_MOUNT__ORDRES__FORM").is_none() {
        return;
    }
    let error = App::new(MemoryBroker::new())
        .mount("orders", |_: u32| async {})
        .start()
        .await
        .err()
        .expect("the misspelt variable is read and refused");
    assert_eq!(
        error.to_string(),
        "RUSTSTREAM_MOUNT__ORDRES__FORM: names no mount (mounted: ORDERS)"
    );
    let running = App::new(MemoryBroker::new())
        .mount("orders", |_: u32| async {})
        .mount_settings(Vec::<(String, String)>::new())
        .start()
        .await
        .expect("an empty table: the environment is not read");
    running.stop().await.expect("stops");
    println!("environment_child: both starts checked");
}
