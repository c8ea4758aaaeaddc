// Captures what pi-ai (@mariozechner/pi-ai 0.73.1) makes of a recorded wire
// stream, for the comparison test `pi_parity` in ../conformance.rs.
//
// Usage (pi-ai installed under PI_DIR/node_modules):
//   node capture.mjs <api> <fixture.sse> <out.json> [request-out.json] [thinking-level]
// where <api> is openai-completions, anthropic-messages, openai-responses or
// google-generative-ai. PI_CONTEXT names another context file than
// context.json (a history of the API's own messages, for request captures).
//
// For google-generative-ai, `Date.now` is 0 while pi runs: pi names a
// Gemini tool call that has no id `<name>_<Date.now()>_<counter>`, and the
// comparison decodes with timestamp 0.
//
// With a thinking level the model is a reasoning model and pi is asked for
// that level (`streamSimple`'s `reasoning` option).
//
// It serves the fixture on a loopback port, points a pi `Model` literal at
// it, runs `streamSimple`, and writes the final message and the event types
// (timestamps zeroed) plus, optionally, the request body pi sent.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [api, fixture, out, requestOut, thinking] = process.argv.slice(2);
const piDir = process.env.PI_DIR ?? "/tmp/pi";
const pi = await import(pathToFileURL(path.join(piDir, "node_modules/@mariozechner/pi-ai/dist/index.js")).href);
const body = fs.readFileSync(fixture);
let request = null;
const server = http.createServer((req, res) => {
  console.error(`${req.method} ${req.url}`);
  let data = "";
  req.on("data", (c) => (data += c));
  req.on("end", () => {
    request = JSON.parse(data);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(body);
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const port = server.address().port;
const models = {
  "anthropic-messages": ["claude-sonnet-4-5", "anthropic", `http://127.0.0.1:${port}`],
  "openai-completions": ["gpt-4o-mini", "openai", `http://127.0.0.1:${port}/v1`],
  "openai-responses": ["gpt-5-mini", "openai", `http://127.0.0.1:${port}/v1`],
  "google-generative-ai": ["gemini-2.5-flash", "google", `http://127.0.0.1:${port}/v1beta`],
};
const [id, provider, baseUrl] = models[api];
const model = {
  id,
  name: "fixture",
  api,
  provider,
  baseUrl,
  reasoning: Boolean(thinking),
  input: ["text"],
  cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  contextWindow: 200000,
  maxTokens: 64000,
};
if (api === "google-generative-ai") Date.now = () => 0;
const context = JSON.parse(fs.readFileSync(process.env.PI_CONTEXT ?? new URL("./context.json", import.meta.url)));
const events = [];
let final = null;
for await (const e of pi.streamSimple(model, context, { apiKey: "test-key", maxRetries: 0, ...(thinking ? { reasoning: thinking } : {}) })) {
  events.push(e.type);
  if (e.type === "done") final = e.message;
  if (e.type === "error") final = e.error;
}
final.timestamp = 0;
fs.writeFileSync(out, JSON.stringify({ events, message: final }, null, 1) + "\n");
if (requestOut) fs.writeFileSync(requestOut, JSON.stringify(request, null, 1) + "\n");
server.close();
