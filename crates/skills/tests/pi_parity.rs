//! Where loading matches pi-coding-agent 0.73.1 and where it deliberately
//! does not: names (missing, breaking the format rules, unsafe), ignore files
//! while searching, and bare Markdown files at the top of a root.
//!
//! Each case is a small tree built in a temporary `skills/` folder. The
//! expected warnings are pi's own messages, checked against pi's loader on the
//! same trees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use roundtable_skills::{DiagnosticKind, LoadedSkills, load_skills, load_skills_from_dir};

/// A `skills/` folder in a fresh temporary directory.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        std::fs::create_dir(&root).unwrap();
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Self { _dir: dir, root }
    }

    fn load(&self) -> LoadedSkills {
        load_skills_from_dir(&self.root)
    }
}

fn skill_md(name: Option<&str>, description: &str) -> String {
    match name {
        Some(name) => format!("---\nname: {name}\ndescription: {description}\n---\n# Body\n"),
        None => format!("---\ndescription: {description}\n---\n# Body\n"),
    }
}

/// `(kind, message)` of every diagnostic about `file` (relative to the root).
fn findings(loaded: &LoadedSkills, root: &Path, file: &str) -> Vec<(DiagnosticKind, String)> {
    let path = root.join(file);
    loaded
        .diagnostics
        .iter()
        .filter(|d| d.path == path)
        .map(|d| (d.kind, d.message.clone()))
        .collect()
}

fn names(loaded: &LoadedSkills) -> Vec<&str> {
    loaded.skills.iter().map(|s| s.name.as_str()).collect()
}

const W: DiagnosticKind = DiagnosticKind::Warning;
const D: DiagnosticKind = DiagnosticKind::Dropped;

/// pi falls back to the directory's name, silently; the spec makes `name`
/// required, so the skill is dropped and the diagnostic names what pi would
/// have used.
#[test]
fn a_missing_name_drops_the_skill_and_says_what_pi_would_use() {
    let cases: [(&str, &str, &str); 5] = [
        // (file, text, the name pi would use)
        ("no-name/SKILL.md", "---\ndescription: d\n---\n", "no-name"),
        (
            "null-name/SKILL.md",
            "---\nname:\ndescription: d\n---\n",
            "null-name",
        ),
        (
            "empty-name/SKILL.md",
            "---\nname: ''\ndescription: d\n---\n",
            "empty-name",
        ),
        (
            "blank-name/SKILL.md",
            "---\nname: '  '\ndescription: d\n---\n",
            "blank-name",
        ),
        // A directory name pi would load with an "invalid characters" warning.
        ("Bad_Dir/SKILL.md", "---\ndescription: d\n---\n", "Bad_Dir"),
    ];
    for (file, text, pi_name) in cases {
        let tree = Tree::new(&[(file, text)]);
        let loaded = tree.load();
        assert!(loaded.skills.is_empty(), "{file}: {loaded:?}");
        assert_eq!(
            findings(&loaded, &tree.root, file),
            [(
                D,
                format!(
                    "name is required (pi-coding-agent would use the directory name \"{pi_name}\")"
                )
            )],
            "{file}"
        );
    }
}

