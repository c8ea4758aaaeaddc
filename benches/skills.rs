//! Skills: parsing one SKILL.md, loading a 100-skill tree, rendering the
//! catalogue, and staging five skills (symlink and copy).
//!
//! `cargo bench --bench skills`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roundtable::skills::{
    Skill, SkillLibrary, StageMode, available_skills_xml, load_skills_from_dir,
};

const SKILLS: usize = 100;

fn skill_md(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: |\n  Triage GitHub issues: label, deduplicate, request info on\n  \
         incomplete reports, manage stale items. Use when a new issue arrives.\n\
         version: 2.0.0\ntags: [github, issues, triage]\nlicense: MIT\n\
         metadata:\n  owner: maintainers\n  reviewed: 2026-01-01\n---\n\n\
         # Issue Triage\n\n## When to Use\nA new issue arrives.\n\n## Procedure\n{}",
        "1. Read the issue and its comments.\n".repeat(40)
    )
}

/// `<root>/skills/skill-NNN/` with a SKILL.md, a script and a reference each.
fn tree(root: &Path) {
    for i in 0..SKILLS {
        let dir = root.join("skills").join(format!("skill-{i:03}"));
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::create_dir_all(dir.join("references")).unwrap();
        std::fs::write(dir.join("SKILL.md"), skill_md(&format!("skill-{i:03}"))).unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "#!/bin/sh\necho ok\n").unwrap();
        std::fs::write(dir.join("references/guide.md"), "# Guide\n".repeat(50)).unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let text = skill_md("issue-triage");
    let path = Path::new("/repo/skills/issue-triage/SKILL.md");
    let mut group = c.benchmark_group("skills");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("parse_skill_md", |b| {
        b.iter(|| Skill::from_markdown(path, &text))
    });

    let root = tempfile::tempdir().unwrap();
    tree(root.path());
    group.throughput(Throughput::Elements(SKILLS as u64));
    group.bench_function("load_100_skills", |b| {
        b.iter(|| load_skills_from_dir(root.path().join("skills")))
    });
    let loaded = load_skills_from_dir(root.path().join("skills"));
    assert_eq!(loaded.skills.len(), SKILLS);
    group.bench_function("catalogue_xml_100_skills", |b| {
        b.iter(|| available_skills_xml(&loaded.skills))
    });

    let library = SkillLibrary::new(root.path());
    let names: Vec<String> = (0..5).map(|i| format!("skill-{i:03}")).collect();
    let cwd = tempfile::tempdir().unwrap();
    group.throughput(Throughput::Elements(names.len() as u64));
    for (label, mode) in [
        ("stage_5_symlink", StageMode::Symlink),
        ("stage_5_copy", StageMode::Copy),
    ] {
        group.bench_function(label, |b| {
            b.iter(|| library.stage(cwd.path(), &names, mode).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
