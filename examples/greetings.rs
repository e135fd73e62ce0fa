//! The running guide's publishing service (docs/running.md, "Publishing"): publishes
//! two greetings, waits for both to be settled, stops.

use ruststream::{App, Settled, memory::MemoryBroker};
use tokio::sync::mpsc;

async fn greet(name: String) {
    println!("hello, {name}");
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (tx, mut settled) = mpsc::unbounded_channel();
    let running = App::new(MemoryBroker::new())
        .mount("greetings", greet)
        .after_settle(move |s: &Settled| {
            let _ = tx.send(s.verdict());
        })
        .start()
        .await?;

    let publisher = running.publisher();
    publisher.publish("greetings", "ada").await?;
    publisher
        .message("greetings", "grace")
        .correlation_id("req-7")
        .header("tenant", "acme")
        .send()
        .await?;

    for _ in 0..2 {
        settled.recv().await;
    }
    running.stop().await?;
    Ok(())
}
