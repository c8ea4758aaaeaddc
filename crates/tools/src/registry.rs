//! The registry: the tools of a session, by name, with approval gating,
//! panic isolation and output bounds.

use std::any::Any;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use roundtable_providers::ToolCall;

use crate::{
    ApprovalPolicy, OutputLimit, SetupError, Tool, ToolContext, ToolDefinition, ToolError,
    ToolResult,
};

#[derive(Clone)]
struct Entry {
    definition: ToolDefinition,
    tool: Arc<dyn Tool>,
}

/// The tools a session offers, by unique name, in registration order.
/// Cloning is cheap (the tools are shared), so a host can derive per-session
/// registries with their own approval policy from one set of tools.
///
/// Invoking through the registry gives every call the same guarantees: an
/// unknown name or a panicking tool becomes an error result, output is cut to
/// the [`OutputLimit`], and a call the [`ApprovalPolicy`] gates never runs
/// through [`invoke`](Self::invoke) (it fails with
/// [`ToolError::ApprovalRequired`]); the turn loop runs it with
/// [`invoke_approved`](Self::invoke_approved) once a human approved it.
///
/// ```
/// use roundtable_providers::ToolCall;
/// use roundtable_tools::{ToolContext, ToolError, ToolKind, ToolRegistry, ToolResult, TypedTool};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Input {
///     /// What to remove.
///     path: String,
/// }
///
/// struct Remove;
///
/// #[async_trait::async_trait]
/// impl TypedTool for Remove {
///     type Input = Input;
///     fn name(&self) -> &str { "remove" }
///     fn description(&self) -> &str { "Removes a file." }
///     fn kind(&self) -> ToolKind { ToolKind::Write }
///     async fn run(&self, _ctx: ToolContext, input: Input) -> Result<ToolResult, ToolError> {
///         Ok(ToolResult::text(format!("removed {}", input.path)))
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut registry = ToolRegistry::new(); // the default policy gates write and exec tools
/// registry.register(Remove).unwrap();
/// assert!(registry.register(Remove).is_err()); // names are unique
///
/// let args = serde_json::json!({"path": "a.txt"});
/// let call = ToolCall::new("call_1", "remove", args.as_object().unwrap().clone());
/// assert!(registry.needs_approval(&call));
/// // Without approval the tool does not run.
/// let refused = registry.invoke(&call, ToolContext::new("call_1")).await;
/// assert!(matches!(refused, Err(ToolError::ApprovalRequired { .. })));
/// // Once a human approved it, it does.
/// let result = registry.invoke_approved(&call, ToolContext::new("call_1")).await.unwrap();
/// assert_eq!(result.text_content(), "removed a.txt");
/// # });
/// ```
#[derive(Clone)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    by_name: HashMap<Arc<str>, usize>,
    output_limit: OutputLimit,
    approval_policy: ApprovalPolicy,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field(
                "tools",
                &self
                    .entries
                    .iter()
                    .map(|e| e.definition.name())
                    .collect::<Vec<_>>(),
            )
            .field("output_limit", &self.output_limit)
            .field("approval_policy", &self.approval_policy)
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry with the default output limit and approval policy.
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            by_name: HashMap::new(),
            output_limit: OutputLimit::default(),
            approval_policy: ApprovalPolicy::default(),
        }
    }

    /// Sets the output limit applied to every result.
    pub fn with_output_limit(mut self, limit: OutputLimit) -> Self {
        self.output_limit = limit;
        self
    }

    /// Sets the approval policy.
    pub fn with_approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.approval_policy = policy;
        self
    }

    /// Replaces the approval policy.
    pub fn set_approval_policy(&mut self, policy: ApprovalPolicy) {
        self.approval_policy = policy;
    }

    /// The approval policy in force.
    pub fn approval_policy(&self) -> &ApprovalPolicy {
        &self.approval_policy
    }

    /// The output limit in force.
    pub fn output_limit(&self) -> OutputLimit {
        self.output_limit
    }

    /// Adds a tool; a second tool with the same name is refused.
    pub fn register(&mut self, tool: impl Tool + 'static) -> Result<(), SetupError> {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool; a second tool with the same name is refused.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), SetupError> {
        let definition = tool.definition();
        if self.by_name.contains_key(definition.name()) {
            return Err(SetupError::DuplicateTool {
                name: definition.name().into(),
            });
        }
        self.by_name
            .insert(definition.name().into(), self.entries.len());
        self.entries.push(Entry { definition, tool });
        Ok(())
    }

    /// Adds a whole toolset. All or nothing: when any name clashes (with the
    /// registry or within the set), nothing is added.
    pub fn register_all(
        &mut self,
        tools: impl IntoIterator<Item = Arc<dyn Tool>>,
    ) -> Result<(), SetupError> {
        let tools: Vec<(ToolDefinition, Arc<dyn Tool>)> =
            tools.into_iter().map(|t| (t.definition(), t)).collect();
        let mut seen = std::collections::HashSet::new();
        for (definition, _) in &tools {
            if self.by_name.contains_key(definition.name()) || !seen.insert(definition.name()) {
                return Err(SetupError::DuplicateTool {
                    name: definition.name().into(),
                });
            }
        }
        for (definition, tool) in tools {
            self.by_name
                .insert(definition.name().into(), self.entries.len());
            self.entries.push(Entry { definition, tool });
        }
        Ok(())
    }

    /// Moves every tool of `other` into this registry (all or nothing); this
    /// registry's limit and policy stay.
    pub fn merge(&mut self, other: ToolRegistry) -> Result<(), SetupError> {
        self.register_all(other.entries.into_iter().map(|e| e.tool))
    }

    /// The definitions, in registration order.
    pub fn definitions(&self) -> impl ExactSizeIterator<Item = &ToolDefinition> {
        self.entries.iter().map(|e| &e.definition)
    }

    /// The definition of the tool called `name`.
    pub fn definition(&self, name: &str) -> Option<&ToolDefinition> {
        self.by_name.get(name).map(|&i| &self.entries[i].definition)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.entries[i].tool)
    }

    /// The tool called `name` with its definition, found once: what a
    /// caller that asks several things of one call (its kind, whether it
    /// is gated, then running it) uses instead of looking the name up for
    /// each.
    pub fn find(&self, name: &str) -> Option<RegisteredTool<'_>> {
        self.by_name.get(name).map(|&i| RegisteredTool {
            registry: self,
            entry: &self.entries[i],
        })
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Does this call need approval before it runs? Unknown tools do not:
    /// calling them only produces an error result.
    pub fn needs_approval(&self, call: &ToolCall) -> bool {
        self.find(&call.name).is_some_and(|t| t.needs_approval())
    }

    /// Runs a call that needs no approval.
    ///
    /// A call the approval policy gates is refused with
    /// [`ToolError::ApprovalRequired`] and the tool does not run.
    pub async fn invoke(&self, call: &ToolCall, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        match self.find(&call.name) {
            Some(tool) => tool.invoke(call, ctx).await,
            None => Ok(self.not_found(call)),
        }
    }

    /// Runs a call a human has approved (or one that needs no approval).
    pub async fn invoke_approved(
        &self,
        call: &ToolCall,
        ctx: ToolContext,
    ) -> Result<ToolResult, ToolError> {
        match self.find(&call.name) {
            Some(tool) => tool.invoke_approved(call, ctx).await,
            None => Ok(self.not_found(call)),
        }
    }

    /// The result of a call to a tool the registry does not have.
    fn not_found(&self, call: &ToolCall) -> ToolResult {
        let known: Vec<&str> = self.entries.iter().map(|e| e.definition.name()).collect();
        ToolResult::error(format!(
            "Tool \"{}\" not found. Available tools: {}",
            call.name,
            known.join(", ")
        ))
    }
}

