//! Loads skills from the given directories and prints the catalogue.
//!
//! ```text
//! cargo run --example skills -- skills .claude/skills
//! ```
//!
//! The `<available_skills>` XML goes to stdout, ready to paste into a system
//! prompt; each diagnostic (a dropped or suspicious SKILL.md) goes to stderr
//! as one JSON line. The exit status is 0 even when files were dropped:
//! a bad skill never fails a load. With no directory, `skills/` is used.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;

use roundtable::skills::{available_skills_xml, load_skills};

fn main() {
    let mut dirs: Vec<String> = std::env::args().skip(1).collect();
    if dirs.is_empty() {
        dirs.push("skills".to_owned());
    }
    let loaded = load_skills(&dirs);

    let stderr = std::io::stderr();
    let mut stderr = stderr.lock();
    for diagnostic in &loaded.diagnostics {
        let line = serde_json::to_string(diagnostic).expect("diagnostics serialise");
        writeln!(stderr, "{line}").expect("write to stderr");
    }

    let xml = available_skills_xml(&loaded.skills);
    if !xml.is_empty() {
        println!("{xml}");
    }
}
