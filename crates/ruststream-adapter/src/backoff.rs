//! The delays between attempts at something that fails for a while: exponential back-off
//! with jitter, on the `backon` crate.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// backon's exponential delays, named through its public builder trait.
type Delays = <ExponentialBuilder as BackoffBuilder>::Backoff;

/// The delays between attempts (reconnecting, attaching, publishing again): from `min`,
/// doubling up to `max`, with jitter; back to `min` after a success.
///
/// Each delay is random in [`base`, 2 × `base`), where `base` starts at `min` and doubles
/// up to half of `max` (never below `min`), and is then kept within [`min`, `max`]. So the
/// first delay is at least `min`, each is about twice the one before, and once at the top
/// they spread over [`max`/2, `max`]: clients that lost the same broker at the same
/// moment do not all come back in the same instant. `max` below `min` counts as `min`.
///
/// Call [`next_delay`](Self::next_delay) before each wait and [`reset`](Self::reset) once
/// an attempt succeeds. The delays themselves come from `backon`'s exponential back-off
/// with its jitter.
///
/// ```
/// use std::time::Duration;
///
/// use ruststream_adapter::Backoff;
///
/// let (min, max) = (Duration::from_millis(100), Duration::from_secs(5));
/// let mut backoff = Backoff::new(min, max);
/// let first = backoff.next_delay();
/// assert!(first >= min && first < 2 * min);
/// let second = backoff.next_delay();
/// assert!(second >= first && second <= max);
/// backoff.reset(); // connected again: the next failure waits about `min`
/// assert!(backoff.next_delay() < 2 * min);
/// ```
#[derive(Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    builder: ExponentialBuilder,
    delays: Delays,
}

impl Backoff {
    /// A back-off from `min` up to `max` (`max` below `min` counts as `min`).
    ///
    /// `Duration::ZERO` for both gives no wait at all.
    pub fn new(min: Duration, max: Duration) -> Self {
        let max = max.max(min);
        let builder = ExponentialBuilder::new()
            .with_min_delay(min)
            .with_max_delay((max / 2).max(min))
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self {
            min,
            max,
            builder,
            delays: builder.build(),
        }
    }

    /// The delay before the next attempt: each call grows it, up to the maximum.
    ///
    /// Always within [`min`, `max`] of [`new`](Self::new).
    pub fn next_delay(&mut self) -> Duration {
        // Without a cap on the number of attempts the delays never end; `max` is only
        // a guard.
        let delay = self.delays.next().unwrap_or(self.max);
        delay.clamp(self.min, self.max)
    }

    /// After a success: the next delay starts from the minimum again.
    pub fn reset(&mut self) {
        self.delays = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `a` is at least `b`, but for backon's f32 arithmetic (a millionth off).
    fn at_least(a: Duration, b: Duration) -> bool {
        a >= b.mul_f64(0.999_999)
    }

    #[test]
    fn delays_stay_within_min_and_max() {
        for (min, max) in [
            (ms(100), ms(5_000)),
            (ms(1), ms(2)),
            (ms(100), ms(150)),
            (ms(100), ms(350)),
        ] {
            for _ in 0..20 {
                let mut backoff = Backoff::new(min, max);
                for _ in 0..40 {
                    let delay = backoff.next_delay();
                    assert!(
                        delay >= min && delay <= max,
                        "{delay:?} not in {min:?}..={max:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn delays_double_up_to_the_top() {
        let (min, max) = (ms(100), ms(10_000));
        // Without jitter the base: 100 ms doubling, capped at max / 2 = 5 s.
        let bases = [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000];
        for _ in 0..20 {
            let mut backoff = Backoff::new(min, max);
            let mut last = Duration::ZERO;
            for (k, base) in bases.into_iter().map(ms).enumerate() {
                let delay = backoff.next_delay();
                assert!(at_least(delay, base), "delay {k}: {delay:?} below {base:?}");
                assert!(
                    delay <= (2 * base).min(max),
                    "delay {k}: {delay:?} above 2 × {base:?}"
                );
                if k < 6 {
                    assert!(
                        at_least(delay, last),
                        "delay {k}: {delay:?} shrank from {last:?}"
                    );
                }
                last = delay;
            }
        }
    }

    #[test]
    fn reset_starts_from_the_minimum_again() {
        let (min, max) = (ms(100), ms(5_000));
        let mut backoff = Backoff::new(min, max);
        for _ in 0..10 {
            backoff.next_delay();
        }
        assert!(backoff.next_delay() >= max / 2);
        backoff.reset();
        let first = backoff.next_delay();
        assert!(first >= min && first < 2 * min, "{first:?}");
    }

    #[test]
    fn delays_are_jittered() {
        let firsts: Vec<_> = (0..20)
            .map(|_| Backoff::new(ms(100), ms(5_000)).next_delay())
            .collect();
        assert!(
            firsts.iter().any(|d| *d != firsts[0]),
            "20 back-offs all began with {:?}",
            firsts[0]
        );
    }

    #[test]
    fn equal_bounds_give_a_constant_delay_and_max_below_min_counts_as_min() {
        let mut constant = Backoff::new(ms(250), ms(250));
        let mut inverted = Backoff::new(ms(250), ms(10));
        for _ in 0..10 {
            assert_eq!(constant.next_delay(), ms(250));
            assert_eq!(inverted.next_delay(), ms(250));
        }
    }

    #[test]
    fn extreme_bounds_neither_panic_nor_overflow() {
        let mut zero = Backoff::new(Duration::ZERO, Duration::ZERO);
        let mut huge = Backoff::new(Duration::MAX, Duration::MAX);
        for _ in 0..5 {
            assert_eq!(zero.next_delay(), Duration::ZERO);
            assert_eq!(huge.next_delay(), Duration::MAX);
        }
        let mut wide = Backoff::new(ms(1), Duration::MAX);
        for _ in 0..200 {
            assert!(wide.next_delay() >= ms(1));
        }
    }
}
