//! Anthropic messages: request building and stream parsing, both pure.

mod request;
mod stream;

pub use request::{
    build_request, convert_messages, endpoint, headers, thinking_budget, uses_adaptive_thinking,
};
pub use stream::EventDecoder;
