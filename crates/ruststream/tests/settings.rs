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
