//! `read_skill`: the tool a chat agent uses to open a skill by name.
//!
//! An agent without a general file-reading tool still gets progressive
//! disclosure: the catalogue lists names and descriptions, and this tool
//! returns a listed skill's SKILL.md on request. Its one parameter is an
//! enum of the loaded names, so the model cannot even name anything else;
//! and the file read is the one the loader found, never a path built from
//! the model's input.

use std::borrow::Borrow;
use std::path::PathBuf;

use async_trait::async_trait;
use roundtable_providers::JsonObject;
use roundtable_tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolResult};
use serde_json::{Value, json};

use crate::skill::Skill;

/// The `read_skill` tool over a fixed set of loaded skills.
///
/// Only listed skills are offered (those without
/// `disable-model-invocation`), the same set the catalogue shows.
///
/// ```
/// use roundtable_skills::{ReadSkill, Skill};
/// use roundtable_tools::{Tool, ToolContext};
///
/// let dir = tempfile::tempdir().unwrap();
/// let file = dir.path().join("SKILL.md");
/// let text = "---\nname: chat\ndescription: Be a good chat partner.\n---\n# Chat\n";
/// std::fs::write(&file, text).unwrap();
/// let (skill, _) = Skill::from_markdown(&file, text);
/// let tool = ReadSkill::new([skill.unwrap()]);
/// assert_eq!(tool.definition().input_schema()["properties"]["name"]["enum"][0], "chat");
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let args = serde_json::json!({"name": "chat"}).as_object().unwrap().clone();
/// let result = tool.invoke(ToolContext::new("call_1"), args.into()).await.unwrap();
/// assert_eq!(result.text_content(), text);
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSkill {
    /// Name and SKILL.md path of each offered skill, in catalogue order.
    skills: Vec<(String, PathBuf)>,
}

impl ReadSkill {
    /// The tool's name.
    pub const NAME: &'static str = "read_skill";

    /// A tool offering the listed skills among `skills`.
    pub fn new<I>(skills: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Skill>,
    {
        let skills = skills
            .into_iter()
            .filter(|skill| skill.borrow().is_listed())
            .map(|skill| {
                let skill = skill.borrow();
                (skill.name.clone(), skill.file_path.clone())
            })
            .collect();
        Self { skills }
    }

    /// The names the tool accepts, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.skills.iter().map(|(name, _)| name.as_str())
    }

    /// The JSON schema of the input: `{ name: <one of the names> }`.
    ///
    /// With no skills the name is a plain string (an empty enum is not a
    /// valid schema for every provider); every call then fails politely.
    pub fn input_schema(&self) -> Value {
        let mut name = json!({
            "type": "string",
            "description": "The skill name from <available_skills>.",
        });
        if !self.skills.is_empty() {
            name["enum"] = Value::Array(self.names().map(Value::from).collect());
        }
        json!({
            "type": "object",
            "properties": { "name": name },
            "required": ["name"],
            "additionalProperties": false,
        })
    }

    /// Reads the SKILL.md of `name`.
    ///
    /// The error text is meant for the model: an unknown name lists the
    /// known ones; an unreadable file says why.
    pub async fn read(&self, name: &str) -> Result<String, String> {
        let Some((_, path)) = self.skills.iter().find(|(known, _)| known == name) else {
            let known: Vec<&str> = self.names().collect();
            let known = if known.is_empty() {
                "(none)".to_owned()
            } else {
                known.join(", ")
            };
            return Err(format!("unknown skill \"{name}\". Available: {known}."));
        };
        tokio::fs::read_to_string(path)
            .await
            .map_err(|err| format!("cannot read skill \"{name}\": {err}"))
    }
}

#[async_trait]
impl Tool for ReadSkill {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            Self::NAME,
            "Read the full SKILL.md text for a skill listed in <available_skills>. Use this \
             when the request matches a skill's description and you need its detailed \
             instructions.",
            self.input_schema(),
            ToolKind::Read,
        )
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let Some(name) = args.get("name").and_then(Value::as_str) else {
            return Ok(ToolResult::error(
                "missing argument \"name\": the skill name from <available_skills>",
            ));
        };
        let read = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => {
                return Err(ToolError::Cancelled {
                    tool: Self::NAME.into(),
                    call_id: ctx.call_id,
                });
            }
            read = self.read(name) => read,
        };
        Ok(match read {
            Ok(text) => ToolResult::text(text),
            Err(message) => ToolResult::error(message),
        })
    }
}
