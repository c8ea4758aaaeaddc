//! The `read_skill` tool, directly and through a tool registry.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use roundtable_providers::ToolCall;
use roundtable_skills::{ReadSkill, load_skills_from_dir};
use roundtable_tools::{Tool, ToolContext, ToolError, ToolKind, ToolRegistry};
use serde_json::json;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/repo")
}

fn tool() -> ReadSkill {
    ReadSkill::new(load_skills_from_dir(fixture().join("skills")).skills)
}

fn call(args: serde_json::Value) -> ToolCall {
    ToolCall::new("call_1", ReadSkill::NAME, args.as_object().unwrap().clone())
}

#[test]
fn definition_enumerates_listed_skills_only() {
    let definition = tool().definition();
    assert_eq!(definition.name(), "read_skill");
    assert_eq!(definition.kind, ToolKind::Read);
    assert!(!definition.requires_approval);
    assert_eq!(
        *definition.input_schema(),
        json!({
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The skill name from <available_skills>.",
                    "enum": ["Bad_Name", "issue-triage", "pr-review", "architect"],
                }
            },
            "required": ["name"],
            "additionalProperties": false,
        })
    );
}

#[test]
fn no_skills_means_a_plain_string_parameter() {
    let tool = ReadSkill::new(Vec::<roundtable_skills::Skill>::new());
    let definition = tool.definition();
    let schema = definition.input_schema();
    assert!(schema["properties"]["name"].get("enum").is_none());
}

#[tokio::test]
async fn returns_the_skill_md_text_through_a_registry() {
    let mut registry = ToolRegistry::new();
    registry.register(tool()).unwrap();
    let result = registry
        .invoke(
            &call(json!({"name": "pr-review"})),
            ToolContext::new("call_1"),
        )
        .await
        .unwrap();
    assert!(result.ok, "{result:?}");
    assert_eq!(
        result.text_content(),
        std::fs::read_to_string(fixture().join("skills/pr-review/SKILL.md")).unwrap()
    );
}

#[tokio::test]
async fn unknown_hidden_and_missing_names_are_error_results() {
    let tool = tool();
    for args in [
        json!({"name": "nope"}),
        json!({"name": "hidden-helper"}),
        json!({"name": "../../Cargo"}),
        json!({"name": 7}),
        json!({}),
    ] {
        let result = tool
            .invoke(ToolContext::new("c"), call(args.clone()).arguments)
            .await
            .unwrap();
        assert!(!result.ok, "{args}");
    }
    let result = tool
        .invoke(
            ToolContext::new("c"),
            call(json!({"name": "nope"})).arguments,
        )
        .await
        .unwrap();
    assert_eq!(
        result.error.as_deref(),
        Some("unknown skill \"nope\". Available: Bad_Name, issue-triage, pr-review, architect.")
    );
}

#[tokio::test]
async fn a_file_gone_after_loading_is_an_error_result() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("gone");
    std::fs::create_dir(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: gone\ndescription: d\n---\n",
    )
    .unwrap();
    let tool = ReadSkill::new(load_skills_from_dir(dir.path()).skills);
    std::fs::remove_file(skill.join("SKILL.md")).unwrap();
    let result = tool.read("gone").await.unwrap_err();
    assert!(result.starts_with("cannot read skill \"gone\""), "{result}");
}

#[tokio::test]
async fn a_cancelled_call_ends_the_turn() {
    let ctx = ToolContext::new("c");
    ctx.cancel.cancel();
    let err = tool()
        .invoke(ctx, call(json!({"name": "pr-review"})).arguments)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Cancelled { .. }), "{err:?}");
}
