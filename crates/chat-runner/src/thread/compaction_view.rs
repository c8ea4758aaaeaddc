//! A bot's view for compaction in the thread runner: the entries in the
//! order the bot's projection took them (its turns placed where they
//! started), read from the store after the view caught up.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_thread_stream::{Entry, StoreError, ThreadId, ThreadStore};

use super::bot_slot::BotSlot;
use crate::compaction::ViewSource;

/// The view of one bot on one thread, as its [`BotView`](super::bot_view::BotView) keeps it.
pub(crate) struct BotViewSource {
    pub(crate) slot: Arc<BotSlot>,
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) thread: ThreadId,
}

#[async_trait]
impl ViewSource for BotViewSource {
    async fn view(&self) -> Result<Vec<Entry>, StoreError> {
        let order = {
            let mut view = self.slot.view.lock().await;
            view.catch_up(&*self.store, &self.thread).await?;
            view.view_order()
        };
        let Some(&last) = order.iter().max() else {
            return Ok(Vec::new());
        };
        let entries = self.store.read(&self.thread, 1..=last).await?;
        Ok(order
            .iter()
            .filter_map(|seq| {
                // Seqs start at 1 without gaps; look it up if a store differs.
                let at = usize::try_from(*seq).ok()?.checked_sub(1)?;
                match entries.get(at) {
                    Some(e) if e.seq == *seq => Some(e.clone()),
                    _ => entries
                        .binary_search_by_key(seq, |e| e.seq)
                        .ok()
                        .map(|i| entries[i].clone()),
                }
            })
            .collect())
    }
}
