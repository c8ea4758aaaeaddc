//! A session's conversation kept between its turns: the messages its
//! agent's model is given, projected incrementally.
//!
//! A turn starts from the conversation up to its `turn.started`. Reading
//! and projecting the whole thread for that would make every turn cost as
//! much as the session is long, so the runtime keeps the projection of the
//! last turn's start ([`Projection`], the incremental form of
//! `build_messages`) and a turn reads from the store only the entries
//! written since (by this process or any other: what is kept is never
//! trusted beyond the seq it was projected to), pushing them in.
//!
//! What this process appends to the thread is pushed in as the store
//! returns it (the turn's writer, the submits, the queue and `settled`
//! appends), while it follows the last seq pushed: the next turn then reads
//! only what others appended, usually nothing. An entry the view would show
//! otherwise than stored (a message with files, whose content the view
//! adds), one that changes the roster (a new author) and any entry while
//! some turns are left out are not pushed: the next turn reads them, and
//! what follows them, from the store as before.
//!
//! It is built again from the whole thread when what it was projected with
//! changed: the turns a retry superseded (their entries leave the view),
//! the roster (a new author: every label may change), or whether the
//! session's model reads images (another model chosen). The result is
//! always the one `build_messages` gives for the same entries.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use roundtable_chat_runner::ROOM_FOR_ROUNDS;
use roundtable_chat_runner::compaction::ConversationCount;
use roundtable_dispatch::{BotProfile, Participant, Projection, Roster, Trigger};
use roundtable_providers::Message;
use roundtable_thread_stream::{Entry, EntryBody, StoreError};

use crate::verify::VERIFY_AUTHOR;

/// What a kept conversation is projected from: a session's view of its
/// thread (the engine's `SessionView`).
pub(crate) trait ConversationSource: Sync {
    /// The turns left out of the view.
    fn superseded(&self) -> &Arc<HashSet<Arc<str>>>;
    /// Whether images are shown (the model reads them) or notes of them.
    fn shows_images(&self) -> bool;
    /// The view's entries from seq `from` to seq `upto`.
    fn range(
        &self,
        from: u64,
        upto: u64,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send;
}

/// The kept conversation of one session (none until its first turn).
#[derive(Default)]
pub(crate) struct KeptConversation {
    kept: Mutex<Option<Kept>>,
    /// Its tokens as the compaction step counted them, carried from turn
    /// to turn: a message is counted once, not once a model request.
    count: ConversationCount,
}

/// A projection and what it was built with.
struct Kept {
    /// The last seq read into it.
    upto: u64,
    /// The turns left out of the view.
    superseded: Arc<HashSet<Arc<str>>>,
    /// Whether images were shown (the model read them) or notes of them.
    images: bool,
    /// The authors of the `chat` entries the roster was made of.
    authors: HashSet<Arc<str>>,
    roster: Roster,
    projection: Projection,
}

impl KeptConversation {
    /// The roster and the messages of `view` up to seq `upto` (a turn
    /// started there): the kept projection brought up to `upto`, or a new
    /// one.
    pub(crate) async fn upto(
        &self,
        view: &impl ConversationSource,
        agent: &Arc<str>,
        upto: u64,
    ) -> Result<(Roster, Vec<Message>), StoreError> {
        // Taken out while the store is read: one turn of a session runs at
        // a time, and a concurrent caller builds its own.
        let kept = self.take();
        let kept = match kept {
            // Projected up to this turn's start at most, with the same
            // turns left out.
            Some(mut kept)
                if kept.upto <= upto
                    && *kept.superseded == **view.superseded()
                    && kept.images == view.shows_images() =>
            {
                let fresh = view.range(kept.upto + 1, upto).await?;
                if new_authors(&fresh, &kept.authors) {
                    Self::build(view, agent, upto).await?
                } else {
                    kept.projection.extend(&fresh);
                    kept.upto = upto;
                    kept
                }
            }
            _ => Self::build(view, agent, upto).await?,
        };
        // With the room the turn loop makes for its rounds: it would
        // otherwise copy the whole list to make it.
        let shown = kept.projection.messages();
        let mut messages = Vec::with_capacity(shown.len() + ROOM_FOR_ROUNDS);
        messages.extend_from_slice(shown);
        let answer = (kept.roster.clone(), messages);
        *self.lock() = Some(kept);
        Ok(answer)
    }

