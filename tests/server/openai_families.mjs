// openai_families.mjs — a Llama 3 or Qwen 3 model (random weights, the family's real vocabulary and chat template)
// through a running `tern serve` with the official `openai` npm client: chat, streaming equal to non-streaming, a
// forced tool call in the family's own markup read back as OpenAI tool_calls (plain and streamed), and a JSON
// Schema reply that validates (ajv). Whatever a random model writes, the grammar alone must make the call and the
// document valid, and the family's parser must read the call back.
//   node openai_families.mjs http://127.0.0.1:PORT MODEL_ID
// Then the reasoning through Anthropic's messages with the official `@anthropic-ai/sdk`: thinking and text blocks,
// plain and streamed.
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI } = require("openai");
const { Anthropic } = require("@anthropic-ai/sdk");
const Ajv = require("ajv");

const [base, modelId] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
const ajv = new Ajv({ strict: false });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

const messages = [
	{ role: "system", content: "Be brief." },
	{ role: "user", content: "What is the weather in Paris?" },
];

// chat, and streaming giving the same greedy text
const req = { model: modelId, messages, max_tokens: 12, temperature: 0 };
const r1 = await client.chat.completions.create(req);
const text = r1.choices[0].message.content;
check(typeof text === "string" && r1.choices[0].finish_reason === "length", "a greedy reply of max_tokens");
check(r1.usage.completion_tokens === 12, "usage.completion_tokens");
let streamed = "";
for await (const chunk of await client.chat.completions.create({ ...req, stream: true }))
	streamed += chunk.choices[0]?.delta?.content ?? "";
check(streamed === text, `streaming gives the same text: ${JSON.stringify(streamed)} vs ${JSON.stringify(text)}`);

// a forced tool call, written in the family's markup and read back
const params = {
	type: "object",
	properties: { city: { type: "string", enum: ["Paris", "Rome"] }, days: { type: "integer", enum: [1, 2, 3] } },
	required: ["city", "days"],
	additionalProperties: false,
};
const tools = [
	{ type: "function", function: { name: "get_weather", description: "Weather for a city", parameters: params } },
	{ type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } },
];
const valid = ajv.compile(params);
const forced = { model: modelId, messages, tools, tool_choice: { type: "function", function: { name: "get_weather" } },
	max_tokens: 200, temperature: 0 };
const r2 = await client.chat.completions.create(forced);
const call = r2.choices[0].message.tool_calls?.[0];
check(r2.choices[0].finish_reason === "tool_calls", `finish_reason tool_calls, got ${r2.choices[0].finish_reason}`);
check(call?.type === "function" && call.function.name === "get_weather", "the named tool is called");
check(valid(JSON.parse(call.function.arguments)), `arguments validate: ${call.function.arguments}`);
check(!r2.choices[0].message.content, "no markup left in the content");

const s2 = await client.chat.completions.create({ ...forced, tool_choice: "required", stream: true });
const parts = {};
let finish = null;
for await (const chunk of s2) {
	for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
		parts[tc.index] ??= { name: "", arguments: "" };
		parts[tc.index].name += tc.function?.name ?? "";
		parts[tc.index].arguments += tc.function?.arguments ?? "";
	}
	finish = chunk.choices[0]?.finish_reason ?? finish;
}
check(finish === "tool_calls" && parts[0], "a streamed forced call");
const args = JSON.parse(parts[0].arguments);
check(parts[0].name === "get_time" ? typeof args === "object" : valid(args), `streamed arguments: ${parts[0].arguments}`);

// a JSON Schema reply
const r3 = await client.chat.completions.create({
	model: modelId, messages, max_tokens: 200, temperature: 0,
	response_format: { type: "json_schema", json_schema: { name: "weather", schema: params, strict: true } },
});
check(valid(JSON.parse(r3.choices[0].message.content)), `the reply validates: ${r3.choices[0].message.content}`);

// reasoning in the family's <think> markup (written under a grammar, as a random model would not) comes back as
// reasoning_content beside the answer, plain and streamed
const thinking = { model: modelId, messages, max_tokens: 40, temperature: 0,
	grammar: 'root ::= "<think>" [a-z]{2,8} "</think>" [a-z]{2,8}' };
const r4 = await client.chat.completions.create(thinking);
const m4 = r4.choices[0].message;
check(/^[a-z]{2,8}$/.test(m4.reasoning_content ?? "") && /^[a-z]{2,8}$/.test(m4.content ?? ""),
	`reasoning apart from content: ${JSON.stringify(m4)}`);
let reasoning = "", answer = "";
for await (const chunk of await client.chat.completions.create({ ...thinking, stream: true })) {
	reasoning += chunk.choices[0]?.delta?.reasoning_content ?? "";
	answer += chunk.choices[0]?.delta?.content ?? "";
}
check(reasoning === m4.reasoning_content && answer === m4.content, "streamed reasoning and answer");

// the same through Anthropic's messages: a thinking block, then a text block, plain and streamed
const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0, timeout: 300000 });
const amsg = { model: modelId, max_tokens: 40, temperature: 0, system: "Be brief.",
	messages: [{ role: "user", content: "What is the weather in Paris?" }],
	thinking: { type: "enabled", budget_tokens: 1024 }, grammar: thinking.grammar };
const a1 = await anthropic.messages.create(amsg);
const kinds = a1.content.map((b) => b.type).join(",");
check(kinds === "thinking,text" && /^[a-z]{2,8}$/.test(a1.content[0].thinking) && /^[a-z]{2,8}$/.test(a1.content[1].text),
	`thinking and text blocks: ${JSON.stringify(a1.content)}`);
let athinking = "", atext = "";
for await (const ev of await anthropic.messages.create({ ...amsg, stream: true })) {
	if (ev.type === "content_block_delta" && ev.delta.type === "thinking_delta") athinking += ev.delta.thinking;
	if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") atext += ev.delta.text;
}
check(athinking === a1.content[0].thinking && atext === a1.content[1].text, "streamed thinking and text");

console.log(`ok ${checks} checks`);
