//! The delay a durable delay queue or topic waits: one queue or topic per rounded delay.

use std::time::Duration;

/// The milliseconds a durable delay waits for `delay`: rounded **up** to two significant
/// digits (exact below 100 ms; 1234 ms waits 1300 ms).
///
/// Brokers expire or release parked copies in arrival order, so an adapter keeps one
/// delay queue (or topic) per delay: a copy never waits behind a longer one. Rounding
/// bounds how many there are (at most 90 per decade of delays) and keeps every delay
/// at most 10 % later than asked, never sooner.
///
/// ```
/// use std::time::Duration;
///
/// use ruststream_adapter::rounded_delay_ms;
///
/// assert_eq!(rounded_delay_ms(Duration::from_millis(99)), 99);
/// assert_eq!(rounded_delay_ms(Duration::from_millis(1234)), 1300);
/// assert_eq!(rounded_delay_ms(Duration::from_secs(60)), 60_000);
/// ```
pub fn rounded_delay_ms(delay: Duration) -> u64 {
    let exact = delay.as_nanos().div_ceil(1_000_000);
    let mut ms = u64::try_from(exact).unwrap_or(u64::MAX);
    let mut step = 1_u64;
    while ms >= 100 {
        ms = ms.div_ceil(10);
        step = step.saturating_mul(10);
    }
    ms.saturating_mul(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_to_two_significant_digits() {
        let ms = Duration::from_millis;
        assert_eq!(rounded_delay_ms(Duration::ZERO), 0);
        assert_eq!(rounded_delay_ms(Duration::from_micros(1)), 1);
        assert_eq!(rounded_delay_ms(ms(99)), 99);
        assert_eq!(rounded_delay_ms(ms(100)), 100);
        assert_eq!(rounded_delay_ms(ms(101)), 110);
        assert_eq!(rounded_delay_ms(ms(1234)), 1300);
        assert_eq!(rounded_delay_ms(ms(2000)), 2000);
        assert_eq!(
            rounded_delay_ms(Duration::from_millis(1500) + Duration::from_nanos(1)),
            1600
        );
        assert!(rounded_delay_ms(Duration::MAX) >= u64::MAX / 10);
    }
}
