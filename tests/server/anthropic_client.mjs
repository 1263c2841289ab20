// anthropic_client.mjs — drives a running `tern serve` with the official `@anthropic-ai/sdk` client (resolved
// from tests/oracles/node_modules): messages non-streaming and streaming (the raw event grammar and the SDK's
// MessageStream), system prompts, stop_sequences, tools, count_tokens, and errors as typed exceptions.
//   node anthropic_client.mjs http://127.0.0.1:PORT MODEL_ID
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { Anthropic } = require("@anthropic-ai/sdk");

const [base, modelId] = process.argv.slice(2);
const client = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0, timeout: 300000 });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

const req = {
	model: modelId,
	max_tokens: 8,
	temperature: 0,
	system: "Be brief.",
	messages: [{ role: "user", content: "What is 2+2?" }],
};
const m1 = await client.messages.create(req);
check(m1.type === "message" && m1.role === "assistant" && m1.id.startsWith("msg_"), "message shape");
check(m1.model === modelId, "model echoed");
check(m1.content.length === 1 && m1.content[0].type === "text", "one text block");
check(m1.stop_reason === "max_tokens" && m1.stop_sequence === null, "stop_reason max_tokens");
check(m1.usage.output_tokens === 8 && m1.usage.input_tokens + (m1.usage.cache_read_input_tokens ?? 0) > 0, "usage");
const text = m1.content[0].text;

// raw streaming events follow Anthropic's grammar
const types = [];
let streamed = "";
for await (const ev of await client.messages.create({ ...req, stream: true })) {
	types.push(ev.type);
	if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") streamed += ev.delta.text;
	if (ev.type === "message_delta") check(ev.delta.stop_reason === "max_tokens" && ev.usage.output_tokens === 8, "message_delta");
}
check(types[0] === "message_start" && types.at(-1) === "message_stop" && types.at(-2) === "message_delta", `event order ${types}`);
check(types.includes("content_block_start") && types.includes("content_block_stop"), "block events");
check(streamed === text, "streamed text equals the non-streamed text");

// the SDK's MessageStream accumulates the same message
const final = await client.messages.stream(req).finalMessage();
check(final.content[0].text === text && final.stop_reason === "max_tokens", "MessageStream.finalMessage");

// stop_sequences: cut at the first occurrence, reported as such
const cps = Array.from(text);
if (cps.length >= 4) {
	const stop = cps.slice(2, 4).join("");
	const at = text.indexOf(stop);
	const m2 = await client.messages.create({ ...req, stop_sequences: [stop] });
	check(m2.stop_reason === "stop_sequence" && m2.stop_sequence === stop, `stop_sequence reported (${JSON.stringify(stop)})`);
	check((m2.content[0]?.text ?? "") === text.slice(0, at), "text ends before the stop sequence");
}

// tools are accepted and declared in the prompt
const tools = [{ name: "get_weather", description: "Weather for a city", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
const m3 = await client.messages.create({ ...req, tools, tool_choice: { type: "auto" } });
check(m3.usage.input_tokens + (m3.usage.cache_read_input_tokens ?? 0) > m1.usage.input_tokens + (m1.usage.cache_read_input_tokens ?? 0), "tools reach the prompt");
const m4 = await client.messages.create({
	...req,
	tools,
	messages: [
		{ role: "user", content: "Weather in Paris?" },
		{ role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
		{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "sunny" }] },
	],
});
check(m4.role === "assistant", "tool_result round trip accepted");

// count_tokens matches what messages.create reports
const ct = await client.messages.countTokens({ model: modelId, system: req.system, messages: req.messages });
check(ct.input_tokens === m1.usage.input_tokens + (m1.usage.cache_read_input_tokens ?? 0), "count_tokens");

// errors
try {
	await client.messages.create({ model: modelId, messages: req.messages });
	assert.fail("missing max_tokens accepted");
} catch (e) {
	check(e instanceof Anthropic.BadRequestError && e.status === 400 && /max_tokens/.test(e.message), `missing max_tokens: ${e.message}`);
}
try {
	await client.messages.create({ ...req, messages: [{ role: "system", content: "x" }] });
	assert.fail("system role accepted");
} catch (e) {
	check(e instanceof Anthropic.BadRequestError && /system/.test(e.message), `system role: ${e.message}`);
}

console.log(`ok ${checks} checks`);
