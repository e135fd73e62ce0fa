// Functions that are not handlers: the framework's message and its rules, and no
// internal type (`Layered<H>`) offered as the fix.

#[derive(serde::Deserialize)]
struct Order {
    id: u64,
}

// The payload is not last.
async fn payload_first(order: Order, attempt: ruststream::Attempt) {
    let _ = (order.id, attempt);
}

// Not `async`.
fn not_async(order: String) {
    let _ = order;
}

// Returns what is not an outcome.
async fn count(order: String) -> usize {
    order.len()
}

fn main() {
    let _ = ruststream::Router::new().mount("orders", payload_first);
    let _ = ruststream::Router::new().mount("orders", not_async);
    let _ = ruststream::Router::new().mount("orders", count);
}
