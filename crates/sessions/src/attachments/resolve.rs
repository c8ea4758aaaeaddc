//! What a model reads of a file a message refers to.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use roundtable_providers::{ImageContent, UserBlock};
use roundtable_thread_stream::FileRef;

use super::AttachmentLimits;
use super::file_type::{FileKind, Sniffed, normalise, sniff};
use crate::blob::{BlobPath, BlobStore};
use crate::error::SessionError;
use crate::ids::SessionId;

/// Reads the file `file` refers to from `session`'s blobs and turns it into
/// the blocks a model reads (see [`resolve_bytes`]).
///
/// A reference that is not a valid blob path is
/// [`BlobError::InvalidPath`](crate::blob::BlobError::InvalidPath), one to a file
/// that is not stored [`BlobError::NotFound`](crate::blob::BlobError::NotFound):
/// an engine that checks a message's references when it is submitted sees
/// these there, not in the middle of a turn.
pub async fn resolve(
    blobs: &dyn BlobStore,
    session: &SessionId,
    file: &FileRef,
    model_accepts_images: bool,
    limits: &AttachmentLimits,
) -> Result<Vec<UserBlock>, SessionError> {
    let path = BlobPath::parse(&file.reference)?;
    let bytes = blobs.get(session, &path).await?;
    Ok(resolve_bytes(
        &path,
        &file.mime_type,
        &bytes,
        model_accepts_images,
        limits,
    ))
}

/// The blocks a model reads of the file stored at `path` with content
/// `bytes` (pure):
///
/// - an image (PNG, JPEG, GIF, WebP) becomes a line naming it and the image
///   itself (base64) when the model accepts images and the image is within
///   [`AttachmentLimits::max_image_bytes`]; otherwise only a line naming it
///   and saying why it is not shown;
/// - text (UTF-8) becomes a line naming it followed by its text, cut after
///   [`AttachmentLimits::max_inline_text_bytes`] (at a character boundary)
///   with a marker saying how much was shown and where the whole file is;
/// - anything else (audio, PDF, ZIP, unrecognised data) becomes a line
///   naming it, with its type and size.
///
/// The type is the one the bytes are recognised as; `declared_mime` (the
/// message's) only names the flavour of a text file (`text/markdown`), so
/// a message cannot make a model be sent a text file as an image or the
/// reverse.
///
/// ```
/// use roundtable_providers::UserBlock;
/// use roundtable_sessions::blob::BlobPath;
/// use roundtable_sessions::attachments::{AttachmentLimits, resolve_bytes};
///
/// let path = BlobPath::parse("attachments/file_01.txt").unwrap();
/// let blocks = resolve_bytes(&path, "text/plain", b"hello", false, &AttachmentLimits::default());
/// let [UserBlock::Text(text)] = blocks.as_slice() else { panic!("{blocks:?}") };
/// assert_eq!(&*text.text, "[attachment attachments/file_01.txt: text/plain, 5 bytes]\nhello");
/// ```
pub fn resolve_bytes(
    path: &BlobPath,
    declared_mime: &str,
    bytes: &[u8],
    model_accepts_images: bool,
    limits: &AttachmentLimits,
) -> Vec<UserBlock> {
    let size = bytes.len();
    let (mime, kind) = match sniff(bytes) {
        Sniffed::Binary(t) => (t.mime.to_string(), t.kind),
        Sniffed::Text => (text_mime(declared_mime), FileKind::Text),
        Sniffed::Unknown => ("application/octet-stream".to_string(), FileKind::Other),
    };
    let label = format!("[attachment {path}: {mime}, {size} bytes");
    match kind {
        FileKind::Image if !model_accepts_images => vec![UserBlock::text(format!(
            "{label}; not shown: this model does not take images]"
        ))],
        FileKind::Image if size > limits.max_image_bytes => vec![UserBlock::text(format!(
            "{label}; not shown: larger than the {} bytes an image may have]",
            limits.max_image_bytes
        ))],
        FileKind::Image => vec![
            UserBlock::text(format!("{label}]")),
            UserBlock::Image(ImageContent {
                data: STANDARD.encode(bytes).into(),
                mime_type: mime.into(),
            }),
        ],
        FileKind::Text => {
            // Sniffed as UTF-8 text, so this never falls back.
            let text = String::from_utf8_lossy(bytes);
            let shown = cut(&text, limits.max_inline_text_bytes);
            let mut block = format!("{label}]\n{shown}");
            if shown.len() < text.len() {
                block.push_str(&format!(
                    "\n[cut: the first {} of {size} bytes shown; the whole file is {path}]",
                    shown.len()
                ));
            }
            vec![UserBlock::text(block)]
        }
        FileKind::Audio | FileKind::Other => vec![UserBlock::text(format!(
            "{label}; its content is not shown]"
        ))],
    }
}

/// The MIME type a text file is named with: the declared one when it is a
/// text type, else `text/plain`.
fn text_mime(declared: &str) -> String {
    match normalise(declared) {
        Some(mime) if mime.starts_with("text/") || mime == "application/json" => mime,
        _ => "text/plain".to_string(),
    }
}

/// The longest start of `text` within `limit` bytes that ends on a
/// character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_land_on_character_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("abc", 10), "abc");
        assert_eq!(cut("€", 2), "");
    }
}
