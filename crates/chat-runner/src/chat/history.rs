//! The surface conversation a chat session replays: user prompts and final
//! assistant answers, in pairs, under a window.

use std::sync::Arc;

use roundtable_dispatch::text_tokens;
use roundtable_providers::{AssistantBlock, AssistantMessage, Message, Model, UserMessage};
use roundtable_thread_stream::{Entry, EntryBody};

use super::turn_result::{TURN_RESULT_SIGNAL, TurnResultRecord};

/// The default number of pairs replayed.
pub const DEFAULT_HISTORY_PAIRS: usize = 50;

/// One exchange of the surface conversation: what the user said and the
/// final text the assistant answered. Tool traffic is not replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPair {
    /// The user's prompt, exactly as given (screening flags included).
    pub prompt: Arc<str>,
    /// The assistant's final answer.
    pub answer: Arc<str>,
    /// When the prompt was stored, in Unix milliseconds.
    pub at: i64,
}

/// Which pairs a turn replays. Pairs are never split: a window holds whole
/// pairs, newest last.
///
/// ```
/// use roundtable_chat_runner::chat::HistoryWindow;
/// use roundtable_chat_runner::chat::ChatPair;
///
/// let pair = |p: &str, a: &str| ChatPair { prompt: p.into(), answer: a.into(), at: 0 };
/// let pairs = vec![pair("one", "1"), pair("two", "2"), pair("three", "3")];
/// assert_eq!(HistoryWindow::Pairs(2).select(&pairs), &pairs[1..]);
/// // About 4 characters a token, rounded up per message: "three" + "3" is
/// // 2 + 1 tokens, "two" + "2" is 1 + 1 more, "one" + "1" would pass 5.
/// let window = HistoryWindow::TokenBudget { max_tokens: 5, max_pairs: 50 };
/// assert_eq!(window.select(&pairs), &pairs[1..]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryWindow {
    /// The last `n` pairs (the default: 50).
    Pairs(usize),
    /// The newest pairs whose estimated tokens (characters / 4, rounded up,
    /// per message) fit in `max_tokens`, at most `max_pairs` of them. A pair
    /// that does not fit ends the window, so no older pair is replayed
    /// without the ones after it.
    TokenBudget {
        /// The token budget of the replayed pairs.
        max_tokens: usize,
        /// The most pairs replayed.
        max_pairs: usize,
    },
}

impl Default for HistoryWindow {
    fn default() -> Self {
        Self::Pairs(DEFAULT_HISTORY_PAIRS)
    }
}

impl HistoryWindow {
    /// The pairs to replay: a suffix of `pairs`.
    pub fn select<'a>(&self, pairs: &'a [ChatPair]) -> &'a [ChatPair] {
        match *self {
            Self::Pairs(n) => &pairs[pairs.len().saturating_sub(n)..],
            Self::TokenBudget {
                max_tokens,
                max_pairs,
            } => {
                let max_tokens = u64::try_from(max_tokens).unwrap_or(u64::MAX);
                let mut used = 0u64;
                let mut start = pairs.len();
                for pair in pairs.iter().rev().take(max_pairs) {
                    let cost = text_tokens(&pair.prompt).saturating_add(text_tokens(&pair.answer));
                    if used.saturating_add(cost) > max_tokens {
                        break;
                    }
                    used += cost;
                    start -= 1;
                }
                &pairs[start..]
            }
        }
    }
}

/// The messages replaying `pairs`: user, assistant, user, assistant...
pub fn pair_messages(pairs: &[ChatPair], model: &Model) -> Vec<Message> {
    let mut messages = Vec::with_capacity(pairs.len() * 2 + 1);
    for pair in pairs {
        messages.push(Message::from(UserMessage::text(
            pair.prompt.clone(),
            pair.at,
        )));
        let mut answer = AssistantMessage::for_model(model, pair.at);
        answer
            .content
            .push(AssistantBlock::text(pair.answer.clone()));
        messages.push(Message::from(answer));
    }
    messages
}

