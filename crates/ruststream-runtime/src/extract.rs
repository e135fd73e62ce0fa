//! Extractors: what a handler can take besides its payload.
//!
//! A handler's arguments before the payload are [`FromDelivery`] types, made from the
//! delivery and the service around it ([`Context`], [`AppContext`]). The everyday ones,
//! [`Attempt`], [`Raw`], [`State`], are also at the crate's root, and
//! [`Headers`], [`Address`] and [`Publisher`] are extractors too; this module holds what
//! writing an extractor of one's own takes. An extractor that fails refuses the delivery
//! with an [`ExtractError`], which the mount's decode-failure policy settles.

use std::any::{Any, TypeId};

use bytes::Bytes;
use ruststream_core::{Address, Delivery, Headers};

use crate::codec::{Codec, CodecError};
use crate::publisher::Publisher;

/// What extractors read from: the delivery and the service around it.
pub struct Context<'a> {
    pub(crate) delivery: &'a Delivery,
    pub(crate) codec: Codec,
    pub(crate) app: &'a AppContext,
}

impl<'a> Context<'a> {
    /// The delivery being handled.
    pub fn delivery(&self) -> &'a Delivery {
        self.delivery
    }

    /// The mount's codec.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The service's shared state and publisher.
    pub fn app(&self) -> &'a AppContext {
        self.app
    }
}

/// The service-wide part of a handler's context: shared state and the publisher.
pub struct AppContext {
    states: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
    publisher: Publisher,
}

impl AppContext {
    pub(crate) fn new(publisher: Publisher) -> Self {
        Self {
            states: Vec::new(),
            publisher,
        }
    }

    pub(crate) fn insert_state<S: Clone + Send + Sync + 'static>(&mut self, state: S) {
        self.states.retain(|(id, _)| *id != TypeId::of::<S>());
        self.states.push((TypeId::of::<S>(), Box::new(state)));
    }

    /// The shared state of type `S`, if the service has one.
    pub fn state<S: 'static>(&self) -> Option<&S> {
        self.states
            .iter()
            .find(|(id, _)| *id == TypeId::of::<S>())
            .and_then(|(_, s)| s.downcast_ref())
    }

    /// The service's publisher.
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    pub(crate) fn publisher_mut(&mut self) -> &mut Publisher {
        &mut self.publisher
    }
}

/// Why a handler's arguments could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The payload did not decode.
    #[error(transparent)]
    Decode(#[from] CodecError),
    /// The service has no shared state of this type (checked when the service starts).
    #[error("no shared state of type {0}; add it with App::state")]
    MissingState(&'static str),
    /// An extractor of the user's refused the delivery.
    #[error("{0}")]
    Other(String),
}

/// A handler argument made from the delivery or the service (any but the last, which
/// is the payload; a handler without a payload may end with one too).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be taken from a delivery",
    label = "not an extractor",
    note = "only the last argument of a handler can be the payload; the arguments before it must be extractors (`Headers`, `Attempt`, `State<S>`, `Raw`, `Publisher`, ...)"
)]
pub trait FromDelivery: Sized + Send + 'static {
    /// Makes the argument.
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError>;

    /// Checks, when the service starts, that the argument can be made at all.
    fn check(app: &AppContext) -> Result<(), ExtractError> {
        let _ = app;
        Ok(())
    }
}

impl FromDelivery for Headers {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        Ok(cx.delivery.headers().clone())
    }
}

impl FromDelivery for Address {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        Ok(cx.delivery.address().clone())
    }
}

impl FromDelivery for Publisher {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        Ok(cx.app.publisher.clone())
    }
}

/// The attempt number of the delivery (first delivery = 1); see
/// [`Delivery::redelivery_count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attempt(pub u32);

impl FromDelivery for Attempt {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        Ok(Self(cx.delivery.redelivery_count()))
    }
}

/// The payload bytes as received, whatever the codec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raw(pub Bytes);

impl FromDelivery for Raw {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        Ok(Self(cx.delivery.payload().clone()))
    }
}

/// Shared state added with [`App::state`](crate::App::state), cloned for each call.
///
/// ```
/// use std::sync::Arc;
/// use ruststream::State;
///
/// #[derive(Clone, Default)]
/// struct Db(Arc<()>);
///
/// async fn handle(State(db): State<Db>, order: u64) {
///     let _ = (db, order);
/// }
/// ```
#[derive(Clone, Debug)]
pub struct State<S>(pub S);

impl<S: Clone + Send + Sync + 'static> FromDelivery for State<S> {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        cx.app
            .state::<S>()
            .cloned()
            .map(State)
            .ok_or(ExtractError::MissingState(std::any::type_name::<S>()))
    }

    fn check(app: &AppContext) -> Result<(), ExtractError> {
        app.state::<S>()
            .map(|_| ())
            .ok_or(ExtractError::MissingState(std::any::type_name::<S>()))
    }
}

impl<T: FromDelivery> FromDelivery for Option<T> {
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        Ok(T::from_delivery(cx).ok())
    }
}
