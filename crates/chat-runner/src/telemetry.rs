//! Metrics of model and tool calls, recorded through the `metrics` facade:
//! a host that installs a recorder (the daemon exports them to Prometheus)
//! sees them; without one they cost next to nothing.

use std::time::Duration;

use roundtable_providers::{ErrorKind, Model};

/// One model call ended after `elapsed`, its first output after
/// `first_output` (none when it streamed none), failed with `failure`.
pub(crate) fn model_call(
    model: &Model,
    elapsed: Duration,
    first_output: Option<Duration>,
    failure: Option<&ErrorKind>,
) {
    let name = format!("{}/{}", model.provider, model.id);
    let outcome = match failure {
        None => "ok".to_string(),
        Some(kind) => format!("{kind:?}").to_lowercase(),
    };
    metrics::histogram!(
        "roundtable_model_call_seconds",
        "model" => name.clone(),
        "outcome" => outcome
    )
    .record(elapsed.as_secs_f64());
    if let Some(first) = first_output {
        metrics::histogram!("roundtable_model_first_token_seconds", "model" => name)
            .record(first.as_secs_f64());
    }
}

/// One tool call ended with `outcome` (`ok`, `error`, `cancelled`,
/// `failed`).
pub(crate) fn tool_call(tool: &str, outcome: &'static str) {
    metrics::counter!(
        "roundtable_tool_calls_total",
        "tool" => tool.to_string(),
        "outcome" => outcome
    )
    .increment(1);
}
