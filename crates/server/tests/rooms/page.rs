//! The room page in real browsers: alice and bob, each in their own
//! headless Chromium signed in with their own token, share a room with a
//! bot. Each sees the other's messages live, bob mentions the bot through
//! the page's @-completion, both see its answer arrive, and alice mutes the
//! bot from the roster. Skipped, saying so, where no Chromium binary exists.
use std::sync::Arc;

use crate::support::browser::{chromium, until};
use crate::support::*;
use chromiumoxide::Page;
use chromiumoxide::browser::{Browser, BrowserConfig};
use futures::StreamExt;
use roundtable_chat_runner::TurnLoop;
use roundtable_dispatch::{BotProfile, Participant, Trigger};
use roundtable_providers::ScriptedProvider;
use roundtable_server::rooms::RoomsApi;
use roundtable_thread_stream::{MemoryStore, ThreadStore};
use serde_json::{Value, json};

const ANSWER: &str = "Helper here: the launch is on Friday.";

/// A server whose rooms hold one bot, Helper, answering when named.
async fn server(fx: &Fixture) -> TestServer {
    let helper = Participant::bot(
        "helper",
        "Helper",
        BotProfile::new(Trigger::Mention, "You help."),
    );
    let replies = (0..4).map(|_| text(ANSWER));
    let provider = Arc::new(ScriptedProvider::new(replies).with_chunk_chars(3));
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let rooms = RoomsApi::builder(store)
        .bot(helper, TurnLoop::new(provider, model()))
        .open()
        .await
        .unwrap();
    let options = Options {
        rooms: Some(rooms),
        ..Options::default()
    };
    TestServer::start_with(fx.engine(fx.store().await, silent()), options).await
}

/// A browser of its own (its own cookies) on the room page, signed in
/// with `token`.
async fn open_page(chrome: &std::path::Path, url: String) -> (Browser, Page, tempfile::TempDir) {
    let profile = tempfile::tempdir().unwrap();
    let config = BrowserConfig::builder()
        .chrome_executable(chrome)
        .user_data_dir(profile.path())
        .no_sandbox()
        .build()
        .unwrap();
    let (browser, mut handler) = Browser::launch(config).await.unwrap();
    tokio::spawn(async move { while handler.next().await.is_some() {} });
    let page = browser.new_page(url).await.unwrap();
    (browser, page, profile)
}

async fn type_into(page: &Page, selector: &str, text: &str) {
    page.find_element(selector)
        .await
        .unwrap()
        .click()
        .await
        .unwrap()
        .type_str(text)
        .await
        .unwrap();
}

async fn click(page: &Page, selector: &str) {
    page.find_element(selector)
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

const EXPLAIN: &str = "document.body ? document.body.innerText : '(no body)'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_see_each_other_and_the_bot_live_in_the_room_page() {
    let Some(chrome) = chromium() else {
        eprintln!("skipped: no Chromium binary (set CHROME, or install the chromium package)");
        return;
    };
    let fx = Fixture::new();
    let server = server(&fx).await;
    let body = json!({"title": "Launch", "humans": ["bob"], "bots": ["helper"]});
    let (status, room) = send(
        server
            .http
            .post(server.url("/v1/rooms"))
            .bearer_auth(TOKEN)
            .json(&body),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{room}");
    let id = room["id"].as_str().unwrap();

    let page_of = |token: &str| server.url(&format!("/room?id={id}&token={token}"));
    let (mut alice_browser, alice, _a) = open_page(&chrome, page_of(TOKEN)).await;
    let (mut bob_browser, bob, _b) = open_page(&chrome, page_of(BOB_TOKEN)).await;
    for page in [&alice, &bob] {
        until(
            page,
            "document.getElementById('status').textContent === 'live'",
            EXPLAIN,
        )
        .await;
        until(
            page,
            "document.querySelectorAll('#roster li').length === 3",
            EXPLAIN,
        )
        .await;
    }

    // Alice speaks; bob's page shows it, with her name and colour.
    type_into(&alice, "#text", "hello bob").await;
    click(&alice, "#send").await;
    let hers = "[...document.querySelectorAll('.entry[data-author=\"alice\"] .text')].some(t => t.textContent === 'hello bob')";
    until(&bob, hers, EXPLAIN).await;

    // Bob names the bot through the completion list.
    type_into(&bob, "#text", "@hel").await;
    until(&bob, "!document.getElementById('mentions').hidden", EXPLAIN).await;
    click(&bob, "#mentions li").await;
    type_into(&bob, "#text", "when do we launch?").await;
    let typed: String = bob
        .evaluate("document.getElementById('text').value")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert_eq!(typed, "@helper when do we launch?");
    click(&bob, "#send").await;

    // Both see the bot's answer come in and its turn end.
    let answered = format!(
        "[...document.querySelectorAll('.entry.turn[data-author=\"helper\"]:not(.streaming)')].some(t => t.textContent.includes('{ANSWER}'))"
    );
    for page in [&alice, &bob] {
        until(page, &answered, EXPLAIN).await;
        until(
            page,
            "document.querySelector('.entry[data-author=\"bob\"]')",
            EXPLAIN,
        )
        .await;
    }

    // Alice mutes the bot from the roster; the room says so.
    click(&alice, "#roster button.mute[data-bot=\"helper\"]").await;
    until(
        &alice,
        "document.querySelector('#roster button.mute[data-bot=\"helper\"]')?.textContent === 'unmute'",
        EXPLAIN,
    )
    .await;
    let (_, room): (_, Value) = send(
        server
            .http
            .get(server.url(&format!("/v1/rooms/{id}")))
            .bearer_auth(BOB_TOKEN),
    )
    .await;
    assert_eq!(room["overrides"]["helper"], "mute", "{room}");

    for browser in [&mut alice_browser, &mut bob_browser] {
        browser.close().await.unwrap();
        browser.wait().await.unwrap();
    }
}
