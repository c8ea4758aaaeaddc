//! The wire adapters this crate has, by [`WireApi`]: the one place the enum
//! meets its implementations.

use crate::anthropic::AnthropicAdapter;
use crate::context::{Context, StreamOptions};
use crate::error::ProviderError;
use crate::google::GoogleAdapter;
use crate::model::Model;
use crate::openai::OpenAiAdapter;
use crate::openai_responses::ResponsesAdapter;

use super::adapter::{WireAdapter, WireDecoder, WireRequest};
use super::api::WireApi;

/// The adapter of one wire API as the HTTP layer and the decoder use it,
/// chosen once per call from `Model.api`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Adapter {
    // Without the `http` feature nothing sends a request: only the decoder
    // half of an adapter is used.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    request: fn(&Model, &Context, &StreamOptions, Option<&str>) -> WireRequest,
    decoder: fn() -> Box<dyn WireDecoder>,
}

impl Adapter {
    /// The adapter of `api`. An API no adapter speaks is an invalid request:
    /// a call to such a model ends in an `error` before anything is sent.
    pub(crate) fn for_api(api: &WireApi) -> Result<Adapter, ProviderError> {
        match api {
            WireApi::OpenAiCompletions => Ok(Adapter::of::<OpenAiAdapter>()),
            WireApi::AnthropicMessages => Ok(Adapter::of::<AnthropicAdapter>()),
            WireApi::OpenAiResponses => Ok(Adapter::of::<ResponsesAdapter>()),
            WireApi::GoogleGenerativeAi => Ok(Adapter::of::<GoogleAdapter>()),
            WireApi::Other(name) => Err(ProviderError::InvalidRequest {
                message: format!("no adapter for API {name:?}"),
            }),
        }
    }

    fn of<A: WireAdapter>() -> Adapter {
        Adapter {
            request: |model, context, options, api_key| {
                A::request(model, &A::compat(model), context, options, api_key)
            },
            decoder: || Box::new(A::Decoder::default()),
        }
    }

    /// The request for one streaming call (see [`WireAdapter::request`]).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn request(
        &self,
        model: &Model,
        context: &Context,
        options: &StreamOptions,
        api_key: Option<&str>,
    ) -> WireRequest {
        (self.request)(model, context, options, api_key)
    }

    /// A decoder for one streamed answer.
    pub(crate) fn decoder(&self) -> Box<dyn WireDecoder> {
        (self.decoder)()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, OPENAI_COMPLETIONS, OPENAI_RESPONSES,
    };

    #[test]
    fn each_known_api_has_an_adapter_and_an_unknown_one_is_an_invalid_request() {
        let model = |api: &str| Model::new(api, "p", "m", "http://127.0.0.1/v1");
        let options = StreamOptions::default();
        let url = |api| {
            Adapter::for_api(&WireApi::from(api)).map(|a| {
                a.request(&model(api), &Context::default(), &options, None)
                    .url
            })
        };
        assert_eq!(
            url(OPENAI_COMPLETIONS),
            Ok("http://127.0.0.1/v1/chat/completions".to_string())
        );
        assert_eq!(
            url(ANTHROPIC_MESSAGES),
            Ok("http://127.0.0.1/v1/messages".to_string())
        );
        assert_eq!(
            url(OPENAI_RESPONSES),
            Ok("http://127.0.0.1/v1/responses".to_string())
        );
        assert_eq!(
            url(GOOGLE_GENERATIVE_AI),
            Ok("http://127.0.0.1/v1/models/m:streamGenerateContent?alt=sse".to_string())
        );
        assert_eq!(
            url("bedrock-converse-stream"),
            Err(ProviderError::InvalidRequest {
                message: "no adapter for API \"bedrock-converse-stream\"".into()
            })
        );
    }
}
