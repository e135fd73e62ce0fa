//! The running guide's service on the broker its URL names (docs/running.md,
//! "The broker, by URL"): `RUSTSTREAM_BROKER_URL=redis://127.0.0.1:6379`.

use ruststream::{App, Mount};

async fn place(order: String) {
    println!("{order}");
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("RUSTSTREAM_BROKER_URL").unwrap_or_else(|_| "memory://".into());
    App::with_broker(ruststream::connect(&url).await?)
        .mount(Mount::new("orders").max_attempts(3), place)
        .run()
        .await?;
    Ok(())
}
