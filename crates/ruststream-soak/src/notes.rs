//! What a run that did not settle shows of its cause, for its report.

use std::path::Path;

/// The last `n` warnings and errors the consumers logged (`consume.out` in `dir`), each
/// cut to 300 characters: what a run that did not settle shows of its cause.
pub(crate) fn last_errors(dir: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("consume.out")).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.chars().take(300).collect())
        .collect()
}
