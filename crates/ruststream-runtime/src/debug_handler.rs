//! What `#[debug_handler]` expands to: one bound per argument, each with its own error.
//! Not an API: the macro's expansion calls these by path.

use serde::de::DeserializeOwned;

use crate::extract::FromDelivery;
use crate::handler::{Extractors, WithPayload};
use crate::outcome::IntoOutcome;

/// An argument before the last must be an extractor.
pub fn extractor<T: FromDelivery>() {}

/// The last argument is an extractor or the payload.
pub fn last_argument<T: LastArgument<M>, M>() {}

/// The return type must be an outcome.
pub fn outcome<T: IntoOutcome>() {}

/// A handler's last argument: an extractor, or an owned payload.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither an extractor nor a payload",
    label = "not an extractor or payload",
    note = "the last argument of a handler is an extractor (`Headers`, `Attempt`, `State<S>`, `Raw`, ...) or the payload: an owned type that implements `serde::Deserialize` (derive it), `Send` and `'static`"
)]
pub trait LastArgument<M> {}

impl<T: FromDelivery> LastArgument<Extractors> for T {}

impl<T: DeserializeOwned + Send + 'static> LastArgument<WithPayload> for T {}