    /// The projection of the view up to `upto`, from the whole thread.
    async fn build(
        view: &impl ConversationSource,
        agent: &Arc<str>,
        upto: u64,
    ) -> Result<Kept, StoreError> {
        let visible = view.range(1, upto).await?;
        let roster = session_roster(agent, &visible);
        let mut projection = Projection::new(agent.clone(), &roster);
        projection.extend(&visible);
        Ok(Kept {
            upto,
            superseded: view.superseded().clone(),
            images: view.shows_images(),
            authors: chat_authors(&visible).cloned().collect(),
            roster,
            projection,
        })
    }

    /// Pushes `stored` (entries this process just appended, in seq order)
    /// into the kept projection when they follow the last seq it holds and
    /// the view shows them as stored; stops at the first that does not.
    /// Never waits: while a turn's start holds the projection, the turn
    /// reads them from the store.
    pub(crate) fn stored(&self, stored: &[Entry]) {
        let Ok(mut kept) = self.kept.try_lock() else {
            return;
        };
        let Some(kept) = kept.as_mut() else {
            return;
        };
        // With turns left out, the view drops some entries (and the
        // compactions written while those ran): reading decides.
        if !kept.superseded.is_empty() {
            return;
        }
        for entry in stored {
            let shown_as_stored = match &entry.body {
                EntryBody::Chat(chat) => {
                    chat.files.is_empty() && kept.authors.contains(&entry.author)
                }
                _ => true,
            };
            if entry.seq != kept.upto + 1 || !shown_as_stored {
                return;
            }
            kept.projection.push(entry);
            kept.upto = entry.seq;
        }
    }

    /// The running token count of the conversation, for a turn's
    /// compaction step.
    pub(crate) fn count(&self) -> ConversationCount {
        self.count.clone()
    }

