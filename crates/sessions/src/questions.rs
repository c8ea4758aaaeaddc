//! Questions: the `ask_user` tool. A call stores its questionnaire on the
//! thread and waits, durably like an approval, for an answer any process
//! may deliver ([`SessionEngine::answer`](crate::SessionEngine::answer));
//! the model reads the answers as the tool's result. Cancelling the turn
//! wakes the call.

use std::collections::HashSet;
use std::fmt::Write;
use std::sync::Arc;

use async_trait::async_trait;
use roundtable_thread_stream::NewEntry;
use roundtable_tools::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::bound_turn::BoundTurn;
use crate::error::SessionError;
use crate::records::{Question, QuestionAsked, QuestionReply, SessionRecord};

/// The most questions one call may ask.
const MAX_QUESTIONS: usize = 10;

/// The most choices one question may offer.
const MAX_OPTIONS: usize = 20;

/// Input of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskUserInput {
    /// The questions, in the order they are shown (at most 10).
    pub questions: Vec<Question>,
}

/// `ask_user`: asks the user and waits for the answers.
pub(crate) struct AskUser {
    pub(crate) author: Arc<str>,
    /// The running turn the question is asked in.
    pub(crate) turn: Arc<BoundTurn>,
}

#[async_trait]
impl TypedTool for AskUser {
    type Input = AskUserInput;

    fn name(&self) -> &str {
        "ask_user"
    }

