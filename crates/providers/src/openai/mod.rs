//! OpenAI chat completions (and the servers that copy it: vLLM, llama.cpp,
//! Ollama, OpenRouter, DeepSeek, Groq): request building and stream parsing,
//! both pure.

mod compat;
mod request;
mod stream;

pub use compat::{MaxTokensField, OpenAiCompat, ThinkingFormat};
pub use request::{build_request, endpoint, headers};
pub use stream::ChunkDecoder;
