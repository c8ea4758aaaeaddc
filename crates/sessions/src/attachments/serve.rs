//! The type a stored file is served as.

use super::file_type::{Sniffed, sniff};
use crate::blob::BlobPath;

/// The content type of the file at `path` holding `bytes`: a recognised
/// binary type from the bytes (so a name cannot make an image be served as
/// text or the reverse), text by its extension. Text a browser would run
/// or render as a page (HTML, JavaScript, SVG) is served as plain text.
pub(crate) fn content_type_of(path: &BlobPath, bytes: &[u8]) -> String {
    match sniff(bytes) {
        Sniffed::Binary(t) => t.mime.to_string(),
        Sniffed::Text => format!("{}; charset=utf-8", text_type(path)),
        Sniffed::Unknown => "application/octet-stream".to_string(),
    }
}

/// The text type an extension names (`text/plain` for any other).
fn text_type(path: &BlobPath) -> &'static str {
    let name = path.file_name();
    let extension = name.rsplit_once('.').map_or("", |(_, ext)| ext);
    match extension.to_ascii_lowercase().as_str() {
        "md" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "yaml" | "yml" => "text/yaml",
        "patch" | "diff" => "text/x-diff",
        _ => "text/plain",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes_then_the_extension() {
        let path = |p: &str| BlobPath::parse(p).unwrap();
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(
            content_type_of(&path("attachments/a.txt"), png),
            "image/png"
        );
        assert_eq!(
            content_type_of(&path("artifacts/turn_1/verify.log"), b"ok"),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            content_type_of(&path("attachments/notes.md"), b"# hi"),
            "text/markdown; charset=utf-8"
        );
        assert_eq!(
            content_type_of(&path("attachments/page.html"), b"<script>"),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            content_type_of(&path("attachments/x.bin"), b"\0\x01"),
            "application/octet-stream"
        );
    }
}
