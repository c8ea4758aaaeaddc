//! OpenAI chat completions (and the servers that copy it: vLLM, llama.cpp,
//! Ollama, OpenRouter, DeepSeek, Groq): request building and stream parsing,
//! both pure.

mod request;
mod stream;

pub use request::{build_request, convert_messages, endpoint, headers};
pub use stream::ChunkDecoder;
