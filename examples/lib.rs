//! The services of the guides in `docs/`, one example each, built by CI
//! (`cargo build --examples`, or `cargo test --workspace --all-targets`):
//!
//! | example | guide |
//! |---|---|
//! | `lines` | [running](../docs/running.md): a service with state, a router and hooks |
//! | `orders_by_url` | [running](../docs/running.md#the-broker-by-url): the broker by URL |
//! | `greetings` | [running](../docs/running.md#publishing): publishing, then stopping |
//! | `amqp_orders` | [operating](../docs/operating.md): AMQP queues declared by the service, its AsyncAPI document |
//! | `observed` | [observability](../docs/observability.md#a-service-with-tracing-metrics-and-health): tracing, metrics and health |
//!
//! `cargo run -p examples --example greetings`. Each example is, line for line, a code
//! block of its guide (after its own `//!` lines): the test below fails where they
//! differ.

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Each example and the guide that shows it.
    const SHOWN: [(&str, &str); 5] = [
        ("lines.rs", "running.md"),
        ("orders_by_url.rs", "running.md"),
        ("greetings.rs", "running.md"),
        ("amqp_orders.rs", "operating.md"),
        ("observed.rs", "observability.md"),
    ];

    /// The example's code: the file without its leading `//!` lines.
    fn code(text: &str) -> String {
        let lines: Vec<&str> = text
            .lines()
            .skip_while(|l| l.starts_with("//!"))
            .skip_while(|l| l.is_empty())
            .collect();
        lines.join("\n")
    }

    /// The guide's ```rust blocks.
    fn blocks(text: &str) -> Vec<String> {
        let mut blocks = Vec::new();
        let mut current: Option<Vec<&str>> = None;
        for line in text.lines() {
            match &mut current {
                None if line.starts_with("```rust") => current = Some(Vec::new()),
                Some(block) if line == "```" => {
                    blocks.push(block.join("\n"));
                    current = None;
                }
                Some(block) => block.push(line),
                None => {}
            }
        }
        blocks
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn each_example_is_a_block_of_its_guide() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        for (example, guide) in SHOWN {
            let code = code(&read(&here.join(example)));
            let blocks = blocks(&read(&here.join("../docs").join(guide)));
            assert!(
                blocks.contains(&code),
                "examples/{example} is not a code block of docs/{guide}: copy one to the other"
            );
        }
    }

    #[test]
    fn a_changed_line_is_found() {
        let guide = "text\n```rust\nfn main() {}\n```\n";
        assert_eq!(blocks(guide), ["fn main() {}"]);
        assert!(!blocks(guide).contains(&code("//! doc\n\nfn main() { }\n")));
        assert!(blocks(guide).contains(&code("//! doc\n\nfn main() {}\n")));
    }
}