    fn description(&self) -> &str {
        "Ask the user one or more questions and wait for the answers. A question is free text, \
         or a choice among `options` (set `multiple` to allow several picks). Use it for a \
         decision or information only the user has; do not use it for what you can find out \
         with your other tools."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(&self, ctx: ToolContext, input: AskUserInput) -> Result<ToolResult, ToolError> {
        if let Err(problem) = check_questions(&input.questions) {
            return Ok(ToolResult::error(problem));
        }
        let turn = self.turn.current(|| "ask_user".into())?;
        if !turn.asked.contains(&ctx.call_id) {
            let asked = QuestionAsked {
                turn: turn.turn.clone(),
                call_id: ctx.call_id.clone(),
                questions: input.questions,
            };
            let body = asked.to_body().map_err(|e| ToolError::Fatal {
                tool: "ask_user".into(),
                message: e.to_string(),
            })?;
            turn.sink
                .append(vec![NewEntry::new(self.author.clone(), body)])
                .await
                .map_err(|e| ToolError::Fatal {
                    tool: "ask_user".into(),
                    message: e.to_string(),
                })?;
        }
        let answered = tokio::select! {
            answered = turn.inbox.answers.wait(&ctx.call_id) => answered,
            () = ctx.cancel.cancelled() => None,
        };
        let Some(answered) = answered.filter(|_| !ctx.cancel.is_cancelled()) else {
            return Err(ToolError::Cancelled {
                tool: "ask_user".into(),
                call_id: ctx.call_id,
            });
        };
        let Some(answers) = answered.answers else {
            return Ok(ToolResult::error(
                "The question expired before the user answered.",
            ));
        };
        let mut text = String::from("The user answered:\n");
        for answer in &answers {
            let _ = writeln!(text, "- {}: {}", answer.id, answer.values.join(", "));
        }
        Ok(ToolResult::text(text)
            .with_details(serde_json::json!({ "answers": answers_json(&answers) })))
    }
}

fn answers_json(answers: &[QuestionReply]) -> serde_json::Value {
    serde_json::to_value(answers).unwrap_or(serde_json::Value::Null)
}

/// Why a questionnaire cannot be asked, for the model.
fn check_questions(questions: &[Question]) -> Result<(), String> {
    if questions.is_empty() {
        return Err("Ask at least one question.".into());
    }
    if questions.len() > MAX_QUESTIONS {
        return Err(format!("Ask at most {MAX_QUESTIONS} questions at once."));
    }
    let mut ids = HashSet::new();
    for q in questions {
        if q.id.trim().is_empty() || q.question.trim().is_empty() {
            return Err("Every question needs an id and a question.".into());
        }
        if !ids.insert(q.id.as_str()) {
            return Err(format!("Two questions share the id {:?}.", q.id));
        }
        if q.options.len() > MAX_OPTIONS {
            return Err(format!(
                "Question {:?} offers more than {MAX_OPTIONS} choices.",
                q.id
            ));
        }
        if q.multiple && q.options.is_empty() {
            return Err(format!(
                "Question {:?} allows several picks but offers no choice.",
                q.id
            ));
        }
    }
    Ok(())
}

/// Checks `answers` against the `questions` they answer: every question
/// answered once, choices among the options, one pick unless several are
/// allowed, free text as one non-empty value.
pub(crate) fn check_answers(
    questions: &[Question],
    answers: &[QuestionReply],
) -> Result<(), SessionError> {
    let invalid = |reason: String| SessionError::InvalidField {
        field: "answers",
        reason,
    };
    let mut seen = HashSet::new();
    for answer in answers {
        let Some(question) = questions.iter().find(|q| q.id == answer.id) else {
            return Err(invalid(format!("no question has the id {:?}", answer.id)));
        };
        if !seen.insert(answer.id.as_str()) {
            return Err(invalid(format!(
                "question {:?} is answered twice",
                answer.id
            )));
        }
        if question.options.is_empty() {
            if answer.values.len() != 1 || answer.values[0].trim().is_empty() {
                return Err(invalid(format!(
                    "question {:?} takes one free-text answer",
                    answer.id
                )));
            }
        } else {
            if answer.values.is_empty() || (!question.multiple && answer.values.len() > 1) {
                return Err(invalid(format!(
                    "question {:?} takes {} choice",
                    answer.id,
                    if question.multiple {
                        "at least one"
                    } else {
                        "exactly one"
                    }
                )));
            }
            if let Some(bad) = answer.values.iter().find(|v| !question.options.contains(v)) {
                return Err(invalid(format!(
                    "{bad:?} is not a choice of question {:?}",
                    answer.id
                )));
            }
        }
    }
    if let Some(missing) = questions.iter().find(|q| !seen.contains(q.id.as_str())) {
        return Err(invalid(format!(
            "question {:?} is not answered",
            missing.id
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: &str, options: &[&str], multiple: bool) -> Question {
        Question {
            id: id.into(),
            question: format!("{id}?"),
            options: options.iter().map(|o| o.to_string()).collect(),
            multiple,
        }
    }

    fn answer(id: &str, values: &[&str]) -> QuestionReply {
        QuestionReply {
            id: id.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn answers_must_fit_their_questions() {
        let questions = [
            question("name", &[], false),
            question("color", &["red", "blue"], false),
            question("tags", &["a", "b"], true),
        ];
        let good = [
            answer("name", &["Ada"]),
            answer("color", &["red"]),
            answer("tags", &["a", "b"]),
        ];
        assert!(check_answers(&questions, &good).is_ok());
        for bad in [
            vec![answer("name", &["Ada"]), answer("color", &["red"])],
            vec![
                answer("name", &["Ada"]),
                answer("color", &["green"]),
                answer("tags", &["a"]),
            ],
            vec![
                answer("name", &["Ada"]),
                answer("color", &["red", "blue"]),
                answer("tags", &["a"]),
            ],
            vec![
                answer("name", &[""]),
                answer("color", &["red"]),
                answer("tags", &["a"]),
            ],
            vec![
                answer("name", &["Ada"]),
                answer("name", &["Bo"]),
                answer("color", &["red"]),
                answer("tags", &["a"]),
            ],
            vec![answer("x", &["1"])],
        ] {
            assert!(check_answers(&questions, &bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn questionnaires_are_checked_before_they_are_asked() {
        assert!(check_questions(&[question("a", &[], false)]).is_ok());
        assert!(check_questions(&[]).is_err());
        assert!(check_questions(&[question("a", &[], false), question("a", &[], false)]).is_err());
        assert!(check_questions(&[question("a", &[], true)]).is_err());
    }
}
