//! The `<available_skills>` catalogue a system prompt carries.
//!
//! Progressive disclosure: only each skill's name, description and location
//! reach the model; it reads the full SKILL.md when a task matches. Skills
//! marked `disable-model-invocation` are left out.

use std::borrow::Borrow;

use crate::skill::Skill;

/// How the model is told to open a skill, which decides the catalogue's
/// preamble in [`skills_prompt_section`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillReader {
    /// The agent has a general `read` tool and opens the `<location>` path
    /// (the sandboxed coding-agent path).
    ReadTool,
    /// The agent has the [`ReadSkill`](crate::ReadSkill) tool and asks by
    /// name (the chat path).
    ReadSkillTool,
}

/// The bare `<available_skills>` XML block for the listed skills, values
/// XML-escaped; an empty string when no skill is listed.
///
/// ```
/// use std::path::Path;
/// use roundtable_skills::{available_skills_xml, Skill};
///
/// let text = "---\nname: a-b\ndescription: Use for <a> & \"b\".\n---\n";
/// let (skill, _) = Skill::from_markdown(Path::new("/s/a-b/SKILL.md"), text);
/// let xml = available_skills_xml([skill.unwrap()]);
/// assert_eq!(
///     xml,
///     "<available_skills>\n  <skill>\n    <name>a-b</name>\n    \
///      <description>Use for &lt;a&gt; &amp; &quot;b&quot;.</description>\n    \
///      <location>/s/a-b/SKILL.md</location>\n  </skill>\n</available_skills>"
/// );
/// ```
pub fn available_skills_xml<I>(skills: I) -> String
where
    I: IntoIterator,
    I::Item: Borrow<Skill>,
{
    let mut lines = Vec::new();
    for skill in skills {
        let skill = skill.borrow();
        if !skill.is_listed() {
            continue;
        }
        lines.push("  <skill>".to_owned());
        lines.push(format!("    <name>{}</name>", escape_xml(&skill.name)));
        lines.push(format!(
            "    <description>{}</description>",
            escape_xml(&skill.description)
        ));
        lines.push(format!(
            "    <location>{}</location>",
            escape_xml(&skill.file_path.to_string_lossy())
        ));
        lines.push("  </skill>".to_owned());
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "<available_skills>\n{}\n</available_skills>",
        lines.join("\n")
    )
}

/// The catalogue with the short preamble that tells the model how to use it,
/// ready to append to a system prompt (it starts with a blank line); an empty
/// string when no skill is listed.
pub fn skills_prompt_section<I>(skills: I, reader: SkillReader) -> String
where
    I: IntoIterator,
    I::Item: Borrow<Skill>,
{
    let xml = available_skills_xml(skills);
    if xml.is_empty() {
        return xml;
    }
    let how = match reader {
        SkillReader::ReadTool => {
            "Use the read tool to load a skill's file when the task matches its description.\n\
             When a skill file references a relative path, resolve it against the skill \
             directory (parent of SKILL.md / dirname of the path) and use that absolute path \
             in tool commands."
        }
        SkillReader::ReadSkillTool => {
            "Use the `read_skill` tool with the skill `name` to load a skill's full SKILL.md \
             when the task matches its description."
        }
    };
    format!(
        "\n\nThe following skills provide specialized instructions for specific tasks.\n{how}\n\n{xml}"
    )
}

/// Escapes the five XML special characters.
pub(crate) fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn skill(name: &str, hidden: bool) -> Skill {
        let text = format!(
            "---\nname: {name}\ndescription: About {name}.\ndisable-model-invocation: {hidden}\n---\n"
        );
        let path = format!("/s/{name}/SKILL.md");
        Skill::from_markdown(Path::new(&path), &text).0.unwrap()
    }

    #[test]
    fn hidden_skills_are_left_out() {
        let xml = available_skills_xml([skill("one", false), skill("two", true)]);
        assert!(xml.contains("<name>one</name>"));
        assert!(!xml.contains("two"));
    }

    #[test]
    fn nothing_listed_is_empty() {
        assert_eq!(available_skills_xml(Vec::<Skill>::new()), "");
        assert_eq!(available_skills_xml([skill("x", true)]), "");
        assert_eq!(
            skills_prompt_section([skill("x", true)], SkillReader::ReadTool),
            ""
        );
    }

    #[test]
    fn prompt_section_names_the_reader() {
        let skills = [skill("one", false)];
        let section = skills_prompt_section(&skills, SkillReader::ReadSkillTool);
        assert!(section.starts_with("\n\nThe following skills"));
        assert!(section.contains("read_skill"));
        assert!(section.ends_with("</available_skills>"));
        let section = skills_prompt_section(&skills, SkillReader::ReadTool);
        assert!(section.contains("read tool"));
    }

    #[test]
    fn escapes_all_five() {
        assert_eq!(escape_xml("<&>\"'"), "&lt;&amp;&gt;&quot;&apos;");
    }
}
