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

// (A return type that is no outcome is named too, with the outcome types listed; not
// pinned here: rustc spells `Reply<T>` with or without its path depending on the other
// crates the build links.)

fn main() {}
