// A borrowed payload: rustc reports the higher-ranked `Deserialize` bound itself (it
// does not consult `#[diagnostic::on_unimplemented]` for lifetimes); the message names
// `&str`, and the handler guide and `Handler`'s documentation say to take `String`.

async fn borrowed(order: &str) {
    let _ = order;
}

fn main() {
    let _ = ruststream::Router::new().mount("orders", borrowed);
}
