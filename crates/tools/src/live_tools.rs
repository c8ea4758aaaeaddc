//! [`LiveTools`]: a runner's tools across turns, a fixed registry and
//! [`ToolSource`]s whose lists may change, rebuilt at a turn's start only
//! when a source changed.

use std::sync::Arc;

use crate::{SetupError, ToolDefinition, ToolRegistry, ToolSource, ToolsChange};

/// The tools a runner gives each turn: a fixed registry (its tools, and the
/// approval policy and output limit every tool runs under) and sources
/// whose lists may change while the runner lives (MCP servers).
///
/// At the start of each turn the runner calls [`for_turn`](Self::for_turn):
/// stale sources are read again and, when a list moved, a new registry is
/// built (the fixed tools first, then each source's, under the fixed
/// registry's policy and limit) and the change is returned once. A turn
/// keeps the registry it got; the next turn gets the new one. A name two
/// parts share is a [`SetupError::DuplicateTool`], never one tool hiding
/// another: from [`new`](Self::new), or from the turn that first sees it
/// (every later turn too, until the source drops the name).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use roundtable_tools::{LiveTools, ToolRegistry, ToolSource};
///
/// let source: Arc<dyn ToolSource> = Arc::new(ToolRegistry::new());
/// let live = LiveTools::new(ToolRegistry::new(), vec![source]).unwrap();
/// let turn = live.for_turn().await.unwrap();
/// assert!(turn.change.is_none(), "a fixed source never changes");
/// assert!(Arc::ptr_eq(&turn.registry, &live.for_turn().await.unwrap().registry));
/// # });
/// ```
pub struct LiveTools {
    base: ToolRegistry,
    sources: Vec<Arc<dyn ToolSource>>,
    /// Held while sources refresh: turns starting at once take their turn.
    refreshing: tokio::sync::Mutex<()>,
    /// The registry last built and the sources' generations it was built
    /// from.
    built: std::sync::Mutex<Built>,
}

