//! Resolving skills by name, path safety, raw reads and workspace staging.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

use roundtable_skills::library::is_valid_skill_ref;
use roundtable_skills::stage::{STAGING_DIR, stage_dirs};
use roundtable_skills::{DiagnosticKind, SkillLibrary, SkillsError, StageMode};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/repo")
}

fn library() -> SkillLibrary {
    SkillLibrary::new(fixture())
}

fn staged_names(cwd: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(cwd.join(STAGING_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn resolves_in_base_order() {
    let lib = library();
    let dirs = lib
        .resolve_skill_paths(["pr-review", "legacy-only", "hidden-helper"])
        .unwrap();
    assert_eq!(
        dirs,
        [
            fixture().join("skills/pr-review"),
            fixture().join(".claude/skills/legacy-only"),
            fixture().join("skills/hidden-helper"),
        ]
    );
    assert!(dirs.iter().all(|d| d.is_absolute()));
}

#[test]
fn not_found_names_the_expected_file_and_the_tried_dirs() {
    let err = library()
        .resolve_skill_paths(["pr-review", "nope"])
        .unwrap_err();
    let SkillsError::NotFound { name, searched } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(name, "nope");
    assert_eq!(searched.len(), 2);
    assert_eq!(err.to_string(), "skill not found: skills/nope/SKILL.md");
}

#[test]
fn names_are_flat() {
    // A category folder holds a valid skill, but only its flat name could
    // address it, and that is not a directory of any base.
    let lib = library();
    assert!(matches!(
        lib.resolve_skill_path("software-development/architect"),
        Err(SkillsError::InvalidName { .. })
    ));
    assert!(matches!(
        lib.resolve_skill_path("architect"),
        Err(SkillsError::NotFound { .. })
    ));
    // A directory without SKILL.md is not a skill.
    assert!(matches!(
        lib.resolve_skill_path("software-development"),
        Err(SkillsError::NotFound { .. })
    ));
}

#[test]
fn traversal_and_odd_names_are_rejected_before_any_lookup() {
    let lib = library();
    for name in [
        "",
        ".",
        "..",
        "../skills/pr-review",
        "..\\pr-review",
        "pr-review/",
        "/etc/passwd",
        "pr-review/../issue-triage",
        "%2e%2e",
        "pr review",
        "pr-review\0",
        "skills/pr-review",
        "prévue",
    ] {
        assert!(!is_valid_skill_ref(name), "{name:?}");
        assert!(
            matches!(
                lib.resolve_skill_path(name),
                Err(SkillsError::InvalidName { .. })
            ),
            "{name:?}"
        );
        assert!(matches!(
            lib.load_skill_raw(name),
            Err(SkillsError::InvalidName { .. })
        ));
    }
    // Loose but flat names are fine as references.
    for name in ["PR_Review", "a", "x-1_2"] {
        assert!(is_valid_skill_ref(name), "{name:?}");
    }
}

#[test]
fn load_skill_raw_returns_the_whole_file() {
    let text = library().load_skill_raw("hidden-helper").unwrap();
    assert!(text.starts_with("---\nname: hidden-helper\n"));
    assert!(text.contains("# Hidden helper"));
}

#[test]
fn load_named_reports_unknown_and_invalid_names() {
    let loaded = library().load_named(["chat", "pr-review", "../x", "issue-triage", "pr-review"]);
    let names: Vec<&str> = loaded.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pr-review", "issue-triage"]);
    assert_eq!(loaded.diagnostics.len(), 2, "{:?}", loaded.diagnostics);
    assert!(
        loaded
            .diagnostics
            .iter()
            .all(|d| d.kind == DiagnosticKind::Dropped)
    );
    assert!(loaded.diagnostics[0].message.contains("skill not found"));
    assert!(loaded.diagnostics[1].message.contains("invalid skill name"));
}

#[cfg(unix)]
#[test]
fn symlink_staging_links_whole_directories_and_restaging_clears() {
    let cwd = tempfile::tempdir().unwrap();
    let lib = library();
    let staged = lib
        .stage(
            cwd.path(),
            ["pr-review", "issue-triage"],
            StageMode::Symlink,
        )
        .unwrap();
    assert_eq!(staged.len(), 2);
    assert_eq!(staged_names(cwd.path()), ["issue-triage", "pr-review"]);
    let link = cwd.path().join(".agents/skills/pr-review");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_link(&link).unwrap(),
        fixture().join("skills/pr-review")
    );
    // Helper files travel along.
    assert!(link.join("scripts/count-lines.sh").is_file());
    assert!(link.join("references/checklist.md").is_file());
    assert!(link.join("assets/comment-template.md").is_file());

    // The next phase declares one other skill: only it remains.
    lib.stage(cwd.path(), ["legacy-only"], StageMode::Symlink)
        .unwrap();
    assert_eq!(staged_names(cwd.path()), ["legacy-only"]);
    // Clearing removed links, never the skills they pointed at.
    assert!(fixture().join("skills/pr-review/SKILL.md").is_file());
    assert!(
        fixture()
            .join("skills/pr-review/scripts/count-lines.sh")
            .is_file()
    );

    // A phase without skills sees no staging directory at all.
    lib.stage(cwd.path(), Vec::<String>::new(), StageMode::Symlink)
        .unwrap();
    assert!(!cwd.path().join(".agents/skills").exists());
}

#[test]
fn copy_staging_copies_everything_and_restaging_clears() {
    let cwd = tempfile::tempdir().unwrap();
    let lib = library();
    lib.stage(cwd.path(), ["pr-review", "issue-triage"], StageMode::Copy)
        .unwrap();
    let copy = cwd.path().join(".agents/skills/pr-review");
    assert!(fs::symlink_metadata(&copy).unwrap().is_dir());
    for file in [
        "SKILL.md",
        "scripts/count-lines.sh",
        "references/checklist.md",
        "assets/comment-template.md",
    ] {
        assert_eq!(
            fs::read(copy.join(file)).unwrap(),
            fs::read(fixture().join("skills/pr-review").join(file)).unwrap(),
            "{file}"
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(copy.join("scripts/count-lines.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert!(mode & 0o111 != 0, "script lost its executable bit");
    }

    // Editing the copy leaves the source alone; re-staging drops the copy.
    fs::write(copy.join("SKILL.md"), "scribbled").unwrap();
    lib.stage(cwd.path(), ["issue-triage"], StageMode::Copy)
        .unwrap();
    assert_eq!(staged_names(cwd.path()), ["issue-triage"]);
    assert!(
        library()
            .load_skill_raw("pr-review")
            .unwrap()
            .starts_with("---\nname: pr-review")
    );
}

#[cfg(unix)]
#[test]
fn copy_mode_dereferences_links_and_stops_at_loops() {
    let src = tempfile::tempdir().unwrap();
    let outside = src.path().join("outside.md");
    fs::write(&outside, "shared reference").unwrap();
    let skill = src.path().join("linked");
    fs::create_dir_all(skill.join("references")).unwrap();
    fs::write(
        skill.join("SKILL.md"),
        "---\nname: linked\ndescription: d\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, skill.join("references/shared.md")).unwrap();
    std::os::unix::fs::symlink(
        fixture().join("skills/pr-review/scripts"),
        skill.join("scripts"),
    )
    .unwrap();

    let cwd = tempfile::tempdir().unwrap();
    stage_dirs(cwd.path(), std::slice::from_ref(&skill), StageMode::Copy).unwrap();
    let staged = cwd.path().join(".agents/skills/linked");
    let shared = staged.join("references/shared.md");
    assert!(
        !fs::symlink_metadata(&shared)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&shared).unwrap(), "shared reference");
    assert!(
        fs::symlink_metadata(staged.join("scripts"))
            .unwrap()
            .is_dir()
    );
    assert!(staged.join("scripts/count-lines.sh").is_file());

    // A link back to the skill's own directory is a loop, not endless copying.
    std::os::unix::fs::symlink(&skill, skill.join("references/again")).unwrap();
    let err = stage_dirs(cwd.path(), &[skill], StageMode::Copy).unwrap_err();
    assert!(matches!(err, SkillsError::SymlinkLoop { .. }), "{err:?}");
}

#[test]
fn a_bad_name_leaves_the_workspace_untouched() {
    let cwd = tempfile::tempdir().unwrap();
    let lib = library();
    lib.stage(cwd.path(), ["pr-review"], StageMode::Copy)
        .unwrap();
    let err = lib
        .stage(cwd.path(), ["issue-triage", "../../etc"], StageMode::Copy)
        .unwrap_err();
    assert!(matches!(err, SkillsError::InvalidName { .. }));
    let err = lib
        .stage(cwd.path(), ["issue-triage", "missing"], StageMode::Copy)
        .unwrap_err();
    assert!(matches!(err, SkillsError::NotFound { .. }));
    assert_eq!(staged_names(cwd.path()), ["pr-review"]);
}

#[cfg(unix)]
#[test]
fn a_staging_dir_that_is_a_link_is_unlinked_not_emptied() {
    let elsewhere = tempfile::tempdir().unwrap();
    fs::write(elsewhere.path().join("keep.txt"), "keep").unwrap();
    let cwd = tempfile::tempdir().unwrap();
    fs::create_dir(cwd.path().join(".agents")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), cwd.path().join(".agents/skills")).unwrap();
    library()
        .stage(cwd.path(), ["pr-review"], StageMode::Symlink)
        .unwrap();
    assert!(elsewhere.path().join("keep.txt").is_file());
    assert_eq!(staged_names(cwd.path()), ["pr-review"]);
}

#[test]
fn duplicate_names_stage_once() {
    let cwd = tempfile::tempdir().unwrap();
    let staged = library()
        .stage(cwd.path(), ["pr-review", "pr-review"], StageMode::Copy)
        .unwrap();
    assert_eq!(staged.len(), 1);
}

#[cfg(unix)]
#[test]
fn relative_sources_stage_as_resolvable_links() {
    // Integration tests run in the package directory.
    let relative = PathBuf::from("tests/fixtures/repo/skills/pr-review");
    assert!(relative.is_relative() && relative.join("SKILL.md").is_file());
    let cwd = tempfile::tempdir().unwrap();
    stage_dirs(cwd.path(), &[relative], StageMode::Symlink).unwrap();
    let link = cwd.path().join(".agents/skills/pr-review");
    assert!(fs::read_link(&link).unwrap().is_absolute());
    assert!(link.join("SKILL.md").is_file());
}

#[cfg(unix)]
#[test]
fn staging_never_follows_an_agents_link_out_of_the_workspace() {
    // A workspace (a cloned repository, or what an earlier phase's agent
    // left) whose `.agents` is a link to a folder elsewhere: staging clears
    // `.agents/skills`, so following it would delete and write out there.
    let elsewhere = tempfile::tempdir().unwrap();
    fs::create_dir(elsewhere.path().join("skills")).unwrap();
    fs::write(elsewhere.path().join("skills/keep.txt"), "keep").unwrap();
    for mode in [StageMode::Symlink, StageMode::Copy] {
        let cwd = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), cwd.path().join(".agents")).unwrap();
        let err = library()
            .stage(cwd.path(), ["pr-review"], mode)
            .unwrap_err();
        assert!(
            matches!(&err, SkillsError::UnsafeStagingPath { path } if path.ends_with(".agents")),
            "{err:?}"
        );
        let err = roundtable_skills::stage::clear_staging(cwd.path()).unwrap_err();
        assert!(
            matches!(err, SkillsError::UnsafeStagingPath { .. }),
            "{err:?}"
        );
        assert_eq!(
            fs::read_to_string(elsewhere.path().join("skills/keep.txt")).unwrap(),
            "keep"
        );
        let names: Vec<_> = fs::read_dir(elsewhere.path().join("skills"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["keep.txt"]);
    }
    // A file named `.agents` is refused too, and left alone.
    let cwd = tempfile::tempdir().unwrap();
    fs::write(cwd.path().join(".agents"), "mine").unwrap();
    let err = library()
        .stage(cwd.path(), ["pr-review"], StageMode::Copy)
        .unwrap_err();
    assert!(
        matches!(err, SkillsError::UnsafeStagingPath { .. }),
        "{err:?}"
    );
    assert_eq!(
        fs::read_to_string(cwd.path().join(".agents")).unwrap(),
        "mine"
    );
}
