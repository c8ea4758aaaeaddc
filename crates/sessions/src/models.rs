//! The models a session's turns may run on: the engine's own (the one it
//! was built with, every session's until it chooses another) and those the
//! host offers beside it, each with the provider that serves it. A session
//! chooses by key (`provider/id`), and the choice is stored
//! (`signal.model_changed`), so it holds across restarts and for every
//! process over the same store that offers the same models.

use std::sync::Arc;

use roundtable_providers::{Model, Provider};

/// The key a model is chosen by: `provider/id`.
pub fn model_key(model: &Model) -> String {
    format!("{}/{}", model.provider, model.id)
}

/// A model and the provider that serves it (the model shared: a turn's
/// view, its compaction target and its kept tools each hold one).
#[derive(Clone)]
pub(crate) struct ServedModel {
    pub(crate) model: Arc<Model>,
    pub(crate) provider: Arc<dyn Provider>,
}

/// The engine's models: its own first, then the others it offers.
#[derive(Clone)]
pub(crate) struct ModelChoices {
    own: ServedModel,
    others: Vec<ServedModel>,
}

impl ModelChoices {
    pub(crate) fn new(model: Model, provider: Arc<dyn Provider>) -> Self {
        Self {
            own: ServedModel {
                model: Arc::new(model),
                provider,
            },
            others: Vec::new(),
        }
    }

    /// Offers `model` beside the others (a model already offered under the
    /// same key is replaced).
    pub(crate) fn offer(&mut self, model: Model, provider: Arc<dyn Provider>) {
        let key = model_key(&model);
        let model = Arc::new(model);
        if key == model_key(&self.own.model) {
            self.own = ServedModel { model, provider };
            return;
        }
        self.others.retain(|m| model_key(&m.model) != key);
        self.others.push(ServedModel { model, provider });
    }

    /// Every model, the engine's own first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &ServedModel> {
        std::iter::once(&self.own).chain(&self.others)
    }

    /// The engine's own model.
    pub(crate) fn own(&self) -> &ServedModel {
        &self.own
    }

    /// The model offered under `key`.
    pub(crate) fn find(&self, key: &str) -> Option<&ServedModel> {
        self.all().find(|m| model_key(&m.model) == key)
    }

    /// What a session that chose `chosen` runs on: that model, or the
    /// engine's own when it chose none or chose one this engine does not
    /// offer (another process's, say).
    pub(crate) fn for_session(&self, chosen: Option<&str>) -> &ServedModel {
        chosen.and_then(|key| self.find(key)).unwrap_or(&self.own)
    }
}