/// Rebuilds the pairs of a session thread: each `chat` entry (a prompt) with
/// the `signal.turn_result` that follows it, when that turn ended by one of
/// its own ends (`stop`, `length`, `max-rounds`) with a non-empty answer.
/// Prompts of failed or cut-off turns are not replayed.
pub fn pairs_from_entries(entries: &[Entry]) -> Vec<ChatPair> {
    let mut pairs = Vec::new();
    let mut pending: Option<(Arc<str>, i64)> = None;
    for entry in entries {
        match &entry.body {
            EntryBody::Chat(chat) => pending = Some((chat.text.clone(), entry.at)),
            EntryBody::Signal(signal) if signal.name == TURN_RESULT_SIGNAL => {
                let Some((prompt, at)) = pending.take() else {
                    continue;
                };
                let Ok(record) = signal.data.decode::<TurnResultRecord>() else {
                    continue;
                };
                if record.replayable() {
                    pairs.push(ChatPair {
                        prompt,
                        answer: record.text.into(),
                        at,
                    });
                }
            }
            _ => {}
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::FinishReason;
    use roundtable_providers::Usage;
    use roundtable_thread_stream::{NewEntry, Signal, ThreadId};

    fn result(finish_reason: FinishReason, text: &str) -> EntryBody {
        let record = TurnResultRecord {
            turn: "t".into(),
            finish_reason,
            text: text.into(),
            error: None,
            rounds: 1,
            usage: Usage::default(),
            duration_ms: 1,
            model: "p/m".into(),
        };
        EntryBody::Signal(Signal {
            name: TURN_RESULT_SIGNAL.into(),
            data: serde_json::to_value(record).unwrap().into(),
        })
    }

    #[test]
    fn only_finished_turns_with_text_become_pairs() {
        let thread = ThreadId::new("s").unwrap();
        let bodies = vec![
            EntryBody::chat("one"),
            result(FinishReason::Stop, "1"),
            EntryBody::chat("failed"),
            result(FinishReason::Error, "partial"),
            EntryBody::chat("crashed before its result"),
            EntryBody::chat("two"),
            result(FinishReason::MaxRounds, "2"),
            EntryBody::chat("silent"),
            result(FinishReason::Stop, "  "),
            result(FinishReason::Stop, "orphan result"),
        ];
        let entries: Vec<_> = bodies
            .into_iter()
            .enumerate()
            .map(|(i, b)| NewEntry::new("x", b).into_entry(thread.clone(), i as u64 + 1))
            .collect();
        let pairs = pairs_from_entries(&entries);
        let got: Vec<_> = pairs
            .iter()
            .map(|p| (p.prompt.to_string(), p.answer.to_string()))
            .collect();
        assert_eq!(
            got,
            [("one".into(), "1".into()), ("two".into(), "2".into())] as [(String, String); 2]
        );
    }

    #[test]
    fn windows_take_whole_pairs_from_the_end() {
        let pair = |p: &str, a: &str| ChatPair {
            prompt: p.into(),
            answer: a.into(),
            at: 0,
        };
        let pairs: Vec<_> = (0..60).map(|i| pair(&format!("p{i}"), "a")).collect();
        assert_eq!(HistoryWindow::default().select(&pairs).len(), 50);
        assert_eq!(&*HistoryWindow::default().select(&pairs)[0].prompt, "p10");
        let tight = HistoryWindow::TokenBudget {
            max_tokens: 0,
            max_pairs: 50,
        };
        assert!(tight.select(&pairs).is_empty());
        let capped = HistoryWindow::TokenBudget {
            max_tokens: 10_000,
            max_pairs: 3,
        };
        assert_eq!(capped.select(&pairs).len(), 3);
        let messages = pair_messages(capped.select(&pairs), &Model::new("api", "p", "m", ""));
        assert_eq!(messages.len(), 6);
        assert!(matches!(messages[0], Message::User(_)));
        assert!(matches!(messages[5], Message::Assistant(_)));
    }
}
