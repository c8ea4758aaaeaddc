//! Driving headless Chromium over the DevTools protocol: finding the
//! binary and waiting until the page shows something.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chromiumoxide::Page;

/// The Chromium to drive: `$CHROME` (as chromiumoxide reads it), or the
/// first of the usual names on `PATH`.
pub(crate) fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROME").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Waits until `expression` is true in the page; fails after 20 s with
/// what `explain` says about the page then.
pub(crate) async fn until(page: &Page, expression: &str, explain: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let holds: bool = page
            .evaluate(format!("Boolean({expression})"))
            .await
            .unwrap()
            .into_value()
            .unwrap();
        if holds {
            return;
        }
        if Instant::now() > deadline {
            let state: String = page
                .evaluate(explain)
                .await
                .unwrap()
                .into_value()
                .unwrap_or_default();
            panic!("the page never showed {expression}; it shows: {state}");
        }
        // The page changes when the server's next line arrives: look again
        // shortly.
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
