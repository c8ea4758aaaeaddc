//! Runners for roundtable: the provider-agnostic turn loop and the
//! one-on-one chat runner.
//!
//! - The turn loop: [`TurnLoop`] runs one turn (stream the model, run its
//!   tool calls with approvals, feed the results back, repeat) under
//!   [`Limits`] (round cap, timeout) and a cancellation token, reporting
//!   [`TurnEvent`]s to an [`EventSink`] and returning a [`TurnOutcome`].
//! - Approvals: the host's [`Approver`] decides gated calls.
//!
//! The crate depends on no particular provider or store: it takes an
//! `Arc<dyn Provider>` and an `Arc<dyn ThreadStore>`.

mod approval;
mod event;
mod exec;
mod limits;
mod turn;

pub use approval::{ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DenyAll};
pub use event::{EventSink, FinishReason, FnSink, NullSink, OutputKind, TurnEvent};
pub use limits::{DEFAULT_MAX_ROUNDS, DEFAULT_TURN_TIMEOUT, Limits};
pub use turn::{TurnLoop, TurnOutcome, TurnRequest};
