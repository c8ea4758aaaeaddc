//! The file types an attachment may have, and how each is recognised from
//! its bytes: one table, used to check uploads and to read files back.

/// What a file is, for the model: images can be shown, text can be read,
/// the rest can only be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// An image a multimodal model can see (PNG, JPEG, GIF, WebP).
    Image,
    /// Audio (WAV, MP3, Ogg).
    Audio,
    /// UTF-8 text (`text/*`, JSON).
    Text,
    /// Anything else (PDF, ZIP, unrecognised binary data).
    Other,
}

/// A binary type recognised by its first bytes.
#[derive(Debug)]
pub(crate) struct BinaryType {
    /// The canonical MIME type.
    pub(crate) mime: &'static str,
    /// Other names clients send for it.
    aliases: &'static [&'static str],
    /// The stored file's extension.
    pub(crate) extension: &'static str,
    pub(crate) kind: FileKind,
    magic: fn(&[u8]) -> bool,
}

/// Every binary type an upload may declare, each with the test of its
/// magic bytes. (SVG is not here on purpose: it is a script-capable
/// document, not a picture a model can be shown.)
pub(crate) const BINARY_TYPES: &[BinaryType] = &[
    BinaryType {
        mime: "image/png",
        aliases: &[],
        extension: "png",
        kind: FileKind::Image,
        magic: |b| b.starts_with(b"\x89PNG\r\n\x1a\n"),
    },
    BinaryType {
        mime: "image/jpeg",
        aliases: &["image/jpg", "image/pjpeg"],
        extension: "jpg",
        kind: FileKind::Image,
        magic: |b| b.starts_with(&[0xFF, 0xD8, 0xFF]),
    },
    BinaryType {
        mime: "image/gif",
        aliases: &[],
        extension: "gif",
        kind: FileKind::Image,
        magic: |b| b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a"),
    },
    BinaryType {
        mime: "image/webp",
        aliases: &[],
        extension: "webp",
        kind: FileKind::Image,
        magic: |b| riff(b, b"WEBP"),
    },
    BinaryType {
        mime: "application/pdf",
        aliases: &["application/x-pdf"],
        extension: "pdf",
        kind: FileKind::Other,
        magic: |b| b.starts_with(b"%PDF-"),
    },
    BinaryType {
        mime: "audio/wav",
        aliases: &["audio/x-wav", "audio/wave", "audio/vnd.wave"],
        extension: "wav",
        kind: FileKind::Audio,
        magic: |b| riff(b, b"WAVE"),
    },
    BinaryType {
        mime: "audio/mpeg",
        aliases: &["audio/mp3", "audio/x-mp3", "audio/mpeg3"],
        extension: "mp3",
        kind: FileKind::Audio,
        magic: is_mp3,
    },
    BinaryType {
        mime: "audio/ogg",
        aliases: &["application/ogg", "audio/opus", "audio/vorbis"],
        extension: "ogg",
        kind: FileKind::Audio,
        magic: |b| b.starts_with(b"OggS"),
    },
    BinaryType {
        mime: "application/zip",
        aliases: &["application/x-zip-compressed", "application/x-zip"],
        extension: "zip",
        kind: FileKind::Other,
        magic: |b| {
            b.starts_with(b"PK\x03\x04")
                || b.starts_with(b"PK\x05\x06")
                || b.starts_with(b"PK\x07\x08")
        },
    },
];

/// A RIFF container (`RIFF`, a size, then the form type).
fn riff(bytes: &[u8], form: &[u8; 4]) -> bool {
    bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == form
}

/// An MP3: an ID3v2 tag, or an MPEG audio frame header (eleven set sync
/// bits, a valid version, layer III/II/I, a bitrate index that is not
/// "bad", a valid sample rate).
fn is_mp3(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"ID3") {
        return true;
    }
    let [a, b, c, ..] = bytes else {
        return false;
    };
    let version = (b >> 3) & 0b11;
    let layer = (b >> 1) & 0b11;
    let bitrate = c >> 4;
    let sample_rate = (c >> 2) & 0b11;
    *a == 0xFF
        && b & 0xE0 == 0xE0
        && version != 0b01
        && layer != 0b00
        && bitrate != 0b1111
        && sample_rate != 0b11
}

/// What the bytes of a file are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sniffed {
    /// One of the binary types.
    Binary(&'static BinaryType),
    /// UTF-8 text without NUL bytes.
    Text,
    /// Anything else.
    Unknown,
}