/// pi loads a name that breaks the format rules and warns once per rule
/// (directory mismatch first); so does this crate, with pi's wording.
#[test]
fn a_name_breaking_the_format_rules_loads_with_pi_warnings() {
    let long = "a".repeat(65);
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "Bad_Name",
            "Bad_Name".to_owned(),
            vec![
                "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
                    .to_owned(),
            ],
        ),
        (
            "lead",
            "-lead".to_owned(),
            vec![
                "name \"-lead\" does not match parent directory \"lead\"".to_owned(),
                "name must not start or end with a hyphen".to_owned(),
            ],
        ),
        (
            "dou--ble",
            "dou--ble".to_owned(),
            vec!["name must not contain consecutive hyphens".to_owned()],
        ),
        (
            "long",
            long.clone(),
            vec![
                format!("name \"{long}\" does not match parent directory \"long\""),
                "name exceeds 64 characters (65)".to_owned(),
            ],
        ),
        (
            "dotted",
            "v1.2".to_owned(),
            vec![
                "name \"v1.2\" does not match parent directory \"dotted\"".to_owned(),
                "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
                    .to_owned(),
            ],
        ),
        (
            "other-dir",
            "valid-name".to_owned(),
            vec!["name \"valid-name\" does not match parent directory \"other-dir\"".to_owned()],
        ),
    ];
    for (dir, name, expected) in cases {
        let file = format!("{dir}/SKILL.md");
        let tree = Tree::new(&[(&file, &skill_md(Some(&format!("'{name}'")), "d"))]);
        let loaded = tree.load();
        assert_eq!(names(&loaded), [name.as_str()], "{dir}");
        let found = findings(&loaded, &tree.root, &file);
        assert!(found.iter().all(|(kind, _)| *kind == W), "{dir}: {found:?}");
        let messages: Vec<String> = found.into_iter().map(|(_, m)| m).collect();
        assert_eq!(messages, expected, "{dir}");
        // Loaded, listed, and offered like any other skill.
        assert_eq!(loaded.listed().count(), 1);
    }
}

/// pi would load these too (with warnings); they are refused because the name
/// would reach outside its directory, break the catalogue, or pass for
/// another name.
#[test]
fn an_unsafe_name_is_refused_with_the_reason() {
    let cases: [(&str, &str); 8] = [
        ("'../../etc'", "outside its own directory"),
        ("'a/b'", "outside its own directory"),
        ("'a\\b'", "outside its own directory"),
        ("'..'", "outside its own directory"),
        ("\"a\\nb\"", "break the catalogue"),
        ("\"x\\u202Eweiver\"", "break the catalogue"),
        ("\"pr\\u200Breview\"", "break the catalogue"),
        ("' pr-review'", "leading or trailing whitespace"),
    ];
    for (yaml_name, reason) in cases {
        let tree = Tree::new(&[("s/SKILL.md", &skill_md(Some(yaml_name), "d"))]);
        let loaded = tree.load();
        assert!(loaded.skills.is_empty(), "{yaml_name}: {loaded:?}");
        let found = findings(&loaded, &tree.root, "s/SKILL.md");
        assert_eq!(found.len(), 1, "{yaml_name}: {found:?}");
        assert_eq!(found[0].0, D);
        assert!(found[0].1.contains(reason), "{yaml_name}: {}", found[0].1);
    }
}

/// pi reads `.gitignore`, `.ignore` and `.fdignore` in the root and every
/// folder it enters, and skips what they exclude, silently.
#[test]
fn ignore_files_hide_skill_folders_like_pi() {
    let ok = |name: &str| skill_md(Some(name), "d");
    // (ignore file, its lines, the skills it hides)
    let cases: [(&str, &str, &[&str]); 8] = [
        // A folder excluded by the root .gitignore.
        (".gitignore", "ignored/\n", &["ignored"]),
        // .ignore and .fdignore count too; comments and blanks do not.
        (".ignore", "# comment\n\nignored\n", &["ignored"]),
        (".fdignore", "ignored\n", &["ignored"]),
        // A root pattern reaches any depth; a leading / does not anchor it in pi.
        (".gitignore", "/deep\n", &["deep", "x-deep"]),
        // Later lines win: a negation brings one folder back.
        (
            ".gitignore",
            "*\n!kept/\n!kept/**\n",
            &["deep", "ignored", "x-deep"],
        ),
        // A nested ignore file reaches only its own folder's entries...
        ("cat/.gitignore", "deep\n", &["deep"]),
        // ... unless its pattern says **/.
        ("cat/.gitignore", "**/deep\n", &["deep", "x-deep"]),
        // A skill folder's own .gitignore can hide its SKILL.md.
        ("ignored/.gitignore", "SKILL.md\n", &["ignored"]),
    ];
    for (ignore_file, lines, hidden) in cases {
        let tree = Tree::new(&[
            ("ignored/SKILL.md", &ok("ignored")),
            ("kept/SKILL.md", &ok("kept")),
            ("cat/deep/SKILL.md", &ok("deep")),
            ("cat/x/deep/SKILL.md", &ok("x-deep")),
            (ignore_file, lines),
        ]);
        let loaded = tree.load();
        let mut found = names(&loaded);
        found.sort_unstable();
        let expected: Vec<&str> = ["deep", "ignored", "kept", "x-deep"]
            .into_iter()
            .filter(|name| !hidden.contains(name))
            .collect();
        assert_eq!(found, expected, "{ignore_file}: {lines:?}");
        // Skipping is silent, as in pi (x-deep only warns about its folder name).
        assert!(
            loaded.diagnostics.iter().all(|d| d.kind == W),
            "{ignore_file}: {:?}",
            loaded.diagnostics
        );
    }
}

