// replay_sdk.mjs — serves replies recorded by test_server_replies (chat, messages and responses, .sse and .json, in
// DIR) over a loopback HTTP server and reads them with the official `openai` and
// `@anthropic-ai/sdk` clients, whose own stream accumulators must rebuild the tool call, the text and the
// thinking exactly as tern meant them.
//   node replay_sdk.mjs DIR
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI } = require("openai");
const { Anthropic } = require("@anthropic-ai/sdk");

const dir = process.argv[2];
const files = Object.fromEntries(["chat.sse", "chat.json", "messages.sse", "messages.json", "responses.sse", "responses.json"].map((f) => [f, readFileSync(join(dir, f))]));
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

const server = createServer((req, res) => {
	let body = "";
	req.on("data", (d) => (body += d));
	req.on("end", () => {
		const stream = JSON.parse(body).stream === true;
		const kind = req.url.startsWith("/v1/messages") ? "messages" : req.url.startsWith("/v1/responses") ? "responses" : "chat";
		const name = kind + (stream ? ".sse" : ".json");
		res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" });
		res.end(files[name]);
	});
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const base = `http://127.0.0.1:${server.address().port}`;

try {
	const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
	const req = { model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }] };
	// streaming, through the SDK's accumulator
	const final = await openai.chat.completions.stream(req).finalChatCompletion();
	const msg = final.choices[0].message;
	check(final.choices[0].finish_reason === "tool_calls", "stream: finish_reason tool_calls");
	check(msg.content === "Checking the weather.", `stream: content ${JSON.stringify(msg.content)}`);
	check(msg.tool_calls.length === 1 && msg.tool_calls[0].function.name === "get_weather", "stream: one get_weather call");
	check(msg.tool_calls[0].id.startsWith("call_"), "stream: call id");
	assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: "Paris", days: 3 });
	checks++;
	// non-streaming
	const plain = await openai.chat.completions.create(req);
	check(plain.choices[0].message.tool_calls[0].function.name === "get_weather", "non-stream: tool call");
	assert.deepEqual(JSON.parse(plain.choices[0].message.tool_calls[0].function.arguments), { city: "Paris", days: 3 });
	checks++;
	check(plain.choices[0].message.reasoning_content === "Let me check.", "non-stream: reasoning_content");

	// Responses: the stream helper's accumulator and the plain reply
	const rreq = { model: "m", input: "Weather in Paris?", tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }] };
	const fr = await openai.responses.stream(rreq).finalResponse();
	check(fr.output.map((o) => o.type).join(",") === "reasoning,message,function_call", `responses stream: items ${fr.output.map((o) => o.type)}`);
	check(fr.output[0].content[0].text === "Let me check.", "responses stream: reasoning text");
	check(fr.output_text === "Checking the weather.", `responses stream: output_text ${JSON.stringify(fr.output_text)}`);
	check(fr.output[2].name === "get_weather" && fr.output[2].call_id.startsWith("call_"), "responses stream: function_call");
	assert.deepEqual(JSON.parse(fr.output[2].arguments), { city: "Paris", days: 3 });
	checks++;
	const pr = await openai.responses.create(rreq);
	check(pr.output_text === "Checking the weather." && pr.output[2].arguments === fr.output[2].arguments, "responses: plain reply");

	const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0 });
	const areq = { model: "m", max_tokens: 50, messages: [{ role: "user", content: "Weather in Paris?" }] };
	const fm = await anthropic.messages.stream(areq).finalMessage();
	check(fm.stop_reason === "tool_use", "messages stream: stop_reason tool_use");
	check(fm.content.map((b) => b.type).join(",") === "thinking,text,tool_use", `messages stream: blocks ${fm.content.map((b) => b.type)}`);
	check(fm.content[0].thinking === "Let me check.", "messages stream: thinking text");
	check(fm.content[1].text === "Checking the weather.", "messages stream: text");
	check(fm.content[2].name === "get_weather" && fm.content[2].id.startsWith("toolu_"), "messages stream: tool_use");
	assert.deepEqual(fm.content[2].input, { city: "Paris", days: 3 });
	checks++;
	check(fm.usage.output_tokens === 16, "messages stream: usage");
	const am = await anthropic.messages.create(areq);
	assert.deepEqual(am.content[2].input, { city: "Paris", days: 3 });
	checks++;
} finally {
	server.close();
}
console.log(`ok ${checks} checks`);
