//! The delivery loop: receive, handle, decide, settle and report (see [`run`]).

mod run;
mod worker;

pub(crate) use worker::{NoLayers, Worker};
