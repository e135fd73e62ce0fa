//! The middleware of one subscription, outermost first.

use std::sync::Arc;

use ruststream_core::Delivery;

use super::{Handling, Middleware, Visits};
use crate::outcome::Outcome;

/// One subscription's middleware, outermost first.
pub struct Stack {
    all: Box<[Arc<dyn Middleware>]>,
    // Those that wrap the handler's future, innermost first (the order they wrap in).
    wrapping: Box<[Arc<dyn Middleware>]>,
}

impl Stack {
    pub(crate) fn new(all: Vec<Arc<dyn Middleware>>) -> Self {
        let wrapping = all.iter().rev().filter(|m| m.wraps()).cloned().collect();
        Self {
            all: all.into_boxed_slice(),
            wrapping,
        }
    }

    /// Puts into `visits` (empty) those of the middleware that follow `delivery` (none:
    /// nothing allocated).
    #[inline]
    pub(crate) fn visit(&self, delivery: &Delivery, visits: &mut Visits) {
        for m in self.all.iter() {
            if let Some(visit) = m.visit(delivery) {
                visits.push(visit);
            }
        }
    }

    /// The first outcome a middleware settles the delivery with, outermost first.
    pub(crate) fn before(&self, delivery: &Delivery) -> Option<Outcome> {
        self.all.iter().find_map(|m| m.before(delivery))
    }

    pub(crate) fn wraps(&self) -> bool {
        !self.wrapping.is_empty()
    }

    /// `handling` wrapped by each middleware that wraps, innermost first.
    pub(crate) fn around(&self, delivery: &Delivery, handling: Handling) -> Handling {
        self.wrapping
            .iter()
            .fold(handling, |handling, m| m.around(delivery, handling))
    }
}
