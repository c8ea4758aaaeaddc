// The room page: a client of /v1/rooms. It signs in with the cookie the
// one-time ?token= link set, reads the room's latest entries, follows its
// event stream (each entry one SSE message named by its type) and loads
// older entries as the reader scrolls up. Text goes in as text, never HTML.
"use strict";

const EVENT_TYPES = [
  "chat", "chat.chunk", "pi.assistant", "pi.tool_result", "turn.started",
  "turn.ended", "turn.failed", "signal.room.opened", "signal.room.joined",
  "signal.room.left", "signal.room.override", "signal.room.halted",
  "signal.approval_requested", "signal.approval_decided",
];
const PAGE = 50;

const state = { room: null, members: [], turns: new Map(), first: null, more: false, loading: false };
const $ = (id) => document.getElementById(id);

async function api(path, options = {}) {
  const init = { credentials: "same-origin", ...options };
  if (init.body !== undefined) {
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(init.body);
  }
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error?.message || body.message || response.statusText);
  return body;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function status(text) { $("status").textContent = text; }

// One colour per participant, the same on every page.
function colour(id) {
  let hash = 0;
  for (const c of id) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${hash % 360}, 55%, 42%)`;
}

function nameOf(id) {
  return state.members.find((m) => m.id === id)?.name || id;
}

function entryBox(author, target) {
  const box = el("div", "entry");
  box.style.setProperty("--who", colour(author));
  box.dataset.author = author;
  box.append(el("div", "who", nameOf(author)));
  target.append(box);
  return box;
}

function notice(text, target) {
  const line = el("div", "notice", text);
  target.append(line);
  return line;
}

// The box of a bot's turn, made when first needed.
function turnBox(entry, target) {
  let box = state.turns.get(entry.turn);
  if (!box) {
    box = entryBox(entry.author, target);
    box.classList.add("turn", "streaming");
    box.append(el("div", "parts"), el("div", "text"));
    state.turns.set(entry.turn, box);
  }
  return box;
}

function onChunk(entry, target) {
  const box = turnBox(entry, target);
  if (entry.kind === "thinking") {
    let details = box.querySelector(".parts > details.live");
    if (!details) {
      details = el("details", "thinking live");
      details.append(el("summary", "", "thinking"), el("span"));
      box.querySelector(".parts").append(details);
    }
    details.querySelector("span").textContent += entry.delta;
  } else {
    box.querySelector(":scope > .text").textContent += entry.delta;
  }
}

// A finished assistant message stands in for the chunks that streamed it.
function onAssistant(entry, target) {
  const box = turnBox(entry, target);
  const parts = box.querySelector(".parts");
  parts.querySelector("details.live")?.remove();
  const live = box.querySelector(":scope > .text");
  for (const block of entry.message?.content || []) {
    if (block.type === "thinking" && block.thinking) {
      const details = el("details", "thinking");
      details.append(el("summary", "", "thinking"), el("span", "", block.thinking));
      parts.append(details);
    } else if (block.type === "text" && block.text) {
      parts.append(el("div", "text", block.text));
    } else if (block.type === "toolCall") {
      parts.append(el("div", "tool", `⚙ ${block.name}(${JSON.stringify(block.arguments || {})})`));
    }
  }
  live.textContent = "";
}

function onToolResult(entry, target) {
  const box = turnBox(entry, target);
  const message = entry.message || {};
  const text = (message.content || []).map((b) => b.text || "").join(" ");
  const mark = message.isError ? "✗" : "↳";
  box.querySelector(".parts").append(el("div", "tool", `${mark} ${text.slice(0, 160)}`));
}

function onApproval(entry, target) {
  const data = entry.data || {};
  const line = notice(`${nameOf(entry.author)} asks to run ${data.tool}`, target);
  line.dataset.call = data.call_id;
  for (const decision of ["approve", "deny"]) {
    const button = el("button", `decide-${decision}`, decision);
    button.type = "button";
    button.onclick = () => decide(data, decision).catch((e) => status(e.message));
    line.append(button);
  }
}

function onDecided(entry) {
  const data = entry.data || {};
  const line = document.querySelector(`.notice[data-call="${CSS.escape(data.call_id || "")}"]`);
  if (line) line.textContent = `${data.tool}: ${data.verdict} by ${nameOf(entry.author)}`;
}

const RENDER = {
  "chat": (e, t) => entryBox(e.author, t).append(el("div", "text", e.text)),
  "chat.chunk": onChunk,
  "pi.assistant": onAssistant,
  "pi.tool_result": onToolResult,
  "turn.started": (e, t) => turnBox(e, t),
  "turn.ended": (e, t) => turnBox(e, t).classList.remove("streaming"),
  "turn.failed": (e, t) => { const b = turnBox(e, t); b.classList.remove("streaming"); b.classList.add("failed"); },
  "signal.room.opened": (e, t) => notice(`${nameOf(e.author)} opened the room`, t),
  "signal.room.joined": (e, t) => notice(`${nameOf(e.data?.member?.id)} joined`, t),
  "signal.room.left": (e, t) => notice(`${nameOf(e.data?.member)} left`, t),
  "signal.room.override": (e, t) => notice(`${nameOf(e.data?.bot)}: ${e.data?.mode || "as usual"}`, t),
  "signal.room.halted": (e, t) => notice(`the bots paused (${e.data?.halt}); a message from a person wakes them again`, t),
  "signal.approval_requested": onApproval,
  "signal.approval_decided": (e) => onDecided(e),
};

function render(entry, target) {
  RENDER[entry.type]?.(entry, target);
  if (entry.type.startsWith("signal.room.") && entry.type !== "signal.room.halted") loadRoster();
}

async function loadRoster() {
  const room = await api(`/v1/rooms/${state.room}`);
  state.members = room.members;
  $("title").textContent = room.title;
  const list = $("roster");
  list.replaceChildren();
  for (const member of room.members) {
    const item = el("li");
    item.style.color = colour(member.id);
    item.append(el("span", "name", member.name), el("span", "kind", member.kind));
    if (member.kind === "bot") item.append(muteButton(member, room.overrides[member.id]));
    list.append(item);
  }
}

function muteButton(bot, mode) {
  const muted = mode === "mute";
  const button = el("button", "mute", muted ? "unmute" : "mute");
  button.type = "button";
  button.dataset.bot = bot.id;
  button.onclick = async () => {
    const path = `/v1/rooms/${state.room}/overrides/${encodeURIComponent(bot.id)}`;
    await (muted ? api(path, { method: "DELETE" }) : api(path, { method: "PUT", body: { mode: "mute" } }))
      .catch((e) => status(e.message));
    loadRoster();
  };
  return button;
}

async function decide(data, decision) {
  await api(`/v1/rooms/${state.room}/approvals`, {
    method: "POST", body: { call_id: data.call_id, turn: data.turn, decision },
  });
}

// The latest page, then the live stream after it.
async function openRoom() {
  await loadRoster();
  const tip = await api(`/v1/rooms/${state.room}/entries?limit=1`);
  const page = await api(`/v1/rooms/${state.room}/entries?before=${tip.last_seq + 1}&limit=${PAGE}`);
  for (const entry of page.entries) render(entry, $("messages"));
  state.first = page.entries[0]?.seq ?? tip.last_seq + 1;
  state.more = page.more;
  $("messages").scrollTop = $("messages").scrollHeight;
  follow(tip.last_seq);
}

function follow(after) {
  const source = new EventSource(`/v1/rooms/${state.room}/events?after=${after}`);
  const messages = $("messages");
  const onEvent = (event) => {
    const atEnd = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 40;
    render(JSON.parse(event.data), messages);
    if (atEnd) messages.scrollTop = messages.scrollHeight;
  };
  for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
  source.onopen = () => status("live");
  source.onerror = () => status("reconnecting…");
}

// Older entries, above the first one shown, keeping the view in place.
async function loadOlder() {
  if (!state.more || state.loading) return;
  state.loading = true;
  const messages = $("messages");
  const page = await api(`/v1/rooms/${state.room}/entries?before=${state.first}&limit=${PAGE}`);
  const older = document.createDocumentFragment();
  for (const entry of page.entries) render(entry, older);
  const height = messages.scrollHeight;
  messages.prepend(older);
  messages.scrollTop += messages.scrollHeight - height;
  state.first = page.entries[0]?.seq ?? state.first;
  state.more = page.more;
  state.loading = false;
}

// @-mention completion from the roster's handles.
function mentionAt() {
  const text = $("text");
  const before = text.value.slice(0, text.selectionStart);
  const match = before.match(/@([\w.-]*)$/);
  return match ? { word: match[1], start: before.length - match[0].length } : null;
}

function showMentions() {
  const list = $("mentions");
  const at = mentionAt();
  const handles = state.members.filter((m) => m.handle).map((m) => m.handle);
  const found = at ? handles.filter((h) => h.toLowerCase().startsWith(at.word.toLowerCase())) : [];
  list.replaceChildren(...found.map((handle, i) => {
    const item = el("li", i === 0 ? "active" : "", `@${handle}`);
    item.onmousedown = (event) => { event.preventDefault(); complete(handle); };
    return item;
  }));
  list.hidden = found.length === 0;
}

function complete(handle) {
  const text = $("text");
  const at = mentionAt();
  if (!at) return;
  const rest = text.value.slice(text.selectionStart);
  text.value = `${text.value.slice(0, at.start)}@${handle} ${rest}`;
  const caret = at.start + handle.length + 2;
  text.setSelectionRange(caret, caret);
  $("mentions").hidden = true;
  text.focus();
}

async function send(event) {
  event?.preventDefault();
  const text = $("text");
  if (!text.value.trim()) return;
  try {
    await api(`/v1/rooms/${state.room}/messages`, { method: "POST", body: { text: text.value } });
    text.value = "";
  } catch (e) {
    status(e.message);
  }
}

function onKey(event) {
  const list = $("mentions");
  if (!list.hidden && (event.key === "Tab" || event.key === "Enter")) {
    event.preventDefault();
    complete(list.querySelector("li.active").textContent.slice(1));
  } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    send(event);
  }
}

async function listRooms() {
  const { rooms } = await api("/v1/rooms?limit=100");
  $("rooms").replaceChildren(...rooms.map((room) => {
    const item = el("li", room.id === state.room ? "current" : "");
    const link = el("a", "", room.title);
    link.href = `/room?id=${encodeURIComponent(room.id)}`;
    item.append(link);
    return item;
  }));
  return rooms;
}

async function start() {
  $("composer").addEventListener("submit", send);
  $("text").addEventListener("input", showMentions);
  $("text").addEventListener("keydown", onKey);
  $("messages").addEventListener("scroll", () => {
    if ($("messages").scrollTop < 40) loadOlder().catch((e) => status(e.message));
  });
  state.room = new URLSearchParams(location.search).get("id");
  const rooms = await listRooms();
  state.room = state.room || rooms[0]?.id || null;
  if (!state.room) return status("no room yet: open one with POST /v1/rooms");
  await listRooms();
  await openRoom();
}

start().catch((e) => status(e.message));
