//! Handlers: plain `async fn`s over extractors and a payload.
//!
//! [`Router::mount`](crate::Router::mount) takes any [`Handler`]: the trait is
//! implemented for `async fn`s and closures of up to eight arguments, told apart by the
//! markers [`Extractors`] and [`WithPayload`], and a call's future is an
//! [`OutcomeFuture`]. A service rarely names these types; they appear in bounds (a
//! function generic over handlers) and in compiler messages.

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use serde::de::DeserializeOwned;

use crate::extract::{AppContext, Context, ExtractError, FromDelivery};
use crate::outcome::{IntoOutcome, Outcome};

/// A function that can handle deliveries.
///
/// Implemented for `async fn`s (and closures returning futures) of up to eight
/// arguments: any number of [`FromDelivery`] extractors (headers, attempt, state,
/// publisher…), then optionally the payload, decoded with the mount's codec into any
/// `DeserializeOwned` type. The return value is anything [`IntoOutcome`]. `M` only
/// tells the implementations apart; it is inferred.
///
/// ```
/// use ruststream::{Attempt, Outcome, ack, retry};
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct Order { id: u64 }
///
/// async fn handle(Attempt(attempt): Attempt, order: Order) -> Outcome {
///     if order.id == 0 && attempt < 3 { retry() } else { ack() }
/// }
/// # let _ = ruststream::Router::new().mount("orders", handle);
/// ```
///
/// A function that breaks the rules is refused with a message that states them
/// ("`…` is not a ruststream handler"): the payload before an extractor,
///
/// ```compile_fail
/// async fn payload_first(order: String, attempt: ruststream::Attempt) {}
/// let _ = ruststream::Router::new().mount("orders", payload_first);
/// ```
///
/// a borrowed payload,
///
/// ```compile_fail
/// async fn borrowed(order: &str) {}
/// let _ = ruststream::Router::new().mount("orders", borrowed);
/// ```
///
/// a function that is not `async`, or a return type that is not an outcome:
///
/// ```compile_fail
/// fn not_async(order: String) {}
/// let _ = ruststream::Router::new().mount("orders", not_async);
/// ```
///
/// ```compile_fail
/// async fn count(order: String) -> usize { order.len() }
/// let _ = ruststream::Router::new().mount("orders", count);
/// ```
///
/// The compiler cannot tell which rule a function meant to follow, so that message is
/// about the whole function. [`#[debug_handler]`](crate::debug_handler) on the function
/// names each argument or return type that breaks a rule, where it is written (a
/// borrowed `&str` is named there too, where the compiler alone speaks of `Deserialize`
/// lifetimes):
///
/// ```compile_fail
/// #[ruststream::debug_handler]
/// async fn borrowed(order: &str) {}
/// // error: a ruststream handler takes its arguments owned (its future outlives the
/// // delivery): take `String` instead of a reference
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a ruststream handler",
    label = "not a handler",
    note = "a handler is an `async fn` (or a closure returning a `Send` future) that is `Clone + Send + Sync + 'static`",
    note = "its arguments are extractors (`Headers`, `Attempt`, `State<S>`, `Raw`, ...), then at most one payload, last: an owned `DeserializeOwned` type (`String`, not `&str`)",
    note = "it returns `()`, `Outcome`, `Reply<T>`, or `Result<T, E>` of those (with `E: Display`); at most eight arguments",
    note = "put `#[ruststream::debug_handler]` on the function to see which argument breaks which rule"
)]
pub trait Handler<M>: Clone + Send + Sync + 'static {
    /// The future of one call.
    type Future: Future<Output = Outcome> + Send + 'static;

    /// Makes the arguments from `cx` and calls the function.
    fn call(&self, cx: &Context<'_>) -> Result<Self::Future, ExtractError>;

    /// Checks, when the service starts, that every argument can be made.
    fn check(app: &AppContext) -> Result<(), ExtractError>;

    /// The payload's Rust type, if the handler takes one: what a description of the
    /// service (its AsyncAPI document) checks a declared payload schema against.
    fn payload_type() -> Option<(TypeId, &'static str)> {
        None
    }

    /// The Rust type of the handler's reply, if it returns a [`Reply<T>`](crate::Reply)
    /// (or a `Result` of one): what the AsyncAPI document checks a reply schema against.
    fn reply_type() -> Option<(TypeId, &'static str)> {
        None
    }
}

pin_project_lite::pin_project! {
    /// A handler's future, turned into an [`Outcome`].
    pub struct OutcomeFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Future for OutcomeFuture<F>
where
    F: Future,
    F::Output: IntoOutcome,
{
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Outcome> {
        self.project().inner.poll(cx).map(IntoOutcome::into_outcome)
    }
}

/// Marks handlers whose arguments are all extractors.
#[derive(Debug)]
pub enum Extractors {}

/// Marks handlers whose last argument is the payload.
#[derive(Debug)]
pub enum WithPayload {}

macro_rules! handler {
    ($($arg:ident),*) => {
        #[allow(non_snake_case, unused_variables)]
        impl<F, Fut, $($arg,)*> Handler<(Extractors, $($arg,)*)> for F
        where
            F: Fn($($arg),*) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoOutcome,
            $($arg: FromDelivery,)*
        {
            type Future = OutcomeFuture<Fut>;

            #[inline]
            fn call(&self, cx: &Context<'_>) -> Result<Self::Future, ExtractError> {
                $(let $arg = $arg::from_delivery(cx)?;)*
                Ok(OutcomeFuture { inner: self($($arg),*) })
            }

            fn check(app: &AppContext) -> Result<(), ExtractError> {
                $($arg::check(app)?;)*
                Ok(())
            }

            fn reply_type() -> Option<(TypeId, &'static str)> {
                <Fut::Output as IntoOutcome>::reply_type()
            }
        }

        #[allow(non_snake_case, unused_variables)]
        impl<F, Fut, $($arg,)* P> Handler<(WithPayload, $($arg,)* P)> for F
        where
            F: Fn($($arg,)* P) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoOutcome,
            $($arg: FromDelivery,)*
            P: DeserializeOwned + Send + 'static,
        {
            type Future = OutcomeFuture<Fut>;

            #[inline]
            fn call(&self, cx: &Context<'_>) -> Result<Self::Future, ExtractError> {
                $(let $arg = $arg::from_delivery(cx)?;)*
                let payload: P = cx.codec.decode(cx.delivery.payload())?;
                Ok(OutcomeFuture { inner: self($($arg,)* payload) })
            }

            fn check(app: &AppContext) -> Result<(), ExtractError> {
                $($arg::check(app)?;)*
                Ok(())
            }

            fn payload_type() -> Option<(TypeId, &'static str)> {
                Some((TypeId::of::<P>(), std::any::type_name::<P>()))
            }

            fn reply_type() -> Option<(TypeId, &'static str)> {
                <Fut::Output as IntoOutcome>::reply_type()
            }
        }
    };
}

handler!();
handler!(A1);
handler!(A1, A2);
handler!(A1, A2, A3);
handler!(A1, A2, A3, A4);
handler!(A1, A2, A3, A4, A5);
handler!(A1, A2, A3, A4, A5, A6);
handler!(A1, A2, A3, A4, A5, A6, A7);
