//! Bounding what a tool returns so one call cannot flood the context.

use std::sync::Arc;

use roundtable_providers::{TextContent, UserBlock};

use crate::ToolResult;

/// The most text a tool result may carry; beyond it the text is cut and the
/// cut is marked in the output so the model knows it saw only a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Maximum bytes of text across all text parts.
    pub max_bytes: usize,
    /// Maximum lines of text across all text parts.
    pub max_lines: usize,
}

impl Default for OutputLimit {
    /// 50 KiB or 2000 lines, whichever comes first.
    fn default() -> Self {
        Self {
            max_bytes: 50 * 1024,
            max_lines: 2000,
        }
    }
}

impl OutputLimit {
    /// No limit at all.
    pub fn unlimited() -> Self {
        Self {
            max_bytes: usize::MAX,
            max_lines: usize::MAX,
        }
    }

    /// Cuts the text parts of `result` to the limit, keeping the beginning.
    /// Parts after the budget is spent are replaced by the marker; images are
    /// kept. Returns true when anything was cut.
    pub fn apply(&self, result: &mut ToolResult) -> bool {
        let total_bytes: usize = text_parts(result).map(str::len).sum();
        // A text has no more lines than bytes: a result short in bytes
        // needs no line count.
        if total_bytes <= self.max_bytes && total_bytes <= self.max_lines {
            return false;
        }
        let total_lines: usize = text_parts(result).map(|t| t.lines().count()).sum();
        if total_bytes <= self.max_bytes && total_lines <= self.max_lines {
            return false;
        }
        let mut bytes_left = self.max_bytes;
        let mut lines_left = self.max_lines;
        let mut shown = 0usize;
        let mut parts = Vec::with_capacity(result.parts.len() + 1);
        for part in result.parts.drain(..) {
            match part {
                UserBlock::Text(t) => {
                    if bytes_left == 0 || lines_left == 0 {
                        continue;
                    }
                    let cut = cut_text(&t.text, bytes_left, lines_left);
                    bytes_left -= cut.len();
                    lines_left = lines_left.saturating_sub(cut.lines().count().max(1));
                    shown += cut.len();
                    if !cut.is_empty() {
                        parts.push(UserBlock::Text(TextContent::new(Arc::<str>::from(cut))));
                    }
                }
                image => parts.push(image),
            }
        }
        parts.push(UserBlock::text(format!(
            "[output truncated: showing {shown} of {total_bytes} bytes ({total_lines} lines); \
             narrow the request to see the rest]"
        )));
        result.parts = parts;
        true
    }
}

fn text_parts(result: &ToolResult) -> impl Iterator<Item = &str> {
    result.parts.iter().filter_map(|p| match p {
        UserBlock::Text(t) => Some(&*t.text),
        UserBlock::Image(_) => None,
    })
}

/// The longest prefix of `text` within `max_bytes` and `max_lines`, cut at a
/// line end when possible and always at a char boundary.
pub(crate) fn cut_text(text: &str, max_bytes: usize, max_lines: usize) -> &str {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut prefix = &text[..end];
    if let Some((i, _)) = prefix.match_indices('\n').nth(max_lines.saturating_sub(1)) {
        prefix = &prefix[..=i];
    } else if end < text.len()
        && let Some(i) = prefix.rfind('\n')
    {
        prefix = &prefix[..=i];
    }
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_untouched() {
        let mut r = ToolResult::text("a\nb\n");
        assert!(!OutputLimit::default().apply(&mut r));
        assert_eq!(r.text_content(), "a\nb\n");
    }

    #[test]
    fn cuts_by_bytes_at_a_line_end_and_marks_it() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let mut r = ToolResult::text(text);
        let limit = OutputLimit {
            max_bytes: 30,
            max_lines: 1000,
        };
        assert!(limit.apply(&mut r));
        let out = r.text_content();
        assert!(
            out.starts_with("line 0\nline 1\nline 2\nline 3\n\n[output truncated"),
            "{out}"
        );
        assert!(out.contains("of 790 bytes (100 lines)"), "{out}");
    }

    #[test]
    fn cuts_by_lines_across_parts_and_keeps_images() {
        let mut r = ToolResult::parts(vec![
            UserBlock::text("a\nb\nc\n"),
            UserBlock::Image(roundtable_providers::ImageContent {
                data: "AAAA".into(),
                mime_type: "image/png".into(),
            }),
            UserBlock::text("d\ne\n"),
        ]);
        let limit = OutputLimit {
            max_bytes: 1000,
            max_lines: 2,
        };
        assert!(limit.apply(&mut r));
        assert_eq!(r.parts.len(), 3);
        assert_eq!(r.parts[0], UserBlock::text("a\nb\n"));
        assert!(matches!(r.parts[1], UserBlock::Image(_)));
    }

    #[test]
    fn never_splits_a_char() {
        assert_eq!(cut_text("ééé", 3, 10), "é");
    }
}
