// A plain JavaScript port of the projection rules of `build_messages`
// (crates/dispatch/src/projection.rs), written the way a JavaScript host
// would write them, to compare the Rust projection with. It is a measuring
// tool, not part of the library.
//
// Reads a workload written by `cargo bench --bench dispatch`
// (`<stem>.jsonl`: a first line `{"self", "names"}`, then the thread's
// entries; `<stem>.messages.json`: what the Rust projection gives), checks
// that its own projection gives the same JSON, then times it.
//
//   node benches/js/build_messages.mjs target/bench-workloads/chat-10k [runs]

import { readFileSync } from "node:fs";

const MISSING_RESULT_TEXT = "No result provided";
const COMPACTION_PREFIX =
  "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUFFIX = "\n</summary>";

const isFailure = (reason) => reason === "error" || reason === "aborted";
const isFinal = (m) =>
  !isFailure(m.stopReason) && !m.content.some((b) => b.type === "toolCall");

const zeroUsage = () => ({
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});

export function buildMessages(selfId, entries, names) {
  const nameOf = (id) => names[id] ?? id;
  // Entries whose seq is above every earlier one's.
  const fresh = [];
  let last = 0;
  for (const e of entries) {
    if (e.seq > last) {
      last = e.seq;
      fresh.push(e);
    }
  }
  let compaction = null;
  for (const e of fresh) {
    if (e.type === "compaction" && e.author === selfId) compaction = e;
  }
  const messages = [];
  const openCalls = new Map(); // call id -> index of its back-filled result
  let cutoff = 0;
  if (compaction) {
    messages.push({
      role: "user",
      content: [{ type: "text", text: COMPACTION_PREFIX + compaction.summary + COMPACTION_SUFFIX }],
      timestamp: compaction.at,
    });
    cutoff = Math.min(compaction.upto, compaction.seq);
  }

  const fillMissing = (slot) => {
    const r = messages[slot];
    if (r.role === "toolResult" && r.content.length === 0) {
      r.content = [{ type: "text", text: MISSING_RESULT_TEXT }];
    }
  };

  const pushUserTurn = (text, images, at) => {
    const block = { type: "text", text };
    const prev = messages[messages.length - 1];
    if (prev && prev.role === "user") {
      if (typeof prev.content === "string") {
        prev.content = [{ type: "text", text: prev.content }, block, ...images];
      } else {
        prev.content.push(block, ...images);
      }
      return;
    }
    messages.push({ role: "user", content: [block, ...images], timestamp: at });
  };

  const label = (author, text) => (text === "" ? `[${nameOf(author)}]:` : `[${nameOf(author)}]: ${text}`);

  for (const e of fresh) {
    if (e.seq <= cutoff) continue;
    const own = e.author === selfId;
    switch (e.type) {
      case "chat": {
        const parts = e.parts ?? [];
        if (own) {
          const content = [];
          if (e.text !== "") content.push({ type: "text", text: e.text });
          for (const p of parts) {
            content.push(p.type === "text" ? p : { type: "text", text: `[image: ${p.mimeType}]` });
          }
          if (content.length === 0) break;
          messages.push({
            role: "assistant",
            content,
            api: "roundtable",
            provider: "roundtable",
            model: "chat",
            usage: zeroUsage(),
            stopReason: "stop",
            timestamp: e.at,
          });
          break;
        }
        let text = label(e.author, e.text);
        for (const p of parts) if (p.type === "text") text += "\n" + p.text;
        pushUserTurn(text, parts.filter((p) => p.type === "image"), e.at);
        break;
      }
      case "pi.assistant": {
        const m = e.message;
        if (own) {
          if (isFailure(m.stopReason)) break;
          messages.push(m);
          for (const b of m.content) {
            if (b.type !== "toolCall") continue;
            const older = openCalls.get(b.id);
            if (older !== undefined) fillMissing(older);
            openCalls.set(b.id, messages.length);
            messages.push({
              role: "toolResult",
              toolCallId: b.id,
              toolName: b.name,
              content: [],
              isError: true,
              timestamp: m.timestamp,
            });
          }
        } else if (isFinal(m)) {
          const texts = m.content.filter((b) => b.type === "text" && b.text !== "").map((b) => b.text);
          if (texts.length === 0) break;
          pushUserTurn(label(e.author, texts.join("\n")), [], e.at);
        }
        break;
      }
      case "pi.tool_result": {
        if (!own) break;
        const slot = openCalls.get(e.message.toolCallId);
        if (slot !== undefined) {
          openCalls.delete(e.message.toolCallId);
          messages[slot] = e.message;
        }
        break;
      }
    }
  }
  for (const slot of openCalls.values()) fillMissing(slot);
  return messages;
}

// Stored entries carry `role` inside `message` only once they are messages;
// the Rust `Message` writes `role` first.
const withRole = (role, m) => ({ role, ...m });

function load(stem) {
  const lines = readFileSync(`${stem}.jsonl`, "utf8").split("\n").filter((l) => l.trim() !== "");
  const head = JSON.parse(lines[0]);
  const entries = lines.slice(1).map((l) => {
    const e = JSON.parse(l);
    if (e.type === "pi.assistant") e.message = withRole("assistant", e.message);
    if (e.type === "pi.tool_result") e.message = withRole("toolResult", e.message);
    return e;
  });
  return { self: head.self, names: head.names, entries };
}

function main() {
  const stem = process.argv[2];
  const runs = Number(process.argv[3] ?? 300);
  if (!stem) {
    console.error("usage: node build_messages.mjs <workload stem> [runs]");
    process.exit(2);
  }
  const { self, names, entries } = load(stem);
  const expected = readFileSync(`${stem}.messages.json`, "utf8");
  const got = JSON.stringify(buildMessages(self, entries, names));
  if (got !== expected) {
    let i = 0;
    while (got[i] === expected[i]) i++;
    console.error(`the port's messages differ from Rust's at byte ${i}:`);
    console.error(`  js:   ${got.slice(Math.max(0, i - 80), i + 80)}`);
    console.error(`  rust: ${expected.slice(Math.max(0, i - 80), i + 80)}`);
    process.exit(1);
  }
  // Each run projects fresh entries: the rules mutate the messages they
  // build (back-fills, merged user turns) but never the entries, except
  // that own messages are shared, as in Rust. Warm up, then time each run.
  const times = [];
  let sink = 0;
  for (let i = 0; i < runs + 50; i++) {
    const start = process.hrtime.bigint();
    const messages = buildMessages(self, entries, names);
    const elapsed = Number(process.hrtime.bigint() - start);
    sink += messages.length;
    if (i >= 50) times.push(elapsed);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(
    `${stem}: ${entries.length} entries, ${sink / (runs + 50)} messages; ` +
      `median ${(median / 1e6).toFixed(3)} ms over ${runs} runs ` +
      `(min ${(times[0] / 1e6).toFixed(3)} ms), node ${process.version}`,
  );
}

main();
