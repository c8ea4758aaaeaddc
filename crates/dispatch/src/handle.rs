//! `@handles`: how participants are named in text.
//!
//! A participant's handle is the slug of its display name: letters and digits
//! lowercased, every run of anything else turned into one `-`, no `-` at
//! either end (`Archive Bot` → `archive-bot`, `Dr. Who?` → `dr-who`). A
//! mention is `@` followed by letters, digits, `-` or `_`, slugged the same way
//! (so `@Archive_Bot` names `archive-bot` too), where the `@` does not follow a
//! letter or digit (`bob@example.com` names nobody).

/// The slug of `name`: lowercase letters and digits joined by single `-`.
pub(crate) fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut gap = false;
    for c in name.chars() {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push('-');
            }
            gap = false;
            out.extend(c.to_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

/// The handles `@`-mentioned in `text`, slugged, in order of appearance
/// (repeats included).
pub fn mentioned_handles(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut rest = text;
    let mut prev: Option<char> = None;
    std::iter::from_fn(move || {
        loop {
            let at = rest.find('@')?;
            let before = rest[..at].chars().next_back().or(prev);
            let after = &rest[at + 1..];
            let end = after
                .char_indices()
                .find(|&(_, c)| !is_handle_char(c))
                .map_or(after.len(), |(i, _)| i);
            let word = &after[..end];
            prev = word.chars().next_back().or(Some('@'));
            rest = &after[end..];
            if before.is_some_and(char::is_alphanumeric) {
                continue;
            }
            let handle = slug(word);
            if !handle.is_empty() {
                return Some(handle);
            }
        }
    })
}

fn is_handle_char(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        for (name, want) in [
            ("Archive Bot", "archive-bot"),
            ("archive-bot", "archive-bot"),
            ("ALICE", "alice"),
            ("--x--y--", "x-y"),
            ("a  b\tc", "a-b-c"),
            ("Ünïcode Nåme", "ünïcode-nåme"),
            ("  Dr. Who?! ", "dr-who"),
            ("José_2", "josé-2"),
            ("!!!", ""),
            ("", ""),
        ] {
            assert_eq!(slug(name), want, "{name:?}");
        }
    }

    #[test]
    fn finds_mentions() {
        for (text, want) in [
            ("hi @alice", vec!["alice"]),
            ("@alice @bob", vec!["alice", "bob"]),
            ("(@archive-bot)", vec!["archive-bot"]),
            ("@archive-bot.", vec!["archive-bot"]),
            ("@archive-bot-", vec!["archive-bot"]),
            ("@ARCHIVE_BOT?", vec!["archive-bot"]),
            ("mail me at bob@example.com", vec![]),
            ("@@alice", vec!["alice"]),
            ("a@b @c", vec!["c"]),
            ("@", vec![]),
            ("@ alice", vec![]),
            ("@-", vec![]),
            ("é@alice", vec![]),
            ("@alice@bob", vec!["alice"]),
            (
                "@Archive_Bot, ask @coder. mail bob@example.com",
                vec!["archive-bot", "coder"],
            ),
        ] {
            let got: Vec<String> = mentioned_handles(text).collect();
            assert_eq!(got, want, "{text:?}");
        }
    }
}
