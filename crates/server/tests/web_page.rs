//! The web page in a real browser: headless Chromium, driven over the
//! DevTools protocol, signs in with the one-time link, types a prompt,
//! watches the answer stream in, approves the tool call from its button,
//! and sees the turn end. Skipped, saying so, where no Chromium binary
//! exists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use chromiumoxide::browser::{Browser, BrowserConfig};
use futures::StreamExt;
use roundtable_providers::{AssistantBlock, ScriptedProvider};
use roundtable_server::ChatSettings;
use serde_json::json;
use support::browser::{chromium, until};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_typed_into_the_page_streams_its_answer_into_it() {
    let Some(chrome) = chromium() else {
        eprintln!(
            "skipped: no Chromium binary (set CHROME, or install the chromium package) to test the web page in"
        );
        return;
    };
    let fx = Fixture::new();
    std::fs::write(fx.workspace().join("note.txt"), "hello from the page\n").unwrap();
    // The first round says something, then asks to run a command (gated:
    // it waits for the button), the second answers.
    let mut first = call("c1", "shell", json!({"command": "cat note.txt"}));
    first
        .content
        .insert(0, AssistantBlock::text("Let me look at the note."));
    first.content.insert(
        0,
        AssistantBlock::Thinking(roundtable_providers::ThinkingContent::new(
            "The note is in the workspace; reading it answers this.",
        )),
    );
    let provider = Arc::new(
        ScriptedProvider::new([first, text("The note says: hello from the page.")])
            .with_chunk_chars(4),
    );
    let server = TestServer::start_with(
        fx.engine(fx.store().await, provider),
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            ..Options::default()
        },
    )
    .await;

    let profile = tempfile::tempdir().unwrap();
    let config = BrowserConfig::builder()
        .chrome_executable(&chrome)
        .user_data_dir(profile.path())
        .no_sandbox()
        .build()
        .unwrap();
    let (mut browser, mut handler) = Browser::launch(config).await.unwrap();
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });

    // The one-time link sets the cookie and lands on the page.
    let page = browser
        .new_page(server.url(&format!("/?token={TOKEN}")))
        .await
        .unwrap();
    let explain = "document.body ? document.body.innerText : '(no body)'";
    until(
        &page,
        "document.getElementById('status')?.textContent === 'ready'",
        explain,
    )
    .await;
    let url: String = page
        .evaluate("location.href")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert!(
        !url.contains("token"),
        "the token left the address bar: {url}"
    );

    page.find_element("#prompt")
        .await
        .unwrap()
        .click()
        .await
        .unwrap()
        .type_str("What does the note say?")
        .await
        .unwrap();
    page.find_element("#send")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    // The first round's text and the call waiting for approval are on the
    // page while the turn still runs: the answer streams in.
    until(
        &page,
        "document.querySelector('.part.tool[data-state=\"approval-requested\"] .decide-approve')",
        explain,
    )
    .await;
    let shown: String = page
        .evaluate("document.querySelector('.message.assistant').innerText")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert!(shown.contains("Let me look at the note."), "{shown}");
    assert!(shown.contains("cat note.txt"), "{shown}");
    // The reasoning streamed into one block, before the round's text.
    let reasoning: String = page
        .evaluate(
            "[...document.querySelectorAll('.message.assistant > .part')].map(p => p.className + ': ' + p.textContent).join('\\n')",
        )
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert!(
        reasoning.starts_with(
            "part thinking: reasoningThe note is in the workspace; reading it answers this.\npart text: Let me look at the note."
        ),
        "{reasoning}"
    );
    let stop_shown: bool = page
        .evaluate("!document.getElementById('stop').hidden")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert!(stop_shown, "the Stop button shows while the turn runs");
    let user: String = page
        .evaluate("document.querySelector('.message.user').innerText")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert!(user.contains("What does the note say?"), "{user}");

    page.find_element(".decide-approve")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(
        &page,
        "document.querySelector('.message.assistant')?.dataset.finish === 'stop'",
        explain,
    )
    .await;
    let shown: String = page
        .evaluate("document.querySelector('.message.assistant').innerText")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert!(
        shown.contains("The note says: hello from the page."),
        "{shown}"
    );
    assert!(shown.contains("output-available"), "{shown}");
    // The stream ended; the session is listed, named by its first message.
    until(
        &page,
        "document.getElementById('stop').hidden && document.querySelectorAll('#sessions li').length === 1",
        explain,
    )
    .await;
    let listed: String = page
        .evaluate("document.querySelector('#sessions li .title').innerText")
        .await
        .unwrap()
        .into_value()
        .unwrap();
    assert_eq!(listed, "What does the note say?");

    browser.close().await.unwrap();
    browser.wait().await.unwrap();
    events.abort();
}
