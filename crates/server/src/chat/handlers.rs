//! The routes of `/api/chat` beside the stream: each reads its request,
//! makes the engine call and answers JSON.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use roundtable_sessions::{
    ApprovalAction, Caller, MessageId, PlanAction, Provenance, QuestionReply, QueueMode,
    SessionInfo, SessionMode, Submit, TurnId,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ChatState;
use super::catalog::{ModelCatalog, Resources};
use super::named::Named;
use super::settings::SettingsView;
use super::summary::SessionSummary;
use super::transcript::Transcript;
use crate::api_error::{ApiError, ErrorCode};
use crate::body::{JsonBody, OptionalJsonBody};
use crate::extract::{caller, session_id};

/// A body or query naming a session, by id or by its thread file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionRef {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    session_file: Option<String>,
}

/// `POST /api/chat/abort`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AbortBody {
    session_id: String,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/chat/question`: answers to an `ask_user` call, a decision
/// about a gated call, or a plan decision; exactly one of them.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QuestionBody {
    session_id: String,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    answers: Option<Vec<QuestionReply>>,
    #[serde(default)]
    decision: Option<Decision>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    plan_action: Option<PlanAction>,
    #[serde(default)]
    message: Option<String>,
}

/// A decision about a gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Decision {
    /// Run this call.
    Approve,
    /// Run this call and every later call of the same tool in the session.
    #[serde(alias = "approve_session")]
    ApproveSession,
    /// Do not run it.
    Deny,
}

impl Decision {
    fn action(self) -> ApprovalAction {
        match self {
            Self::Approve => ApprovalAction::Approve,
            Self::ApproveSession => ApprovalAction::ApproveSession,
            Self::Deny => ApprovalAction::Deny,
        }
    }
}

/// `POST /api/chat/new` (the body is optional).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct NewBody {
    mode: Option<SessionMode>,
}

/// `GET /api/chat/provenance`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProvenanceQuery {
    session_id: String,
    #[serde(default)]
    run_id: Option<String>,
}

/// What `POST /api/chat/new` answers: the session's listing, and the
/// whole session beside.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSession {
    #[serde(flatten)]
    summary: SessionSummary,
    session: SessionInfo,
}

/// What a plan decision answers: the message it sent and its turn.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanDecided {
    answered: &'static str,
    message_id: MessageId,
    turn_id: Option<TurnId>,
    queued: Option<QueueMode>,
}

/// What an answer to a question or a decision about a gated call
/// answers.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Answered {
    /// `question` or `approval`.
    answered: &'static str,
    /// The call answered.
    tool_call_id: String,
    /// The decision (`approval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
}

/// What `POST /api/chat/abort` answers.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AbortAccepted {
    /// `abort_requested`.
    status: &'static str,
    /// The session.
    session_id: String,
}

/// What `GET /api/chat/sessions` answers.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SessionList {
    /// Newest first.
    sessions: Vec<SessionSummary>,
}

/// What `GET /api/chat/provenance` answers: one run, or all of them.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProvenanceAnswer {
    /// The session.
    session_id: String,
    /// The run asked for (with `runId`).
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<Provenance>,
    /// Every run of the session, oldest first (without `runId`).
    #[serde(skip_serializing_if = "Option::is_none")]
    runs: Option<Vec<Provenance>>,
}

fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|r| ApiError::new(ErrorCode::InvalidRequest, r.body_text()))
}

pub(crate) async fn abort(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    JsonBody(body): JsonBody<AbortBody>,
) -> Result<Response, ApiError> {
    let session = session_id(&body.session_id)?;
    api.engine
        .cancel(&caller(found), session.as_str(), body.reason)
        .await?;
    let answer = AbortAccepted {
        status: "abort_requested",
        session_id: session.as_str().to_string(),
    };
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

pub(crate) async fn question(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    JsonBody(body): JsonBody<QuestionBody>,
) -> Result<Response, ApiError> {
    let caller = caller(found);
    let session = session_id(&body.session_id)?;
    let session = session.as_str();
    let call = || {
        body.tool_call_id.as_deref().ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidField,
                "toolCallId: the call answered is required",
            )
        })
    };
    match (&body.answers, body.decision, body.plan_action) {
        (Some(answers), None, None) => {
            let call = call()?;
            api.engine
                .answer(&caller, session, call, answers.clone())
                .await?;
            let answered = Answered {
                answered: "question",
                tool_call_id: call.to_string(),
                decision: None,
            };
            Ok(Json(answered).into_response())
        }
        (None, Some(decision), None) => {
            let call = call()?;
            api.engine
                .decide(
                    &caller,
                    session,
                    call,
                    decision.action(),
                    body.reason.clone(),
                )
                .await?;
            let answered = Answered {
                answered: "approval",
                tool_call_id: call.to_string(),
                decision: Some(decision),
            };
            Ok(Json(answered).into_response())
        }
        (None, None, Some(action)) => {
            let submit = Submit {
                text: body.message.clone().unwrap_or_default(),
                auto_run: Some(true),
                plan_action: Some(action),
                ..Submit::default()
            };
            if action == PlanAction::Refine && submit.text.trim().is_empty() {
                return Err(ApiError::new(
                    ErrorCode::InvalidField,
                    "message: refining a plan needs the feedback",
                ));
            }
            let sent = api.engine.submit(&caller, session, submit).await?;
            let decided = PlanDecided {
                answered: "plan",
                message_id: sent.message_id,
                turn_id: sent.turn_id,
                queued: sent.queued,
            };
            Ok((StatusCode::ACCEPTED, Json(decided)).into_response())
        }
        _ => Err(ApiError::new(
            ErrorCode::InvalidField,
            "give exactly one of answers (an ask_user call), decision (a gated call) or planAction",
        )),
    }
}

