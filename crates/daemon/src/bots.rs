//! The rooms' bot catalogue of the configuration, made into bots: each
//! bot's participant (id, name, persona, trigger, topics) and its turn
//! loop (model, thinking, tools, approver, round cap). What the config
//! file check cannot know, a bot's model among the offered ones, is
//! checked here, before anything is served.

use std::sync::Arc;

use roundtable_chat_runner::{ApproveAll, Approver, DenyAll, TurnLoop};
use roundtable_dispatch::{BotProfile, Participant, Topic, Trigger};
use roundtable_providers::{StreamOptions, ThinkingLevel};
use roundtable_server::rooms::RoomApprovals;
use roundtable_sessions::model_key;
use roundtable_tools::ToolRegistry;
use roundtable_tools::workspace::Workspace;

use crate::config::{BotApproval, BotConfig, BotTools, BotTrigger};
use crate::models::Offered;

/// The bots of `configured`, answering through the `offered` models with
/// at most `max_rounds` model rounds a turn; bots whose members decide
/// their gated calls ask through `members`.
pub(crate) fn catalogue(
    configured: &[BotConfig],
    offered: &[Offered],
    max_rounds: u32,
    members: &RoomApprovals,
) -> Result<Vec<(Participant, TurnLoop)>, String> {
    configured
        .iter()
        .map(|bot| {
            let turns = turn_loop(bot, offered, max_rounds, members)?;
            Ok((participant(bot), turns))
        })
        .collect()
}

/// Who the bot is in a room.
fn participant(bot: &BotConfig) -> Participant {
    let trigger = match bot.trigger {
        BotTrigger::Mention => Trigger::Mention,
        BotTrigger::Always => Trigger::Always,
        BotTrigger::Ambient => Trigger::Ambient,
    };
    let topics = bot.topics.iter().map(|t| Topic::keyword(t));
    let profile = BotProfile::new(trigger, bot.persona.as_str()).with_topics(topics);
    let participant = Participant::bot(bot.id.as_str(), bot.name.as_str(), profile);
    match &bot.about {
        Some(about) => participant.with_about(about.as_str()),
        None => participant,
    }
}

/// How the bot answers.
fn turn_loop(
    bot: &BotConfig,
    offered: &[Offered],
    max_rounds: u32,
    members: &RoomApprovals,
) -> Result<TurnLoop, String> {
    let served = model_of(bot, offered)?;
    let thinking = match &bot.thinking {
        Some(level) => level
            .parse::<ThinkingLevel>()
            .map_err(|e| format!("bot {}: {e}", bot.id))?,
        None => ThinkingLevel::Off,
    };
    let options = StreamOptions {
        thinking,
        ..StreamOptions::default()
    };
    let approver: Arc<dyn Approver> = match bot.approval {
        BotApproval::Deny => Arc::new(DenyAll),
        BotApproval::Approve => Arc::new(ApproveAll),
        BotApproval::Members => Arc::new(members.clone()),
    };
    let limits = roundtable_sessions::default_turn_limits().with_max_rounds(max_rounds);
    Ok(TurnLoop::new(served.provider.clone(), served.model.clone())
        .with_options(options)
        .with_tools(Arc::new(tools_of(bot)?))
        .with_approver(approver)
        .with_limits(limits))
}

/// The offered model the bot names, or the first.
fn model_of<'a>(bot: &BotConfig, offered: &'a [Offered]) -> Result<&'a Offered, String> {
    let Some(key) = &bot.model else {
        return offered
            .first()
            .ok_or_else(|| format!("bot {}: no model is offered", bot.id));
    };
    offered
        .iter()
        .find(|o| model_key(&o.model) == *key)
        .ok_or_else(|| {
            let keys: Vec<String> = offered.iter().map(|o| model_key(&o.model)).collect();
            format!(
                "bot {}: model {key:?} is not one this daemon offers ({})",
                bot.id,
                keys.join(", ")
            )
        })
}

/// The bot's tools.
fn tools_of(bot: &BotConfig) -> Result<ToolRegistry, String> {
    let mut tools = ToolRegistry::new();
    if let (BotTools::WorkspaceRead, Some(folder)) = (bot.tools, &bot.workspace) {
        let workspace = Workspace::open(folder)
            .map_err(|e| format!("bot {}: the workspace {}: {e}", bot.id, folder.display()))?;
        for tool in workspace.read_only_toolset() {
            tools
                .register_arc(tool)
                .map_err(|e| format!("bot {}: {e}", bot.id))?;
        }
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::config::Config;

    #[test]
    fn a_bot_names_an_offered_model_or_gets_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[[bots]]\nid = \"reader\"\nname = \"Reader\"\npersona = \"p\"\ntrigger = \"mention\"\ntools = \"workspace-read\"\nworkspace = {:?}\n",
            dir.path().display().to_string()
        );
        let mut config: Config = toml::from_str(&text).unwrap();
        let offered = vec![crate::models::offline()];
        let bots = catalogue(&config.bots, &offered, 8, &RoomApprovals::new()).unwrap();
        assert_eq!(&*bots[0].0.id, "reader");
        assert_eq!(bots[0].1.tools().len(), 5);
        config.bots[0].model = Some("openai/gpt-9".into());
        let error = catalogue(&config.bots, &offered, 8, &RoomApprovals::new())
            .err()
            .unwrap();
        assert!(
            error.contains("gpt-9") && error.contains("offline/offline"),
            "{error}"
        );
    }
}
