// With #[debug_handler], each rule a handler breaks is named where it is broken.

#[derive(serde::Deserialize)]
struct Order {
    id: u64,
}

struct NotSerde;

// A borrowed payload.
#[ruststream::debug_handler]
async fn borrowed(order: &str) {
    let _ = order;
}

// The payload before an extractor.
#[ruststream::debug_handler]
async fn payload_first(order: Order, attempt: ruststream::Attempt) {
    let _ = (order.id, attempt);
}

// A last argument that is neither an extractor nor a payload.
#[ruststream::debug_handler]
async fn neither(order: NotSerde) {
    let _ = order;
}

// Not `async`.
#[ruststream::debug_handler]
fn not_async(order: String) {
    let _ = order;
}

// What is not an outcome.
#[ruststream::debug_handler]
async fn count(order: String) -> usize {
    order.len()
}

fn main() {}
