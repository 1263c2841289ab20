// openai_client.mjs — drives a running `tern serve` with the official `openai` npm client (resolved from
// tests/oracles/node_modules): models, chat (non-streaming, streaming, the stream helper), logprobs, tools,
// seeds, completions, and errors surfacing as the client's typed exceptions. The model is the random-weight demo
// model, so checks compare the server with itself (greedy streaming == non-streaming) and with exact counts.
//   node openai_client.mjs http://127.0.0.1:PORT MODEL_ID
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI } = require("openai");

const [base, modelId] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

// models
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === modelId, "models.list returns the served model");
const one = await client.models.retrieve(modelId);
check(one.id === modelId && one.object === "model", "models.retrieve");

// chat, non-streaming
const req = {
	model: modelId,
	messages: [
		{ role: "system", content: "Be brief." },
		{ role: "user", content: "What is 2+2?" },
	],
	max_tokens: 8,
	temperature: 0,
};
const r1 = await client.chat.completions.create(req);
const c1 = r1.choices[0];
check(r1.object === "chat.completion" && r1.model === modelId && r1.id.startsWith("chatcmpl-"), "chat.completion shape");
check(c1.message.role === "assistant" && typeof c1.message.content === "string", "assistant message");
check(c1.finish_reason === "length", `finish_reason length, got ${c1.finish_reason}`);
check(r1.usage.completion_tokens === 8, "usage.completion_tokens = max_tokens");
check(r1.usage.total_tokens === r1.usage.prompt_tokens + 8, "usage.total_tokens");
check(typeof r1.usage.prompt_tokens_details.cached_tokens === "number", "usage.prompt_tokens_details.cached_tokens");

// chat, streaming: the same greedy text, chunk by chunk
const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
let text = "";
let finish = null;
let usage = null;
let first = true;
for await (const chunk of stream) {
	check(chunk.object === "chat.completion.chunk", "chunk object");
	if (chunk.choices.length) {
		const d = chunk.choices[0].delta;
		if (first) check(d.role === "assistant", "first chunk carries the role");
		first = false;
		if (d.content) text += d.content;
		if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
	}
	if (chunk.usage) usage = chunk.usage;
}
check(text === c1.message.content, "streamed text equals the non-streamed text");
check(finish === "length", "stream finish_reason");
check(usage && usage.completion_tokens === 8, "include_usage chunk");

// the SDK's stream helper accumulates the same message
const runner = client.chat.completions.stream(req);
const final = await runner.finalChatCompletion();
check(final.choices[0].message.content === c1.message.content, "stream helper final message");

// logprobs: greedy picks the most likely token, whose bytes spell the content
const r2 = await client.chat.completions.create({ ...req, max_tokens: 4, logprobs: true, top_logprobs: 3 });
const lp = r2.choices[0].logprobs.content;
check(lp.length === 4, "one logprob entry per token");
const bytes = [];
for (const e of lp) {
	check(e.top_logprobs.length === 3, "top_logprobs count");
	check(e.top_logprobs[0].token === e.token && Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6, "greedy = top 1");
	check(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob, "sorted");
	check(e.logprob <= 0, "a log-probability");
	bytes.push(...e.bytes);
}
check(Buffer.from(bytes).toString("utf8") === r2.choices[0].message.content, "token bytes spell the content");

// seeds: the same seed gives the same sample
const sreq = { ...req, temperature: 1.0, seed: 1234, max_tokens: 6 };
const s1 = await client.chat.completions.create(sreq);
const s2 = await client.chat.completions.create(sreq);
check(s1.choices[0].message.content === s2.choices[0].message.content, "seeded sampling is reproducible");

// tools: declared in the prompt (more prompt tokens); a tool-call history round trip is accepted
const tools = [
	{
		type: "function",
		function: {
			name: "get_weather",
			description: "Weather for a city",
			parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
		},
	},
];
const r3 = await client.chat.completions.create({ ...req, tools, tool_choice: "auto" });
check(r3.usage.prompt_tokens > r1.usage.prompt_tokens, "tool declarations reach the prompt");
check(["stop", "length", "tool_calls"].includes(r3.choices[0].finish_reason), "finish_reason with tools");
const rnone = await client.chat.completions.create({ ...req, tools, tool_choice: "none" });
check(rnone.usage.prompt_tokens === r1.usage.prompt_tokens, "tool_choice none hides the tools");
const r4 = await client.chat.completions.create({
	...req,
	tools,
	messages: [
		{ role: "user", content: "Weather in Paris?" },
		{ role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
		{ role: "tool", tool_call_id: "call_1", content: "sunny" },
	],
});
check(r4.choices[0].message.role === "assistant", "tool round trip accepted");

// completions
const creq = { model: modelId, prompt: "Hello", max_tokens: 5, temperature: 0 };
const k1 = await client.completions.create(creq);
check(k1.object === "text_completion" && typeof k1.choices[0].text === "string", "text_completion shape");
check(k1.usage.prompt_tokens === 2 && k1.usage.completion_tokens === 5, "completions usage (BOS + Hello)");
let ktext = "";
for await (const chunk of await client.completions.create({ ...creq, stream: true })) ktext += chunk.choices[0]?.text ?? "";
check(ktext === k1.choices[0].text, "streamed completion equals the non-streamed one");
const k2 = await client.completions.create({ ...creq, prompt: [2, 9259] });
check(k2.choices[0].text === k1.choices[0].text, "a token-id prompt equals the text prompt");
const k3 = await client.completions.create({ ...creq, logprobs: 2 });
check(k3.choices[0].logprobs.tokens.length === 5 && k3.choices[0].logprobs.top_logprobs.length === 5, "legacy logprobs");

// errors arrive as the client's typed exceptions
const expectError = async (fn, Cls, status, re, what) => {
	try {
		await fn();
	} catch (e) {
		check(e instanceof Cls && e.status === status && re.test(e.message), `${what}: got ${e.status} ${e.message}`);
		return;
	}
	assert.fail(`${what}: no error`);
};
await expectError(() => client.chat.completions.create({ ...req, messages: [] }), OpenAI.BadRequestError, 400, /at least one message/, "empty messages");
await expectError(() => client.chat.completions.create({ ...req, n: 2 }), OpenAI.BadRequestError, 400, /'n' must be 1/, "n = 2");
await expectError(() => client.chat.completions.create({ ...req, temperature: 9 }), OpenAI.BadRequestError, 400, /temperature/, "temperature out of range");
await expectError(() => client.models.retrieve("no-such-model"), OpenAI.NotFoundError, 404, /not found/, "unknown model");

console.log(`ok ${checks} checks`);
