//! Arbitrary input never panics: frontmatter parsing and name references.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use proptest::prelude::*;
use roundtable_skills::library::is_valid_skill_ref;
use roundtable_skills::validate::{validate_name, validate_name_safety};
use roundtable_skills::{Skill, SkillLibrary, SkillsError};

proptest! {
    #[test]
    fn from_markdown_never_panics(body in "\\PC{0,200}", yaml in "[a-z:\\- \\[\\]{}'\"|>\n\t#&*!%@`,.0-9]{0,120}") {
        let text = format!("---\n{yaml}\n---\n{body}");
        let (skill, diagnostics) = Skill::from_markdown(Path::new("/s/x/SKILL.md"), &text);
        // Dropped skills always say why.
        if skill.is_none() {
            prop_assert!(diagnostics.iter().any(|d| d.is_dropped()));
        }
        let (skill, diagnostics) = Skill::from_markdown(Path::new("/s/x/SKILL.md"), &body);
        prop_assert!(skill.is_none());
        prop_assert!(!diagnostics.is_empty());
    }

    #[test]
    fn loaded_names_are_safe_and_rule_breaks_are_warned(name in "\\PC{0,80}") {
        let text = format!("---\nname: \"{}\"\ndescription: d\n---\n", name.replace('\\', "\\\\").replace('"', "\\\""));
        let (skill, diagnostics) = Skill::from_markdown(Path::new("/s/x/SKILL.md"), &text);
        if let Some(skill) = skill {
            prop_assert!(validate_name_safety(&skill.name).is_empty());
            prop_assert!(!skill.name.is_empty() && !skill.name.contains(['/', '\\']));
            // Every broken rule is reported, and nothing else is.
            let rules = validate_name(&skill.name);
            let mismatch = usize::from(skill.name != "x");
            prop_assert_eq!(diagnostics.len(), rules.len() + mismatch, "{:?}", diagnostics);
            prop_assert!(diagnostics.iter().all(|d| !d.is_dropped()));
            // A valid name is a valid reference too.
            if rules.is_empty() {
                prop_assert!(is_valid_skill_ref(&skill.name));
            }
        } else {
            prop_assert!(diagnostics.iter().any(|d| d.is_dropped()));
        }
    }

    #[test]
    fn references_never_leave_the_bases(name in "\\PC{0,40}") {
        let bases = tempfile::tempdir().unwrap();
        let library = SkillLibrary::with_bases([bases.path()]);
        match library.resolve_skill_path(&name) {
            Ok(dir) => prop_assert!(dir.starts_with(bases.path())),
            Err(SkillsError::InvalidName { .. }) => prop_assert!(!is_valid_skill_ref(&name)),
            Err(SkillsError::NotFound { searched, .. }) => {
                prop_assert!(is_valid_skill_ref(&name));
                prop_assert!(searched.iter().all(|d| d.parent() == Some(bases.path())));
            }
            Err(other) => prop_assert!(false, "unexpected {other:?}"),
        }
    }
}