/// A tool of a [`ToolRegistry`] found by name ([`ToolRegistry::find`]):
/// its definition, whether the registry's policy gates it, and its runs
/// with the registry's guarantees (panic isolation, output limit).
#[derive(Clone, Copy)]
pub struct RegisteredTool<'a> {
    registry: &'a ToolRegistry,
    entry: &'a Entry,
}

impl std::fmt::Debug for RegisteredTool<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RegisteredTool")
            .field(&self.entry.definition.name())
            .finish()
    }
}

impl<'a> RegisteredTool<'a> {
    /// The tool's definition.
    pub fn definition(&self) -> &'a ToolDefinition {
        &self.entry.definition
    }

    /// Does a call of this tool need approval before it runs?
    pub fn needs_approval(&self) -> bool {
        self.registry
            .approval_policy
            .requires_approval(&self.entry.definition)
    }

    /// Runs a call that needs no approval, as [`ToolRegistry::invoke`].
    pub async fn invoke(&self, call: &ToolCall, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        if self.needs_approval() {
            return Err(ToolError::ApprovalRequired {
                tool: call.name.clone(),
                call_id: call.id.clone(),
            });
        }
        self.invoke_approved(call, ctx).await
    }

    /// Runs a call a human has approved (or one that needs no approval),
    /// as [`ToolRegistry::invoke_approved`].
    pub async fn invoke_approved(
        &self,
        call: &ToolCall,
        ctx: ToolContext,
    ) -> Result<ToolResult, ToolError> {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled {
                tool: call.name.clone(),
                call_id: call.id.clone(),
            });
        }
        let limit = self.registry.output_limit;
        let ctx = ctx.with_output_limit(limit);
        let outcome = AssertUnwindSafe(self.entry.tool.invoke(ctx, call.arguments.clone()))
            .catch_unwind()
            .await;
        let mut result = match outcome {
            Ok(Ok(result)) => result,
            Ok(Err(err)) => return Err(err),
            Err(payload) => ToolResult::error(format!(
                "Tool \"{}\" crashed: {}",
                call.name,
                panic_message(payload.as_ref())
            )),
        };
        limit.apply(&mut result);
        Ok(result)
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("panic")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ToolKind, TypedTool};
    use async_trait::async_trait;
    use roundtable_providers::JsonObject;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Raw {
        name: &'static str,
        kind: ToolKind,
        runs: Arc<AtomicUsize>,
        behaviour: fn(&JsonObject) -> Result<ToolResult, ToolError>,
    }

    #[async_trait]
    impl Tool for Raw {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::new(
                self.name,
                "raw",
                serde_json::json!({"type": "object"}),
                self.kind,
            )
        }
        async fn invoke(
            &self,
            _ctx: ToolContext,
            args: JsonObject,
        ) -> Result<ToolResult, ToolError> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            (self.behaviour)(&args)
        }
    }

    fn raw(
        name: &'static str,
        kind: ToolKind,
        behaviour: fn(&JsonObject) -> Result<ToolResult, ToolError>,
    ) -> (Arc<dyn Tool>, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let tool = Arc::new(Raw {
            name,
            kind,
            runs: runs.clone(),
            behaviour,
        });
        (tool, runs)
    }

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall::new("call_1", name, args.as_object().unwrap().clone())
    }

    fn ok(_: &JsonObject) -> Result<ToolResult, ToolError> {
        Ok(ToolResult::text("ok"))
    }

    #[tokio::test]
    async fn duplicate_names_are_rejected_and_nothing_is_added() {
        let mut registry = ToolRegistry::new();
        registry
            .register_arc(raw("a", ToolKind::Read, ok).0)
            .unwrap();
        let err = registry
            .register_arc(raw("a", ToolKind::Read, ok).0)
            .unwrap_err();
        assert!(matches!(err, SetupError::DuplicateTool { ref name } if &**name == "a"));

        let err = registry
            .register_all([
                raw("b", ToolKind::Read, ok).0,
                raw("a", ToolKind::Read, ok).0,
            ])
            .unwrap_err();
        assert!(matches!(err, SetupError::DuplicateTool { .. }));
        assert_eq!(registry.len(), 1, "all or nothing");

        let err = registry
            .register_all([
                raw("c", ToolKind::Read, ok).0,
                raw("c", ToolKind::Read, ok).0,
            ])
            .unwrap_err();
        assert!(matches!(err, SetupError::DuplicateTool { .. }));
        assert_eq!(registry.len(), 1);
    }

    #[tokio::test]
    async fn merge_keeps_a_stable_order() {
        let mut first = ToolRegistry::new();
        first
            .register_arc(raw("zeta", ToolKind::Read, ok).0)
            .unwrap();
        first
            .register_arc(raw("alpha", ToolKind::Read, ok).0)
            .unwrap();
        let mut second = ToolRegistry::new();
        second
            .register_arc(raw("mid", ToolKind::Network, ok).0)
            .unwrap();
        first.merge(second).unwrap();
        let names: Vec<_> = first.definitions().map(|d| d.name().to_string()).collect();
        assert_eq!(names, ["zeta", "alpha", "mid"]);

        let mut clash = ToolRegistry::new();
        clash
            .register_arc(raw("alpha", ToolKind::Read, ok).0)
            .unwrap();
        assert!(first.merge(clash).is_err());
        assert_eq!(first.len(), 3);
    }

    #[tokio::test]
    async fn unknown_tool_is_an_error_result() {
        let mut registry = ToolRegistry::new();
        registry
            .register_arc(raw("a", ToolKind::Read, ok).0)
            .unwrap();
        let result = registry
            .invoke(&call("nope", serde_json::json!({})), ToolContext::new("c"))
            .await
            .unwrap();
        assert!(!result.ok);
        assert_eq!(
            result.text_content(),
            "Tool \"nope\" not found. Available tools: a"
        );
    }

    #[tokio::test]
    async fn gated_tools_never_run_without_approval() {
        let (shell, runs) = raw("shell", ToolKind::Exec, ok);
        let mut registry = ToolRegistry::new();
        registry.register_arc(shell).unwrap();
        let c = call("shell", serde_json::json!({}));
        assert!(registry.needs_approval(&c));
        let err = registry
            .invoke(&c, ToolContext::new("c"))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::ApprovalRequired { .. }));
        assert_eq!(runs.load(Ordering::SeqCst), 0);

        let result = registry
            .invoke_approved(&c, ToolContext::new("c"))
            .await
            .unwrap();
        assert!(result.ok);
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        registry.set_approval_policy(ApprovalPolicy::none());
        assert!(!registry.needs_approval(&c));
        registry.invoke(&c, ToolContext::new("c")).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_panicking_tool_becomes_an_error_result() {
        fn boom(_: &JsonObject) -> Result<ToolResult, ToolError> {
            panic!("kaboom")
        }
        let mut registry = ToolRegistry::new();
        registry
            .register_arc(raw("boom", ToolKind::Read, boom).0)
            .unwrap();
        let result = registry
            .invoke(&call("boom", serde_json::json!({})), ToolContext::new("c"))
            .await
            .unwrap();
        assert!(!result.ok);
        assert_eq!(result.text_content(), "Tool \"boom\" crashed: kaboom");
    }

    #[tokio::test]
    async fn turn_ending_errors_pass_through_and_cancelled_calls_do_not_start() {
        fn fatal(_: &JsonObject) -> Result<ToolResult, ToolError> {
            Err(ToolError::Fatal {
                tool: "f".into(),
                message: "store gone".into(),
            })
        }
        let (tool, runs) = raw("f", ToolKind::Read, fatal);
        let mut registry = ToolRegistry::new();
        registry.register_arc(tool).unwrap();
        let c = call("f", serde_json::json!({}));
        assert!(matches!(
            registry.invoke(&c, ToolContext::new("c")).await,
            Err(ToolError::Fatal { .. })
        ));
        let ctx = ToolContext::new("c");
        ctx.cancel.cancel();
        assert!(matches!(
            registry.invoke(&c, ctx).await,
            Err(ToolError::Cancelled { .. })
        ));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn output_is_bounded_and_marked() {
        fn big(_: &JsonObject) -> Result<ToolResult, ToolError> {
            Ok(ToolResult::text("x".repeat(10_000)))
        }
        let mut registry = ToolRegistry::new().with_output_limit(OutputLimit {
            max_bytes: 100,
            max_lines: 10,
        });
        registry
            .register_arc(raw("big", ToolKind::Read, big).0)
            .unwrap();
        let result = registry
            .invoke(&call("big", serde_json::json!({})), ToolContext::new("c"))
            .await
            .unwrap();
        let text = result.text_content();
        assert!(text.starts_with(&"x".repeat(100)));
        assert!(
            text.contains("[output truncated: showing 100 of 10000 bytes"),
            "{text}"
        );
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct CountInput {
        n: u32,
    }

    struct Count(Arc<AtomicUsize>);

    #[async_trait]
    impl TypedTool for Count {
        type Input = CountInput;
        fn name(&self) -> &str {
            "count"
        }
        fn description(&self) -> &str {
            "counts"
        }
        fn kind(&self) -> ToolKind {
            ToolKind::Read
        }
        async fn run(&self, _ctx: ToolContext, input: CountInput) -> Result<ToolResult, ToolError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(ToolResult::text(input.n.to_string()))
        }
    }

    #[tokio::test]
    async fn typed_tools_do_not_run_on_bad_arguments() {
        let runs = Arc::new(AtomicUsize::new(0));
        let mut registry = ToolRegistry::new();
        registry.register(Count(runs.clone())).unwrap();
        let def = registry.definition("count").unwrap();
        assert_eq!(def.input_schema()["properties"]["n"]["type"], "integer");
        let result = registry
            .invoke(
                &call("count", serde_json::json!({"n": -1})),
                ToolContext::new("c"),
            )
            .await
            .unwrap();
        assert!(!result.ok);
        assert!(
            result
                .text_content()
                .contains("  - n: invalid value: integer `-1`"),
            "{}",
            result.text_content()
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        let result = registry
            .invoke(
                &call("count", serde_json::json!({"n": 4})),
                ToolContext::new("c"),
            )
            .await
            .unwrap();
        assert_eq!(result.text_content(), "4");
    }
}
