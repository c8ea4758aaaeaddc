//! Loading the fixture skill tree: valid, invalid, colliding and hidden skills.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use roundtable_skills::load::load_skill_file;
use roundtable_skills::{
    DiagnosticKind, SkillDiagnostic, SkillReader, available_skills_xml, load_skills,
    load_skills_from_dir, skills_prompt_section,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/repo")
}

fn diagnostics_for<'a>(diags: &'a [SkillDiagnostic], dir: &str) -> Vec<&'a SkillDiagnostic> {
    diags
        .iter()
        .filter(|d| {
            d.path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == dir)
        })
        .collect()
}

#[test]
fn loads_valid_skills_and_reports_every_bad_one() {
    let loaded = load_skills_from_dir(fixture().join("skills"));
    let names: Vec<&str> = loaded.skills.iter().map(|s| s.name.as_str()).collect();
    // Name order of directories; nested category folders are searched too.
    // A name that breaks the format rules still loads, with warnings (as pi).
    assert_eq!(
        names,
        [
            "Bad_Name",
            "hidden-helper",
            "issue-triage",
            "pr-review",
            "architect"
        ]
    );

    let dropped = |dir: &str| {
        let diags = diagnostics_for(&loaded.diagnostics, dir);
        assert!(!diags.is_empty(), "no diagnostic for {dir}");
        assert!(diags.iter().any(|d| d.is_dropped()), "{dir}: {diags:?}");
        diags
    };
    assert_eq!(
        dropped("no-name")[0].message,
        "name is required (pi-coding-agent would use the directory name \"no-name\")"
    );
    assert_eq!(
        dropped("no-description")[0].message,
        "description is required"
    );
    let bad_name = diagnostics_for(&loaded.diagnostics, "bad-name");
    assert!(
        bad_name.iter().all(|d| d.kind == DiagnosticKind::Warning),
        "{bad_name:?}"
    );
    assert!(
        bad_name
            .iter()
            .any(|d| d.message.contains("invalid characters"))
    );
    assert!(
        dropped("broken-yaml")[0]
            .message
            .starts_with("invalid frontmatter")
    );
    // Every diagnostic names an existing file.
    for d in &loaded.diagnostics {
        assert!(d.path.is_absolute() && d.path.exists(), "{d:?}");
    }
}

#[test]
fn collisions_keep_the_first_and_report_the_other() {
    let loaded = load_skills_from_dir(fixture().join("skills"));
    let collision = loaded
        .diagnostics
        .iter()
        .find(|d| d.collision.is_some())
        .expect("a collision diagnostic");
    assert_eq!(collision.kind, DiagnosticKind::Dropped);
    assert!(collision.path.ends_with("zz-duplicate/SKILL.md"));
    let info = collision.collision.as_ref().unwrap();
    assert_eq!(info.name, "issue-triage");
    assert!(info.kept.ends_with("skills/issue-triage/SKILL.md"));
    // The kept one is the first, with its own description.
    assert!(
        loaded
            .get("issue-triage")
            .unwrap()
            .description
            .starts_with("Triage")
    );
    // The loser's directory name differs from its name: a warning too.
    assert!(
        diagnostics_for(&loaded.diagnostics, "zz-duplicate")
            .iter()
            .any(|d| d.kind == DiagnosticKind::Warning && d.message.contains("does not match"))
    );
}

#[test]
fn roots_are_searched_in_order_across_bases() {
    let repo = fixture();
    let loaded = load_skills([repo.join("skills"), repo.join(".claude/skills")]);
    let pr = loaded.get("pr-review").unwrap();
    assert!(pr.file_path.starts_with(repo.join("skills")));
    assert!(loaded.get("legacy-only").is_some());
    let legacy = loaded
        .diagnostics
        .iter()
        .find(|d| d.path.starts_with(repo.join(".claude")) && d.collision.is_some())
        .unwrap();
    assert!(legacy.message.contains("pr-review"));
}

#[test]
fn informational_fields_pass_through() {
    let loaded = load_skills_from_dir(fixture().join("skills"));
    let triage = loaded.get("issue-triage").unwrap();
    assert_eq!(
        triage.description,
        "Triage GitHub issues — label, deduplicate, request info on incomplete\nreports, manage stale items.\n"
    );
    assert_eq!(triage.version.as_deref(), Some("2.0.0"));
    assert_eq!(triage.tags, ["github", "issues", "triage"]);
    assert_eq!(triage.license.as_deref(), Some("MIT"));
    assert_eq!(triage.compatibility.as_deref(), Some("Needs the gh CLI."));
    assert_eq!(triage.allowed_tools, ["Bash", "Read"]);
    assert_eq!(triage.metadata["owner"], "maintainers");
    assert_eq!(triage.base_dir, fixture().join("skills/issue-triage"));
}

