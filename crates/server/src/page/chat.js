// The daemon's chat page: sessions on the left, a conversation streamed
// from POST /api/chat (NDJSON, one event per line) on the right. The page
// signs in with the cookie the one-time ?token= link set, so every fetch
// is same-origin with credentials. Text goes into the page as text, never
// as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

const page = {
  sessionId: null,
  // A stream is open: new prompts are queued on the running turn.
  streaming: false,
  // Assistant message elements by message id (the turn's id).
  assistants: new Map(),
};

// --- HTTP ---------------------------------------------------------------

async function api(path, options = {}) {
  const init = { credentials: "same-origin", ...options };
  if (options.body !== undefined) {
    init.method = options.method || "POST";
    init.headers = { "Content-Type": "application/json" };
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const message = body && body.error ? body.error.message : response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return body;
}

// Posts a prompt and hands each line of the NDJSON answer to `onEvent`.
async function streamChat(body, onEvent) {
  const response = await fetch("/api/chat", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await response.json().catch(() => null);
    throw new Error(`${response.status}: ${error && error.error ? error.error.message : response.statusText}`);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (line) onEvent(JSON.parse(line));
    }
  }
  const rest = (buffered + decoder.decode()).trim();
  if (rest) onEvent(JSON.parse(rest));
}

// --- Rendering ----------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setStatus(text) {
  $("status").textContent = text;
}

function showError(text) {
  const box = el("div", "message error", text);
  $("messages").append(box);
  box.scrollIntoView({ block: "end" });
}

// A note from the server about the session: a new session in place of
// one that could not be continued, what the agent's setup found wrong.
function showNote(text) {
  const box = el("div", "message note", text);
  $("messages").append(box);
  box.scrollIntoView({ block: "end" });
}

function addMessage(role, id, who) {
  const box = el("div", `message ${role}`);
  if (id) box.dataset.id = id;
  box.append(el("div", "who", who));
  $("messages").append(box);
  return box;
}

function assistantBox(id) {
  let box = page.assistants.get(id);
  if (!box) {
    box = addMessage("assistant", id, "assistant");
    page.assistants.set(id, box);
  }
  return box;
}

// Appends streamed text to the message's last text part (a new one after
// a tool call or reasoning).
function appendText(box, text) {
  let last = box.lastElementChild;
  if (!last || !last.classList.contains("text")) {
    last = el("div", "part text");
    box.append(last);
  }
  last.textContent += text;
  box.scrollIntoView({ block: "end" });
}

// Reasoning streams before the text of its round: a piece goes on the
// reasoning block the message ends with, or starts a new one.
function appendThinking(box, text) {
  let last = box.lastElementChild;
  if (!last || !last.classList.contains("thinking")) {
    last = el("details", "part thinking");
    last.append(el("summary", "", "reasoning"), el("div", "", ""));
    box.append(last);
  }
  last.lastElementChild.textContent += text;
}

