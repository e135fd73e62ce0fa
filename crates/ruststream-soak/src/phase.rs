//! What a scenario is doing now, for the message of one that ran past its budget.

use std::sync::Mutex;

/// The phase of this process's scenario (one per process).
static NOW: Mutex<&str> = Mutex::new("starting");

/// Says the scenario is now doing `what` ("draining", "restarting RabbitMQ", …).
pub(crate) fn set(what: &'static str) {
    *NOW.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = what;
}

/// What the scenario was last said to be doing.
pub(crate) fn now() -> &'static str {
    *NOW.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_phase_set_is_the_one_named() {
        assert_eq!(super::now(), "starting");
        super::set("draining");
        assert_eq!(super::now(), "draining");
    }
}