pub(crate) async fn session(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    found_query: Result<Query<SessionRef>, QueryRejection>,
) -> Result<Json<Transcript>, ApiError> {
    let named = query(found_query)?;
    transcript(&api, &caller(found), &named).await.map(Json)
}

pub(crate) async fn resume(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    JsonBody(named): JsonBody<SessionRef>,
) -> Result<Json<Transcript>, ApiError> {
    transcript(&api, &caller(found), &named).await.map(Json)
}

async fn transcript(
    api: &ChatState,
    caller: &Caller,
    named: &SessionRef,
) -> Result<Transcript, ApiError> {
    let session = Named::read(
        &api.engine,
        caller,
        named.session_id.as_deref(),
        named.session_file.as_deref(),
    )
    .await?
    .required()?;
    let info = api.engine.get(caller, session.as_str()).await?;
    let events = api.engine.events(caller, session.as_str(), None).await?;
    let summary = SessionSummary::of(api, &info);
    Ok(Transcript::of(summary, info, &events))
}

pub(crate) async fn sessions(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
) -> Result<Json<SessionList>, ApiError> {
    // Newest first, as the engine lists them.
    let sessions = api.engine.list(&caller(found)).await?;
    let listed: Vec<SessionSummary> = sessions
        .iter()
        .map(|session| SessionSummary::of(&api, session))
        .collect();
    Ok(Json(SessionList { sessions: listed }))
}

pub(crate) async fn new_session(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    OptionalJsonBody(body): OptionalJsonBody<NewBody>,
) -> Result<Response, ApiError> {
    let caller = caller(found);
    let settings = api.settings.effective(&caller).await?;
    let session = api.create(&caller, body.mode, &settings).await?;
    let created = NewSession {
        summary: SessionSummary::of(&api, &session),
        session,
    };
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

pub(crate) async fn models(State(api): State<Arc<ChatState>>) -> Json<ModelCatalog> {
    Json(ModelCatalog::of(&api.engine.models()))
}

pub(crate) async fn resources(
    State(api): State<Arc<ChatState>>,
) -> Result<Json<Resources>, ApiError> {
    let dirs = api.skill_dirs.clone();
    // Loading reads files: off the async threads.
    tokio::task::spawn_blocking(move || Resources::load(&dirs))
        .await
        .map(Json)
        .map_err(|e| ApiError::internal(format_args!("loading the skills failed: {e}")))
}

pub(crate) async fn get_settings(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
) -> Result<Json<SettingsView>, ApiError> {
    api.settings.view(&caller(found)).await.map(Json)
}

pub(crate) async fn put_settings(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    JsonBody(patch): JsonBody<Value>,
) -> Result<Json<SettingsView>, ApiError> {
    api.settings.update(&caller(found), patch).await.map(Json)
}

pub(crate) async fn provenance(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    found_query: Result<Query<ProvenanceQuery>, QueryRejection>,
) -> Result<Json<ProvenanceAnswer>, ApiError> {
    let named = query(found_query)?;
    let caller = caller(found);
    let session = session_id(&named.session_id)?;
    let mut answer = ProvenanceAnswer {
        session_id: session.as_str().to_string(),
        run: None,
        runs: None,
    };
    match &named.run_id {
        Some(run) => {
            let run = api
                .engine
                .provenance(&caller, session.as_str(), run)
                .await?;
            answer.run = Some(run);
        }
        None => answer.runs = Some(api.engine.runs(&caller, session.as_str()).await?),
    }
    Ok(Json(answer))
}
