//! The crate's setup errors: what can go wrong before a request is served
//! (a token that is unusable, a token file that cannot be written, a bind
//! that would expose the API without a chosen token, a limit of the process
//! that cannot be raised).

use std::net::SocketAddr;
use std::path::PathBuf;

/// What setting up the server can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A token that is too short, too long or has characters a header, a
    /// cookie or a URL cannot carry as they are.
    #[error(
        "the access token must be {min} to {max} characters of A-Z, a-z, 0-9, '-', '.', '_', '~' ({reason})"
    )]
    InvalidToken {
        /// The shortest token accepted.
        min: usize,
        /// The longest token accepted.
        max: usize,
        /// What is wrong with this one.
        reason: &'static str,
    },
    /// No randomness to generate a token from.
    #[error("generating an access token: {0}")]
    Random(String),
    /// The token file could not be written.
    #[error("writing the token file {path:?}: {source}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Serving on an address other machines reach, with a token nobody
    /// chose (generated at start): refused, so that a server is never
    /// exposed by accident.
    #[error(
        "refusing to serve on {addr}, which is not a loopback address, without an explicit access token (set ROUNDTABLE_TOKEN)"
    )]
    PublicBindWithoutToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// An allowed origin that is not `scheme://host[:port]`.
    #[error("{origin:?} is not an origin (scheme://host[:port])")]
    InvalidOrigin {
        /// What was given.
        origin: String,
    },
    /// The rooms could not be opened: a bot of the catalogue that cannot
    /// be one, or a store that cannot be read.
    #[error("rooms: {0}")]
    Rooms(String),
    /// The open-files limit could not be read or raised.
    #[error("raising the open-files limit: {0}")]
    OpenFilesLimit(#[source] std::io::Error),
}
