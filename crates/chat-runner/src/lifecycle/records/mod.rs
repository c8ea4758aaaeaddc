//! The records a turn leaves on its thread beside its messages, one type
//! each: approvals ([`ApprovalRequestedRecord`], [`ApprovalDecidedRecord`]),
//! compactions ([`CompactionStartedRecord`], [`CompactionEndedRecord`]) and
//! retries ([`RetryRecord`]). Each is a `signal.*` entry; the turn's writer
//! writes them and readers (sessions, dashboards) read them back by type.

mod approvals;
mod compaction;
mod retries;

pub use approvals::{
    APPROVAL_DECIDED, APPROVAL_REQUESTED, ApprovalDecidedRecord, ApprovalRequestedRecord,
    ApprovalVerdict,
};
pub use compaction::{
    COMPACTION_ENDED, COMPACTION_STARTED, CompactionEndedRecord, CompactionStartedRecord,
};
pub use retries::{RETRY, RetryRecord};