impl std::fmt::Debug for LiveTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTools")
            .field("base", &self.base)
            .field("sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

struct Built {
    generations: Vec<u64>,
    registry: Arc<ToolRegistry>,
    /// The name two parts shared in the last rebuild: every turn fails the
    /// same way until a source changes.
    failed: Option<Arc<str>>,
}

/// What a turn runs with.
#[derive(Debug, Clone)]
pub struct TurnTools {
    /// The registry of the turn.
    pub registry: Arc<ToolRegistry>,
    /// What changed since the previous turn, when something did (given to
    /// one turn only).
    pub change: Option<ToolsChange>,
}

impl LiveTools {
    /// The fixed registry `base` with `sources` as they list now. An error
    /// when two of them name a tool alike.
    pub fn new(base: ToolRegistry, sources: Vec<Arc<dyn ToolSource>>) -> Result<Self, SetupError> {
        let generations = sources.iter().map(|s| s.generation()).collect();
        let registry = Arc::new(assemble(&base, &sources)?);
        Ok(Self {
            base,
            sources,
            refreshing: tokio::sync::Mutex::new(()),
            built: std::sync::Mutex::new(Built {
                generations,
                registry,
                failed: None,
            }),
        })
    }

    /// The fixed registry (its tools, policy and output limit).
    pub fn base(&self) -> &ToolRegistry {
        &self.base
    }

    /// The registry last built (the one the last turn got).
    pub fn registry(&self) -> Arc<ToolRegistry> {
        self.built().registry.clone()
    }

    /// True when some source may change (there are sources at all).
    pub fn is_dynamic(&self) -> bool {
        !self.sources.is_empty()
    }

    /// The tools of a turn starting now: refreshes stale sources, rebuilds
    /// the registry when a list moved, and says what changed.
    pub async fn for_turn(&self) -> Result<TurnTools, SetupError> {
        let _refreshing = self.refreshing.lock().await;
        for source in &self.sources {
            source.refresh().await;
        }
        let mut built = self.built();
        let generations: Vec<u64> = self.sources.iter().map(|s| s.generation()).collect();
        if generations == built.generations {
            return match &built.failed {
                Some(name) => Err(SetupError::DuplicateTool { name: name.clone() }),
                None => Ok(TurnTools {
                    registry: built.registry.clone(),
                    change: None,
                }),
            };
        }
        built.generations = generations;
        let registry = match assemble(&self.base, &self.sources) {
            Ok(registry) => registry,
            Err(error) => {
                if let SetupError::DuplicateTool { name } = &error {
                    built.failed = Some(name.clone());
                }
                return Err(error);
            }
        };
        built.failed = None;
        let change = ToolsChange::between(named(&built.registry), named(&registry));
        if change.is_empty() {
            return Ok(TurnTools {
                registry: built.registry.clone(),
                change: None,
            });
        }
        built.registry = Arc::new(registry);
        Ok(TurnTools {
            registry: built.registry.clone(),
            change: Some(change),
        })
    }
}

impl LiveTools {
    fn built(&self) -> std::sync::MutexGuard<'_, Built> {
        self.built.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fixed tools, then each source's, under the fixed policy and limit.
fn assemble(
    base: &ToolRegistry,
    sources: &[Arc<dyn ToolSource>],
) -> Result<ToolRegistry, SetupError> {
    let mut registry = base.clone();
    for source in sources {
        registry.register_all(source.tools())?;
    }
    Ok(registry)
}

fn named(registry: &ToolRegistry) -> impl Iterator<Item = (&str, &ToolDefinition)> {
    registry.definitions().map(|d| (d.name(), d))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use roundtable_providers::JsonObject;

    use super::*;
    use crate::{Tool, ToolContext, ToolError, ToolKind, ToolResult};

    struct Named(&'static str, &'static str);

    #[async_trait]
    impl Tool for Named {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::new(
                self.0,
                self.1,
                serde_json::json!({"type": "object"}),
                ToolKind::Exec,
            )
        }
        async fn invoke(&self, _: ToolContext, _: JsonObject) -> Result<ToolResult, ToolError> {
            Ok(ToolResult::text(self.0))
        }
    }

    /// A source whose list a test sets; `refresh` publishes what was set.
    #[derive(Default)]
    struct Scripted {
        next: Mutex<Option<Vec<Arc<dyn Tool>>>>,
        now: Mutex<Vec<Arc<dyn Tool>>>,
        generation: AtomicU64,
        refreshes: AtomicU64,
    }

    impl Scripted {
        fn set(&self, tools: Vec<(&'static str, &'static str)>) {
            let tools = tools
                .into_iter()
                .map(|(n, d)| Arc::new(Named(n, d)) as Arc<dyn Tool>)
                .collect();
            *self.next.lock().unwrap() = Some(tools);
        }
    }

    #[async_trait]
    impl ToolSource for Scripted {
        fn tools(&self) -> Vec<Arc<dyn Tool>> {
            self.now.lock().unwrap().clone()
        }
        fn generation(&self) -> u64 {
            self.generation.load(Ordering::SeqCst)
        }
        async fn refresh(&self) {
            self.refreshes.fetch_add(1, Ordering::SeqCst);
            if let Some(tools) = self.next.lock().unwrap().take() {
                *self.now.lock().unwrap() = tools;
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn base() -> ToolRegistry {
        let mut base =
            ToolRegistry::new().with_approval_policy(crate::ApprovalPolicy::none().with_tool("x"));
        base.register(Named("fixed", "f")).unwrap();
        base
    }

    fn names(registry: &ToolRegistry) -> Vec<String> {
        registry.definitions().map(|d| d.name().into()).collect()
    }

    #[tokio::test]
    async fn a_changed_source_gives_one_turn_the_change_and_later_turns_the_new_registry() {
        let source = Arc::new(Scripted::default());
        source.set(vec![("one", "1")]);
        source.refresh().await;
        let live = LiveTools::new(base(), vec![source.clone()]).unwrap();

        let first = live.for_turn().await.unwrap();
        assert!(first.change.is_none());
        assert_eq!(names(&first.registry), ["fixed", "one"]);

        source.set(vec![("one", "1 again"), ("two", "2")]);
        let second = live.for_turn().await.unwrap();
        let change = second.change.unwrap();
        assert_eq!(change.added, [Arc::from("two")]);
        assert_eq!(change.changed, [Arc::from("one")]);
        assert_eq!(names(&second.registry), ["fixed", "one", "two"]);
        // The policy of the fixed registry still gates every tool.
        assert_eq!(
            second.registry.approval_policy(),
            base().approval_policy(),
            "policy kept"
        );
        assert!(!Arc::ptr_eq(&first.registry, &second.registry));

        let third = live.for_turn().await.unwrap();
        assert!(third.change.is_none(), "the change is given once");
        assert!(Arc::ptr_eq(&second.registry, &third.registry));
        assert_eq!(source.refreshes.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_name_clash_is_an_error_at_build_and_at_every_turn_until_it_goes() {
        let clashing = Arc::new(Scripted::default());
        clashing.set(vec![("fixed", "mine")]);
        clashing.refresh().await;
        assert!(matches!(
            LiveTools::new(base(), vec![clashing]),
            Err(SetupError::DuplicateTool { name }) if &*name == "fixed"
        ));

        let source = Arc::new(Scripted::default());
        let live = LiveTools::new(base(), vec![source.clone()]).unwrap();
        source.set(vec![("fixed", "mine")]);
        for _ in 0..2 {
            assert!(matches!(
                live.for_turn().await,
                Err(SetupError::DuplicateTool { .. })
            ));
        }
        source.set(vec![("other", "o")]);
        let turn = live.for_turn().await.unwrap();
        assert_eq!(turn.change.unwrap().added, [Arc::from("other")]);
    }
}
