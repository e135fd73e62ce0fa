//! The delivery loop: receive, handle, decide, settle and report (see [`run`]).

mod handling;
mod run;
mod worker;

pub(crate) use run::Process;
pub(crate) use worker::{NoLayers, Worker};