impl Sniffed {
    /// What the content was found to be, for messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Binary(t) => t.mime,
            Self::Text => "UTF-8 text",
            Self::Unknown => "unrecognised binary data",
        }
    }
}

/// Recognises `bytes`: magic bytes first (a PNG is never taken for text),
/// then UTF-8 text.
pub(crate) fn sniff(bytes: &[u8]) -> Sniffed {
    if let Some(t) = BINARY_TYPES.iter().find(|t| (t.magic)(bytes)) {
        return Sniffed::Binary(t);
    }
    if is_text(bytes) {
        Sniffed::Text
    } else {
        Sniffed::Unknown
    }
}

/// UTF-8 without NUL bytes (which no text file holds, and which mark
/// UTF-16 and binary data).
pub(crate) fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// A declared MIME type, normalised: lowercase, without parameters
/// (`Text/Plain; charset=utf-8` → `text/plain`). `None` when it is not a
/// `type/subtype` of token characters.
pub(crate) fn normalise(declared: &str) -> Option<String> {
    let essence = declared.split(';').next().unwrap_or_default().trim();
    let (kind, subtype) = essence.split_once('/')?;
    let token = |s: &str| {
        !s.is_empty()
            && s.len() <= 100
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    (token(kind) && token(subtype)).then(|| essence.to_ascii_lowercase())
}

/// The binary type a normalised MIME type names, aliases included.
pub(crate) fn binary_type(mime: &str) -> Option<&'static BinaryType> {
    BINARY_TYPES
        .iter()
        .find(|t| t.mime == mime || t.aliases.contains(&mime))
}

/// What a normalised declared type asks for.
#[derive(Debug)]
pub(crate) enum Declared {
    /// One of the binary types.
    Binary(&'static BinaryType),
    /// Text of this MIME type, stored with this extension.
    Text {
        mime: String,
        extension: &'static str,
    },
    /// JSON.
    Json,
    /// "Whatever it is" (`application/octet-stream`).
    Opaque,
    /// A type this store does not take.
    Unsupported,
}

/// Classifies a normalised declared MIME type.
pub(crate) fn classify(mime: &str) -> Declared {
    if let Some(t) = binary_type(mime) {
        return Declared::Binary(t);
    }
    if mime == "application/json" {
        return Declared::Json;
    }
    if mime == "application/octet-stream" {
        return Declared::Opaque;
    }
    if let Some(subtype) = mime.strip_prefix("text/") {
        return Declared::Text {
            mime: mime.to_string(),
            extension: text_extension(subtype),
        };
    }
    Declared::Unsupported
}

/// The stored extension of a text subtype: a few known ones, else `txt`
/// (the subtype comes from the client, so it never becomes a name).
fn text_extension(subtype: &str) -> &'static str {
    match subtype {
        "markdown" | "x-markdown" => "md",
        "csv" => "csv",
        "tab-separated-values" => "tsv",
        "html" => "html",
        "xml" => "xml",
        "css" => "css",
        "javascript" => "js",
        "x-python" => "py",
        "x-rust" => "rs",
        "yaml" | "x-yaml" => "yaml",
        _ => "txt",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mp3_frames_are_told_from_jpeg_and_noise() {
        assert!(is_mp3(b"ID3\x04\0\0\0\0\0\0"));
        assert!(is_mp3(&[0xFF, 0xFB, 0x90, 0x64]));
        assert!(!is_mp3(&[0xFF, 0xD8, 0xFF, 0xE0]));
        assert!(!is_mp3(&[0xFF, 0xFF, 0xFF, 0xFF]));
        assert!(!is_mp3(&[0xFF, 0xFB]));
    }

    #[test]
    fn declared_types_are_normalised() {
        assert_eq!(
            normalise("Text/Plain; charset=UTF-8").unwrap(),
            "text/plain"
        );
        assert_eq!(normalise(" image/png ").unwrap(), "image/png");
        for bad in [
            "",
            "png",
            "image/",
            "/png",
            "image/png/x",
            "ima ge/png",
            "text/pl\0ain",
        ] {
            assert!(normalise(bad).is_none(), "{bad:?}");
        }
        assert!(matches!(classify("image/jpg"), Declared::Binary(t) if t.mime == "image/jpeg"));
        assert!(matches!(
            classify("text/x-markdown"),
            Declared::Text {
                extension: "md",
                ..
            }
        ));
        assert!(matches!(
            classify("text/x-anything"),
            Declared::Text {
                extension: "txt",
                ..
            }
        ));
        assert!(matches!(classify("image/svg+xml"), Declared::Unsupported));
    }
}
