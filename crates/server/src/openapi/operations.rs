//! How the crate's extractors and answers show in the document: a JSON
//! body (required or not) and the errors of reading it, an upload in
//! either of its forms, an [`ApiError`] and the statuses an engine error
//! takes; and the responses the types cannot say, which a route adds as
//! it is declared (a stream, a file, a page, a header it reads).

use aide::generate::{GenContext, in_context};
use aide::openapi::{
    HeaderStyle, MediaType, Operation, Parameter, ParameterData, ParameterSchemaOrContent,
    ReferenceOr, RequestBody, Response, SchemaObject, StatusCode,
};
use aide::transform::TransformOperation;
use aide::{OperationInput, OperationOutput};
use schemars::{JsonSchema, Schema, json_schema};

use crate::api_error::{ApiError, ErrorBody};
use crate::body::{JsonBody, OptionalJsonBody};
use crate::sessions::{Upload, UploadBody};

impl<T: JsonSchema> OperationInput for JsonBody<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        json_body::<T>(ctx, operation, true);
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        _: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        body_errors(ctx)
    }
}

impl<T: JsonSchema> OperationInput for OptionalJsonBody<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        json_body::<T>(ctx, operation, false);
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        _: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        body_errors(ctx)
    }
}

impl OperationInput for Upload {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        let json = ctx.schema.subschema_for::<UploadBody>();
        let multipart = json_schema!({
            "type": "object",
            "properties": {
                "file": {"description": "The file; its part's filename and Content-Type are the file's.", "contentMediaType": "application/octet-stream"},
                "mime_type": {"type": "string", "description": "The file's type, over its part's Content-Type."},
                "filename": {"type": "string", "description": "The file's name, over its part's filename."},
            },
            "required": ["file"],
        });
        let mut body = RequestBody {
            description: Some(
                "One file: JSON with its bytes in base64, or multipart/form-data.".into(),
            ),
            required: true,
            ..RequestBody::default()
        };
        body.content.insert("application/json".into(), media(json));
        body.content
            .insert("multipart/form-data".into(), media(multipart));
        operation.request_body = Some(ReferenceOr::Item(body));
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        _: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        body_errors(ctx)
    }
}

impl OperationOutput for ApiError {
    type Inner = Self;

    fn operation_response(ctx: &mut GenContext, _: &mut Operation) -> Option<Response> {
        Some(error(ctx, "The request failed."))
    }

    /// The statuses an engine error takes (see
    /// [`ErrorCode::of_kind`](crate::ErrorCode::of_kind)).
    fn inferred_responses(
        ctx: &mut GenContext,
        _: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        [
            (
                404,
                "No such session, room, turn or call (or not one the caller sees).",
            ),
            (
                409,
                "The request conflicts with the session's or the room's state.",
            ),
            (422, "A field the server refuses."),
            (
                500,
                "The server or its storage failed, or the session cannot be read.",
            ),
        ]
        .into_iter()
        .map(|(status, description)| (Some(StatusCode::Code(status)), error(ctx, description)))
        .collect()
    }
}

/// Sets the request body: JSON of `T`.
fn json_body<T: JsonSchema>(ctx: &mut GenContext, operation: &mut Operation, required: bool) {
    let schema = ctx.schema.subschema_for::<T>();
    let mut body = RequestBody {
        required,
        ..RequestBody::default()
    };
    body.content
        .insert("application/json".into(), media(schema));
    operation.request_body = Some(ReferenceOr::Item(body));
}

/// The refusals of a body before the route reads it.
fn body_errors(ctx: &mut GenContext) -> Vec<(Option<StatusCode>, Response)> {
    [
        (
            400,
            "The body is not valid JSON, or a header does not read.",
        ),
        (413, "The body is larger than the route accepts."),
        (415, "The body is not of a type the route reads."),
        (422, "The body reads, but a field is invalid."),
    ]
    .into_iter()
    .map(|(status, description)| (Some(StatusCode::Code(status)), error(ctx, description)))
    .collect()
}

/// A response with the JSON error body.
fn error(ctx: &mut GenContext, description: &str) -> Response {
    let schema = ctx.schema.subschema_for::<ErrorBody<'static>>();
    let mut response = Response {
        description: description.into(),
        ..Response::default()
    };
    response
        .content
        .insert("application/json".into(), media(schema));
    response
}

fn media(schema: Schema) -> MediaType {
    MediaType {
        schema: Some(SchemaObject {
            json_schema: schema,
            example: None,
            external_docs: None,
        }),
        ..MediaType::default()
    }
}

/// The operation's `200` is a stream of `media_type` (`text/event-stream`,
/// `application/x-ndjson`), each event's data or line a `T`.
pub(crate) fn streamed<'t, T: JsonSchema>(
    op: TransformOperation<'t>,
    media_type: &str,
    description: &str,
) -> TransformOperation<'t> {
    let schema = in_context(|ctx| ctx.schema.subschema_for::<T>());
    ok(op, description, media_type, schema)
}

/// The operation's `200` is a stored file, of the type its bytes say.
pub(crate) fn binary<'t>(op: TransformOperation<'t>, description: &str) -> TransformOperation<'t> {
    let schema = json_schema!({"contentMediaType": "application/octet-stream"});
    ok(op, description, "*/*", schema)
}

/// The operation's `200` is text of `media_type` (a page, its script).
pub(crate) fn text<'t>(
    op: TransformOperation<'t>,
    media_type: &str,
    description: &str,
) -> TransformOperation<'t> {
    ok(
        op,
        description,
        media_type,
        json_schema!({"type": "string"}),
    )
}

fn ok<'t>(
    mut op: TransformOperation<'t>,
    description: &str,
    media_type: &str,
    schema: Schema,
) -> TransformOperation<'t> {
    let mut response = Response {
        description: description.into(),
        ..Response::default()
    };
    response.content.insert(media_type.into(), media(schema));
    let responses = op
        .inner_mut()
        .responses
        .get_or_insert_with(Default::default);
    responses
        .responses
        .insert(StatusCode::Code(200), ReferenceOr::Item(response));
    op
}

/// The operation reads the optional header `name`.
pub(crate) fn header_parameter<'t>(
    mut op: TransformOperation<'t>,
    name: &str,
    description: &str,
) -> TransformOperation<'t> {
    let parameter = Parameter::Header {
        parameter_data: ParameterData {
            name: name.into(),
            description: Some(description.into()),
            required: false,
            format: ParameterSchemaOrContent::Schema(SchemaObject {
                json_schema: json_schema!({"type": "string"}),
                example: None,
                external_docs: None,
            }),
            extensions: Default::default(),
            deprecated: None,
            example: None,
            examples: Default::default(),
            explode: None,
        },
        style: HeaderStyle::Simple,
    };
    op.inner_mut().parameters.push(ReferenceOr::Item(parameter));
    op
}