#[test]
fn catalogue_lists_visible_skills_escaped_with_locations() {
    let loaded = load_skills_from_dir(fixture().join("skills"));
    let xml = available_skills_xml(&loaded.skills);
    assert!(xml.starts_with("<available_skills>\n  <skill>\n"));
    assert!(xml.ends_with("</skill>\n</available_skills>"));
    assert!(!xml.contains("hidden-helper"), "hidden skill listed");
    assert!(xml.contains(
        "<description>Structured pull-request review (critical / important / suggestion / nit). \
         Use when asked to review a PR &amp; report &lt;findings&gt;.</description>"
    ));
    let location = fixture().join("skills/pr-review/SKILL.md");
    assert!(xml.contains(&format!("<location>{}</location>", location.display())));
    assert_eq!(xml.matches("<skill>").count(), 4);
    // The hidden skill is still loaded, just not listed.
    assert!(loaded.get("hidden-helper").is_some());
    assert_eq!(loaded.listed().count(), 4);
    let section = skills_prompt_section(loaded.listed(), SkillReader::ReadSkillTool);
    assert!(section.ends_with(&xml));
}

#[test]
fn missing_root_is_a_warning_and_the_rest_still_loads() {
    let repo = fixture();
    let loaded = load_skills([repo.join("does-not-exist"), repo.join(".claude/skills")]);
    assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::Warning);
    assert_eq!(loaded.diagnostics[0].message, "skill path does not exist");
    assert_eq!(loaded.skills.len(), 2);
}

#[test]
fn a_markdown_file_can_be_a_root() {
    let loaded = load_skills([fixture().join("skills/pr-review/SKILL.md")]);
    assert_eq!(loaded.skills.len(), 1);
    assert!(loaded.diagnostics.is_empty());
}

#[test]
fn corrupt_and_unreadable_files_are_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let skill = dir.path().join(name);
        std::fs::create_dir(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), bytes).unwrap();
    };
    write("binary", &[0xff, 0xfe, 0x00, 0x9c, b'-', b'-', b'-']);
    write(
        "not-utf8",
        b"---\nname: not-utf8\ndescription: caf\xe9\n---\n",
    );
    write("tab-yaml", b"---\nname: tab-yaml\n\tdescription: x\n---\n");
    write("list-yaml", b"---\n- name\n- description\n---\n");
    write("ok", b"---\nname: ok\ndescription: Fine.\n---\n");
    write("empty", b"");
    write(
        "unclosed",
        b"---\nname: unclosed\ndescription: never closed\n",
    );

    let loaded = load_skills_from_dir(dir.path());
    assert_eq!(loaded.skills.len(), 1);
    assert_eq!(loaded.skills[0].name, "ok");
    for name in [
        "binary",
        "not-utf8",
        "tab-yaml",
        "list-yaml",
        "empty",
        "unclosed",
    ] {
        let diags = diagnostics_for(&loaded.diagnostics, name);
        assert!(diags.iter().any(|d| d.is_dropped()), "{name}: {diags:?}");
    }

    // A path that cannot be read as a file.
    let (skill, diags) = load_skill_file(dir.path());
    assert!(skill.is_none());
    assert!(diags[0].is_dropped() && diags[0].message.starts_with("cannot read"));
}

#[cfg(unix)]
#[test]
fn symlinked_skills_and_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("skills");
    std::fs::create_dir(&root).unwrap();
    // A link to a real skill, a second link to the same skill, a broken link
    // and a link cycle back to the root.
    let pr = fixture().join("skills/pr-review");
    std::os::unix::fs::symlink(&pr, root.join("a-link")).unwrap();
    std::os::unix::fs::symlink(&pr, root.join("b-link")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), root.join("broken")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("loop")).unwrap();

    let loaded = load_skills_from_dir(&root);
    assert_eq!(loaded.skills.len(), 1, "{loaded:?}");
    assert!(loaded.skills[0].file_path.starts_with(&root));
    assert!(
        loaded
            .diagnostics
            .iter()
            .all(|d| d.kind == DiagnosticKind::Warning)
    );
}

#[test]
fn diagnostics_serialise_as_flat_json() {
    let loaded = load_skills_from_dir(fixture().join("skills"));
    let no_name = diagnostics_for(&loaded.diagnostics, "no-name")[0];
    let json = serde_json::to_value(no_name).unwrap();
    assert_eq!(json["kind"], "dropped");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .starts_with("name is required")
    );
    assert!(json["path"].as_str().unwrap().ends_with("no-name/SKILL.md"));
    assert!(json.get("collision").is_none());
}
