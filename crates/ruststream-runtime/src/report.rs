//! Telling a delivery's visits and the service's hooks of a settlement that is over.

use std::time::Duration;

use ruststream_core::{Address, BoxFuture, Plan, Verdict};

use crate::layer::Visits;
use crate::outcome::After;
use crate::runtime::AfterSettle;
use crate::settled::{Cause, SettleError, Settled};

/// What the visits and hooks learn of one delivery once its settlement is over.
///
/// Its own fields rather than a [`Settled`] waiting for its result: that shape, tried,
/// cost 131 more instructions a message where settlements are watched (`scripts/bench-core
/// raw+metrics`, 1,444 against 1,313), the larger value moved along the loop's path.
pub(crate) struct Report {
    pub(crate) address: Address,
    pub(crate) attempt: u32,
    pub(crate) verdict: Verdict,
    pub(crate) cause: Cause,
    pub(crate) plan: Plan,
    pub(crate) after: Option<After>,
    pub(crate) visits: Visits,
    pub(crate) elapsed: Option<Duration>,
}

impl Report {
    /// Tells the delivery's visits (innermost first) and then `hooks` that the settlement
    /// is over with `result`, and starts the outcome's `and_after`, whose future is all
    /// that lives on.
    #[inline(never)]
    pub(crate) fn tell(
        self,
        result: Result<(), SettleError>,
        hooks: &[AfterSettle],
    ) -> Option<BoxFuture<'static, ()>> {
        let Self {
            address,
            attempt,
            verdict,
            cause,
            plan,
            after,
            visits,
            elapsed,
        } = self;
        let settled = Settled {
            address,
            attempt,
            verdict,
            cause,
            plan,
            result,
            elapsed,
        };
        visits.settled(&settled);
        for hook in hooks {
            hook(&settled);
        }
        after.map(|after| after(&settled))
    }
}