    fn take(&self) -> Option<Kept> {
        self.lock().take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        // Every update is one replace: a poisoned lock holds a whole value.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The authors of `entries`' `chat` entries (the people of the roster).
fn chat_authors(entries: &[Entry]) -> impl Iterator<Item = &Arc<str>> {
    entries
        .iter()
        .filter(|e| matches!(e.body, EntryBody::Chat(_)))
        .map(|e| &e.author)
}

/// True when a `chat` entry of `entries` has an author not in `known`.
fn new_authors(entries: &[Entry], known: &HashSet<Arc<str>>) -> bool {
    chat_authors(entries).any(|author| !known.contains(author))
}

/// The session's participants: its agent, and everyone who wrote in it
/// (named by their ids).
pub(crate) fn session_roster(agent: &Arc<str>, entries: &[Entry]) -> Roster {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut people = vec![Participant::bot(
        agent.clone(),
        agent.clone(),
        BotProfile::new(Trigger::Mention, ""),
    )];
    seen.insert(agent);
    let authors = entries
        .iter()
        .filter(|e| matches!(e.body, EntryBody::Chat(_)))
        .map(|e| &*e.author);
    for author in std::iter::once(VERIFY_AUTHOR).chain(authors) {
        if seen.insert(author) {
            people.push(Participant::human(author, author));
        }
    }
    // Ids whose handles collide keep the agent alone: labels then show the
    // ids, which is all the names are anyway.
    match Roster::new(people.clone()) {
        Ok(roster) => roster,
        Err(_) => Roster::new(people.into_iter().take(1)).unwrap_or_else(|_| empty_roster()),
    }
}

/// A roster with nobody in it (labels then show authors' ids).
fn empty_roster() -> Roster {
    // Nobody means no duplicate: this cannot fail; were it to, an empty
    // roster is what it would have given.
    Roster::new(Vec::<Participant>::new()).unwrap_or_else(|_| empty_roster())
}

#[cfg(test)]
mod tests {
    use roundtable_dispatch::build_messages;
    use roundtable_providers::{
        AssistantBlock, AssistantMessage, Model, OPENAI_COMPLETIONS, ScriptedProvider, StopReason,
        ToolCall,
    };
    use roundtable_thread_stream::{MemoryStore, ThreadStore};

    use super::*;
    use crate::compaction::SessionView;
    use crate::{Caller, CreateSession, SessionEngine, Submit};

    fn answer(text: &str) -> AssistantMessage {
        let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
        m.content.push(AssistantBlock::text(text));
        m
    }

    fn read_call(id: &str) -> AssistantMessage {
        let mut m = answer("Let me look.");
        let args = serde_json::json!({"path": "README.md"});
        let args = args.as_object().cloned().unwrap_or_default();
        m.content.push(AssistantBlock::ToolCall(ToolCall::new(
            id,
            "read_file",
            args,
        )));
        m.stop_reason = StopReason::ToolUse;
        m
    }

    /// After every turn of a scripted session (tool rounds, answers, notes
    /// by a new author, a message from another engine over the same store)
    /// the kept conversation is what a fresh read of the thread projects.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_kept_conversation_is_what_a_fresh_read_projects() {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("README.md"), "# Demo\n").unwrap();
        let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
        let provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
        let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
        let engine = SessionEngine::builder(store.clone(), provider.clone(), model.clone()).build();
        // Another process over the same store: it only writes notes.
        let other = SessionEngine::builder(store.clone(), provider.clone(), model).build();
        let session = engine
            .create(&Caller::Host, CreateSession::new(workspace.path()))
            .await
            .unwrap();
        for turn in 0..6 {
            if turn % 2 == 1 {
                provider.push(read_call(&format!("call_{turn}")));
            }
            provider.push(answer(&format!("answer {turn}")));
            if turn == 3 {
                let note = Submit {
                    auto_run: Some(false),
                    author: Some("bob".into()),
                    ..Submit::text("a note from someone new")
                };
                other
                    .submit(&Caller::Host, &session.id, note)
                    .await
                    .unwrap();
            }
            engine
                .submit(
                    &Caller::Host,
                    &session.id,
                    Submit::text(format!("question {turn}")),
                )
                .await
                .unwrap();
            engine.idle(&session.id).await.unwrap();

            let core = engine.core();
            let runtime = core.runtime(&Caller::Host, &session.id).await.unwrap();
            let superseded = runtime.refresh(&*store).await.unwrap().superseded_turns();
            let view = SessionView::new(
                core.clone(),
                runtime.clone(),
                superseded,
                core.models.own().clone(),
            );
            let kept = runtime
                .conversation
                .take()
                .expect("a turn keeps its conversation");
            // What this process appended was pushed in as stored: the
            // projection reaches the thread's end (`settled`).
            assert_eq!(
                kept.upto,
                store.last_seq(&runtime.thread).await.unwrap(),
                "turn {turn}"
            );
            let fresh = view.range(1, kept.upto).await.unwrap();
            let roster = session_roster(&core.agent, &fresh);
            assert_eq!(
                kept.projection.messages(),
                build_messages(&core.agent, &fresh, &roster).as_slice(),
                "turn {turn}"
            );
            assert_eq!(
                format!("{:?}", kept.roster),
                format!("{roster:?}"),
                "turn {turn}"
            );
            *runtime.conversation.lock() = Some(kept);
        }
    }

    /// A view over fixed entries, showing images or not.
    struct FixedView {
        entries: Vec<Entry>,
        images: bool,
        superseded: Arc<HashSet<Arc<str>>>,
    }

    impl ConversationSource for FixedView {
        fn superseded(&self) -> &Arc<HashSet<Arc<str>>> {
            &self.superseded
        }

        fn shows_images(&self) -> bool {
            self.images
        }

        async fn range(&self, from: u64, upto: u64) -> Result<Vec<Entry>, StoreError> {
            Ok(self
                .entries
                .iter()
                .filter(|e| (from..=upto).contains(&e.seq))
                .cloned()
                .collect())
        }
    }

    #[tokio::test]
    async fn a_model_that_reads_images_differently_gets_the_conversation_built_again() {
        use roundtable_thread_stream::{NewEntry, ThreadId};

        let view = |text: &str, images: bool| FixedView {
            entries: vec![
                NewEntry::new("alice", EntryBody::chat(text))
                    .into_entry(ThreadId::new("sess_1").unwrap(), 1),
            ],
            images,
            superseded: Arc::default(),
        };
        let agent: Arc<str> = Arc::from("agent");
        let kept = KeptConversation::default();
        let texts = |messages: &[Message]| serde_json::to_string(messages).unwrap();
        // A model that reads images is shown the image...
        let (_, first) = kept.upto(&view("[image]", true), &agent, 1).await.unwrap();
        assert!(texts(&first).contains("[image]"));
        // ...one that does not is shown the note, from the same entries.
        let (_, second) = kept
            .upto(&view("[a note of the image]", false), &agent, 1)
            .await
            .unwrap();
        assert!(
            texts(&second).contains("[a note of the image]"),
            "{}",
            texts(&second)
        );
    }
}
