//! The service of the running guide (docs/running.md): state, a router, hooks.

use ruststream::{App, Mount, Router, State, memory::MemoryBroker};
use std::time::Duration;

#[derive(Clone)]
struct Db {
    url: String,
}

async fn store(State(db): State<Db>, line: String) {
    println!("{line} -> {}", db.url);
}

async fn audit(line: String) {
    println!("audit: {line}");
}

fn audit_routes() -> Router {
    Router::new().mount("audit", audit)
}

#[tokio::main]
async fn main() -> Result<(), ruststream::RunError> {
    App::new(MemoryBroker::new())
        .state(Db {
            url: "postgres://localhost/app".into(),
        })
        .mount(Mount::new("lines").max_attempts(3).workers(4), store)
        .router(audit_routes())
        .on_start(|| println!("subscribed, handling"))
        .on_stop(|| println!("stopped handling"))
        .shutdown_timeout(Duration::from_secs(10))
        .run()
        .await
}
