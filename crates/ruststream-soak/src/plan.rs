//! A scenario's plan (what to run) and its report (what it found).

use std::path::PathBuf;
use std::time::Duration;

use crate::fault::Fault;
use crate::form::Form;
use crate::tally::Tally;

/// What to run.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) form: Form,
    pub(crate) fault: Fault,
    pub(crate) n: u64,
    pub(crate) rate: u64,
    /// How long a black hole lasts.
    pub(crate) hole: Duration,
    /// How many RabbitMQ restarts or black holes at most.
    pub(crate) rare_faults: usize,
    /// How long to wait for everything to settle once the producer is done.
    pub(crate) drain: Duration,
    /// The service's consumer processes.
    pub(crate) consumers: usize,
    /// How long the whole scenario may take (else `scenario::budget`'s default).
    pub(crate) budget: Option<Duration>,
    /// Where the run's logs go (a directory of its own is made in it).
    pub(crate) dir: PathBuf,
}

/// What a run found.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Report {
    pub(crate) form: String,
    pub(crate) fault: String,
    pub(crate) n: u64,
    pub(crate) rate: u64,
    pub(crate) faults: u64,
    pub(crate) kills: u64,
    pub(crate) publish_failures: u64,
    pub(crate) pending: u64,
    pub(crate) seconds: u64,
    pub(crate) date: String,
    pub(crate) tally: Tally,
    /// What the harness found out about a run that did not settle (a consumer group's
    /// state, the consumers' last errors), printed after the tables.
    #[serde(default)]
    pub(crate) notes: Vec<String>,
}

impl Report {
    /// A run passes when nothing was lost but the in-process delayed copies of killed
    /// processes, and nothing is left on the server.
    pub(crate) fn passed(&self) -> bool {
        self.tally.lost_other == 0 && self.pending == 0 && self.tally.published == self.n
    }
}

/// An empty report of `plan`.
pub(crate) fn report(plan: &Plan) -> Report {
    Report {
        form: plan.form.name().to_owned(),
        fault: plan.fault.name().to_owned(),
        n: plan.n,
        rate: plan.rate,
        faults: 0,
        kills: 0,
        publish_failures: 0,
        pending: 0,
        seconds: 0,
        date: crate::record::today(),
        tally: Tally::default(),
        notes: Vec::new(),
    }
}