#[test]
fn ignore_files_outside_the_root_do_not_count() {
    let tree = Tree::new(&[("kept/SKILL.md", &skill_md(Some("kept"), "d"))]);
    // The folder holding the root ignores everything; pi never reads it.
    std::fs::write(tree.root.parent().unwrap().join(".gitignore"), "*\n").unwrap();
    assert_eq!(names(&tree.load()), ["kept"]);
}

#[test]
fn a_bad_ignore_line_is_a_warning_and_the_rest_apply() {
    let tree = Tree::new(&[
        ("ignored/SKILL.md", &skill_md(Some("ignored"), "d")),
        ("kept/SKILL.md", &skill_md(Some("kept"), "d")),
        (".gitignore", "a{b\nignored/\n"),
    ]);
    let loaded = tree.load();
    assert_eq!(names(&loaded), ["kept"]);
    let found = findings(&loaded, &tree.root, ".gitignore");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, W);
    assert!(found[0].1.contains("a{b"), "{}", found[0].1);
}

/// pi loads the Markdown files directly in a searched root as skills (not in
/// deeper folders, not when the root is itself a skill folder); their parent
/// directory is the root, so a name other than the root's gets pi's mismatch
/// warning.
#[test]
fn bare_markdown_files_at_the_top_of_a_root_load_like_pi() {
    let tree = Tree::new(&[
        ("foo.md", &skill_md(Some("foo"), "Top-level foo.")),
        ("nameless.md", &skill_md(None, "No name.")),
        ("README.md", "# About these skills\n"),
        ("notes.txt", "not markdown"),
        (".hidden.md", &skill_md(Some("hidden"), "d")),
        ("sub/sub.md", &skill_md(Some("sub-md"), "Not at the top.")),
        ("pr-review/SKILL.md", &skill_md(Some("pr-review"), "d")),
        (
            "pr-review/notes.md",
            &skill_md(Some("notes"), "Inside a skill."),
        ),
    ]);
    let loaded = tree.load();
    assert_eq!(names(&loaded), ["foo", "pr-review"]);
    let foo = loaded.get("foo").unwrap();
    assert_eq!(foo.file_path, tree.root.join("foo.md"));
    assert_eq!(foo.base_dir, tree.root);
    assert_eq!(foo.description, "Top-level foo.");

    let cases: [(&str, &[(DiagnosticKind, &str)]); 5] = [
        (
            "foo.md",
            &[(W, "name \"foo\" does not match parent directory \"skills\"")],
        ),
        (
            "nameless.md",
            &[(
                D,
                "name is required (pi-coding-agent would use the directory name \"skills\")",
            )],
        ),
        (
            "README.md",
            &[(D, "no frontmatter: name and description are required")],
        ),
        ("notes.txt", &[]),
        ("sub/sub.md", &[]),
    ];
    for (file, expected) in cases {
        let expected: Vec<(DiagnosticKind, String)> = expected
            .iter()
            .map(|(k, m)| (*k, (*m).to_owned()))
            .collect();
        assert_eq!(findings(&loaded, &tree.root, file), expected, "{file}");
    }
    assert_eq!(loaded.diagnostics.len(), 3, "{:?}", loaded.diagnostics);
}

