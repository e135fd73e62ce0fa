//! What each check found: passed, passed with parts that do not apply to the form, or
//! not applicable at all. Printed after each check, and appended to the file named by
//! `RUSTSTREAM_CONFORMANCE_REPORT` (one line per check) so that a test script can count
//! them across harnesses.

use std::cell::RefCell;
use std::io::Write;

thread_local! {
    // What did not apply in the check running on this thread (a check runs on its
    // test's thread: `block_on`).
    static NOT_APPLICABLE: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The environment variable naming the file each check's result is appended to.
pub const REPORT_ENV: &str = "RUSTSTREAM_CONFORMANCE_REPORT";

/// Notes that `what` (the check's name, or one of its parts) does not apply to the form
/// under test, and why.
pub(crate) fn not_applicable(harness: &str, what: &str, why: &str) {
    eprintln!("{harness}: {what}: not applicable: {why}");
    NOT_APPLICABLE.with(|n| n.borrow_mut().push(format!("{what}: {why}")));
}

pub(crate) fn begin() {
    NOT_APPLICABLE.with(|n| n.borrow_mut().clear());
}

/// How a check that did not fail came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Result {
    Passed,
    PartlyApplicable,
    NotApplicable,
}

impl Result {
    fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::PartlyApplicable => "passed, in part not applicable",
            Self::NotApplicable => "not applicable",
        }
    }
}

/// Prints and records the result of `check` on `harness`, which did not fail.
pub(crate) fn finish(harness: &str, check: &str) -> Result {
    let reasons = NOT_APPLICABLE.with(|n| std::mem::take(&mut *n.borrow_mut()));
    let result = if reasons.is_empty() {
        Result::Passed
    } else if reasons.iter().any(|r| r.split(':').next() == Some(check)) {
        Result::NotApplicable
    } else {
        Result::PartlyApplicable
    };
    let why = reasons.join("; ");
    eprintln!(
        "conformance: {harness}: {check}: {}{}",
        result.as_str(),
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        }
    );
    if let Some(path) = std::env::var_os(REPORT_ENV) {
        let line = format!("{}\t{harness}\t{check}\t{why}\n", result.as_str());
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(error) = written {
            eprintln!(
                "conformance: cannot append to {}: {error}",
                path.to_string_lossy()
            );
        }
    }
    result
}