function pretty(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// Draws a tool part (replacing the one with the same call id).
function renderTool(box, part) {
  let node = box.querySelector(`[data-call="${CSS.escape(part.toolCallId)}"]`);
  if (!node) {
    node = el("div", "part tool");
    node.dataset.call = part.toolCallId;
    box.append(node);
  }
  node.replaceChildren();
  node.dataset.state = part.state;
  const head = el("div");
  head.append(el("span", "name", `${part.toolName} `), el("span", "state", part.state));
  node.append(head, el("pre", "input", pretty(part.input)));
  if (part.state === "approval-requested") node.append(approvalButtons(part));
  if (part.state === "question-requested" && part.questions) node.append(questionForm(part));
  if (part.output !== undefined) node.append(el("pre", "output", pretty(part.output)));
  if (part.errorText) node.append(el("pre", "error", part.errorText));
  if (part.approval && part.approval.approved === false) {
    node.append(el("div", "error", `denied${part.approval.reason ? `: ${part.approval.reason}` : ""}`));
  }
  if (part.answers) {
    node.append(el("pre", "answers", part.answers.map((a) => `${a.id}: ${a.values.join(", ")}`).join("\n")));
  }
}

function approvalButtons(part) {
  const actions = el("div", "actions");
  for (const [decision, label] of [["approve", "Approve"], ["approveSession", "Approve for the session"], ["deny", "Deny"]]) {
    const button = el("button", `decide-${decision}`, label);
    button.type = "button";
    button.addEventListener("click", () => answer({ toolCallId: part.toolCallId, decision }, actions));
    actions.append(button);
  }
  return actions;
}

function questionForm(part) {
  const form = el("div", "actions");
  const picked = new Map();
  for (const q of part.questions) {
    const row = el("div", "question");
    row.append(el("div", "", q.question));
    picked.set(q.id, []);
    if (q.options && q.options.length) {
      for (const option of q.options) {
        const button = el("button", "option", option);
        button.type = "button";
        button.addEventListener("click", () => {
          const values = q.multiple ? [...picked.get(q.id), option] : [option];
          picked.set(q.id, values);
          button.disabled = true;
          if (!q.multiple || part.questions.length === 1) maybeSend();
        });
        row.append(button);
      }
    } else {
      const input = el("input", "free");
      input.addEventListener("input", () => picked.set(q.id, [input.value]));
      row.append(input);
    }
    form.append(row);
  }
  const send = el("button", "send-answers", "Answer");
  send.type = "button";
  send.addEventListener("click", () => maybeSend(true));
  form.append(send);
  function maybeSend(force) {
    const all = part.questions.every((q) => picked.get(q.id).length > 0);
    if (all && (force || part.questions.length === 1)) {
      const answers = part.questions.map((q) => ({ id: q.id, values: picked.get(q.id) }));
      answer({ toolCallId: part.toolCallId, answers }, form);
    }
  }
  return form;
}

async function answer(body, actions) {
  for (const button of actions.querySelectorAll("button")) button.disabled = true;
  try {
    await api("/api/chat/question", { body: { sessionId: page.sessionId, ...body } });
  } catch (error) {
    showError(error.message);
    for (const button of actions.querySelectorAll("button")) button.disabled = false;
  }
}

function renderPlan(plan) {
  const steps = plan && plan.state ? plan.state.steps : plan ? plan.steps : [];
  const mode = plan ? plan.mode : "agent";
  $("plan").hidden = !steps || steps.length === 0;
  $("plan-progress").textContent = plan ? `${plan.completed}/${plan.total}${plan.executing ? " (executing)" : ""}` : "";
  $("plan-steps").replaceChildren(...(steps || []).map((s) => el("li", s.status, s.title)));
  $("plan-actions").hidden = !(mode === "plan" && steps && steps.length && !plan.executing);
  $("mode").value = mode || "agent";
}

// The queue's texts, as the `queue` event carries them.
function renderQueue(steering, followUp) {
  const items = [
    ...steering.map((text) => el("li", "steer", `steer: ${text}`)),
    ...followUp.map((text) => el("li", "follow-up", `follow-up: ${text}`)),
  ];
  $("queue").hidden = items.length === 0;
  $("queue-items").replaceChildren(...items);
}

function renderParts(box, parts) {
  for (const part of parts) {
    if (part.type === "text") appendText(box, part.text);
    else if (part.type === "thinking") appendThinking(box, part.text);
    else if (part.type.startsWith("tool-")) renderTool(box, part);
    else if (part.type === "file") box.append(el("div", "part file", `[${part.mimeType}] ${part.ref}`));
  }
}

// --- The stream's events ------------------------------------------------

function onEvent(event) {
  switch (event.type) {
    case "start":
      if (event.sessionReset) showNote("That session could not be continued: a new session was started.");
      for (const d of event.diagnostics || []) showNote(`${d.kind}: ${d.path}: ${d.message}`);
      showSession(event.sessionId);
      if (!document.querySelector(`#sessions li[data-id="${CSS.escape(event.sessionId)}"]`)) loadSessions();
      assistantBox(event.id);
      setBusy(true);
      break;
    case "delta":
      appendText(assistantBox(event.messageId), event.text);
      break;
    case "thinking":
      appendThinking(assistantBox(event.messageId), event.text);
      break;
    case "tool":
      renderTool(assistantBox(event.messageId), event.part);
      break;
    case "plan":
      renderPlan(event);
      break;
    case "queue":
      renderQueue(event.steering, event.followUp);
      break;
    case "compaction":
      setStatus(event.phase === "start"
        ? `compacting the conversation (${event.reason})`
        : event.errorMessage ? `compaction failed: ${event.errorMessage}` : "conversation compacted");
      break;
    case "retry":
      setStatus(event.phase === "start"
        ? `the model is busy: retry ${event.attempt} in ${event.delayMs} ms (${event.errorMessage || ""})`
        : `retry ${event.attempt} ${event.success ? "went through" : "gave up"}`);
      break;
    case "state":
      setStatus(event.state.name.replace("_", " "));
      break;
    case "done":
      assistantBox(event.runId).dataset.finish = event.finishReason;
      setStatus(`turn ${event.finishReason}`);
      break;
    case "error":
      showError(event.message);
      break;
  }
}

// The session the page shows, also in the address (`/#sess_...`), so a
// reload or a shared link opens it again.
function showSession(id) {
  page.sessionId = id;
  if (id && location.hash !== `#${id}`) history.replaceState(null, "", `#${id}`);
  if (!id && location.hash) history.replaceState(null, "", location.pathname);
}

function setBusy(busy) {
  page.streaming = busy;
  $("stop").hidden = !busy;
}

// --- Actions ------------------------------------------------------------

async function send(text, extra = {}) {
  const body = { message: text, mode: $("mode").value, ...extra };
  if (page.sessionId) body.sessionId = page.sessionId;
  // While a turn runs the prompt waits in the queue (one `queue` line
  // answers); the stream already open shows what it causes.
  const queued = page.streaming;
  if (queued) body.streamingBehavior = $("behavior").value;
  if (text) addMessage("user", null, queued ? "you (queued)" : "you").append(el("div", "part text", text));
  if (!queued) setBusy(true);
  let ranTurns = false;
  try {
    await streamChat(body, (event) => {
      if (event.type === "start") ranTurns = true;
      onEvent(event);
    });
  } catch (error) {
    showError(error.message);
  } finally {
    // A prompt queued on a turn that had ended in the meantime ran turns
    // of its own in this stream.
    if (!queued || ranTurns) {
      setBusy(false);
      loadSessions();
    }
  }
}

async function loadSessions() {
  try {
    const { sessions } = await api("/api/chat/sessions");
    $("sessions").replaceChildren(...sessions.map((s) => {
      const item = el("li", s.sessionId === page.sessionId ? "current" : "");
      item.dataset.id = s.sessionId;
      const when = s.modifiedAt.replace("T", " ").slice(0, 16);
      // Named by its first message; by its id until it has one.
      item.title = s.sessionId;
      item.append(el("div", s.title ? "title" : "id", s.title || s.sessionId), el("div", "meta", `${s.status} · ${when}`));
      item.addEventListener("click", () => openSession(s.sessionId));
      return item;
    }));
  } catch (error) {
    setStatus(error.message);
  }
}

async function openSession(id) {
  try {
    const { sessionId, running, status, session, messages } = await api(`/api/chat/session?sessionId=${encodeURIComponent(id)}`);
    showSession(sessionId);
    page.assistants.clear();
    $("messages").replaceChildren();
    for (const message of messages) {
      const box = message.role === "assistant"
        ? assistantBox(message.id)
        : addMessage("user", message.id, message.author || "user");
      renderParts(box, message.parts);
    }
    renderPlan(session.plan ? { ...session.plan, mode: session.mode } : { mode: session.mode, steps: [] });
    const queued = session.queued_messages || [];
    renderQueue(
      queued.filter((q) => q.mode === "steer").map((q) => q.text),
      queued.filter((q) => q.mode === "follow_up").map((q) => q.text),
    );
    // A turn another page started runs on: prompts queue behind it, and
    // Stop aborts it. Its progress shows when the session is opened again.
    setStatus(running ? "a turn is running" : status);
    setBusy(running);
    loadSessions();
  } catch (error) {
    showError(error.message);
  }
}

function newChat() {
  showSession(null);
  page.assistants.clear();
  $("messages").replaceChildren();
  renderPlan(null);
  renderQueue([], []);
  setStatus("new chat");
  loadSessions();
}

document.addEventListener("DOMContentLoaded", () => {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("prompt").value.trim();
    if (!text) return;
    $("prompt").value = "";
    send(text);
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit();
  });
  $("stop").addEventListener("click", async () => {
    try {
      await api("/api/chat/abort", { body: { sessionId: page.sessionId } });
    } catch (error) {
      showError(error.message);
    }
  });
  $("new-chat").addEventListener("click", newChat);
  $("plan-execute").addEventListener("click", () => send("", { planAction: "execute", mode: "agent" }));
  $("plan-refine").addEventListener("click", () => {
    const text = $("prompt").value.trim();
    if (!text) return setStatus("write what to change in the plan first");
    $("prompt").value = "";
    send(text, { planAction: "refine", mode: "plan" });
  });
  setStatus("ready");
  if (location.hash.startsWith("#sess_")) openSession(decodeURIComponent(location.hash.slice(1)));
  else loadSessions();
});