#[test]
fn bare_markdown_files_follow_ignore_files_and_collisions() {
    let tree = Tree::new(&[
        ("a.md", &skill_md(Some("pr-review"), "First.")),
        ("b.md", &skill_md(Some("draft"), "Ignored.")),
        (
            "pr-review/SKILL.md",
            &skill_md(Some("pr-review"), "Second."),
        ),
        (".gitignore", "b.md\n"),
    ]);
    let loaded = tree.load();
    // Name order: a.md comes first and keeps the name.
    assert_eq!(names(&loaded), ["pr-review"]);
    assert_eq!(loaded.skills[0].description, "First.");
    let loser = findings(&loaded, &tree.root, "pr-review/SKILL.md");
    assert_eq!(loser.len(), 1);
    assert_eq!(loser[0].0, D);
    assert!(loser[0].1.contains("collision"));
}

#[test]
fn a_root_that_is_a_skill_folder_loads_only_its_skill_md() {
    let tree = Tree::new(&[
        (
            "SKILL.md",
            &skill_md(Some("skills"), "The root is a skill."),
        ),
        (
            "extra.md",
            &skill_md(Some("extra"), "A reference, not a skill."),
        ),
    ]);
    let loaded = tree.load();
    assert_eq!(names(&loaded), ["skills"]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
}

/// Valid skills load exactly as before: every field, no diagnostics, the same
/// order, whatever ignore files and bare files sit beside them.
#[test]
fn valid_skills_are_unchanged() {
    let full = "---\nname: issue-triage\ndescription: |\n  Triage issues.\nversion: 2.0.0\n\
                tags: [github, triage]\nlicense: MIT\ncompatibility: needs gh\n\
                allowed-tools: Bash Read\nmetadata:\n  owner: ops\nauthor: me\n\
                disable-model-invocation: false\n---\n# Issue triage\n";
    let plain = Tree::new(&[
        ("issue-triage/SKILL.md", full),
        (
            "pr-review/SKILL.md",
            &skill_md(Some("pr-review"), "Review PRs."),
        ),
        ("pr-review/scripts/run.md", "# not a skill\n"),
        (
            "cat/architect/SKILL.md",
            &skill_md(Some("architect"), "Plan."),
        ),
    ]);
    let with_extras = Tree::new(&[
        ("issue-triage/SKILL.md", full),
        (
            "pr-review/SKILL.md",
            &skill_md(Some("pr-review"), "Review PRs."),
        ),
        ("pr-review/scripts/run.md", "# not a skill\n"),
        (
            "cat/architect/SKILL.md",
            &skill_md(Some("architect"), "Plan."),
        ),
        (".gitignore", "*.log\nbuild/\n"),
        ("cat/.ignore", "drafts\n"),
        ("cat/drafts/SKILL.md", &skill_md(Some("drafts"), "Hidden.")),
        ("build/SKILL.md", &skill_md(Some("build"), "Hidden.")),
    ]);
    for tree in [&plain, &with_extras] {
        let loaded = tree.load();
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        assert_eq!(names(&loaded), ["architect", "issue-triage", "pr-review"]);
        let triage = loaded.get("issue-triage").unwrap();
        assert_eq!(triage.description, "Triage issues.\n");
        assert_eq!(triage.version.as_deref(), Some("2.0.0"));
        assert_eq!(triage.tags, ["github", "triage"]);
        assert_eq!(triage.allowed_tools, ["Bash", "Read"]);
        assert_eq!(triage.metadata["owner"], "ops");
        assert_eq!(triage.extra["author"], "me");
        assert!(triage.is_listed());
        assert_eq!(triage.base_dir, tree.root.join("issue-triage"));
        assert_eq!(
            triage.file_path,
            tree.root.join("issue-triage").join("SKILL.md")
        );
    }
    // Several roots: the same rules per root, first root wins a name.
    let both = load_skills([&plain.root, &with_extras.root]);
    assert_eq!(names(&both), ["architect", "issue-triage", "pr-review"]);
    assert_eq!(both.diagnostics.len(), 3);
    assert!(both.diagnostics.iter().all(|d| d.collision.is_some()));
}
