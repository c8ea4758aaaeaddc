//! What the providers' tests share besides the replay server
//! (`roundtable_test_support::replay`): reading the recorded wire captures
//! of `tests/fixtures/`.

/// A fixture file's bytes.
pub(crate) fn fixture(path: &str) -> Vec<u8> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}
