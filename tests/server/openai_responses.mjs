// openai_responses.mjs — drives /v1/responses of a running `tern serve` with the official `openai` npm client:
// plain and streamed replies (the events in order, sequence numbers counting up, the SDK's stream helper), the same
// greedy text as /v1/chat/completions, a function tool round trip both through previous_response_id and through
// explicit function_call / function_call_output items (the same conversation, so the same prompt), text.format
// json_schema checked by ajv, stored responses (retrieve, input items, delete, store: false) and errors. The model
// has random weights: tools and schemas use enums so that forced output ends.
//   node openai_responses.mjs http://127.0.0.1:PORT MODEL_ID
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI } = require("openai");
const Ajv = require("ajv");

const [base, modelId] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

const models = await client.models.list();
check(models.data[0].endpoints.includes("/v1/responses"), "the model card lists /v1/responses");

// plain, and the same greedy text as chat
const req = { model: modelId, instructions: "Be brief.", input: "What is 2+2?", max_output_tokens: 8, temperature: 0 };
const r1 = await client.responses.create(req);
check(r1.object === "response" && r1.id.startsWith("resp_") && r1.model === modelId, "response shape");
check(r1.status === "incomplete" && r1.incomplete_details.reason === "max_output_tokens", `incomplete at the cap, got ${r1.status}`);
check(r1.usage.output_tokens === 8 && r1.usage.total_tokens === r1.usage.input_tokens + 8, "usage");
check(typeof r1.usage.input_tokens_details.cached_tokens === "number" && r1.usage.output_tokens_details.reasoning_tokens === 0, "usage details");
check(r1.instructions === "Be brief." && r1.max_output_tokens === 8 && r1.temperature === 0 && r1.store === true, "the request echoed");
const msg = r1.output.find((o) => o.type === "message");
check(msg && msg.role === "assistant" && msg.content[0].type === "output_text", "a message item with output_text");
check(typeof r1.output_text === "string" && r1.output_text === msg.content[0].text, "output_text");
const chat = await client.chat.completions.create({
	model: modelId,
	messages: [
		{ role: "system", content: "Be brief." },
		{ role: "user", content: "What is 2+2?" },
	],
	max_tokens: 8,
	temperature: 0,
});
check(chat.choices[0].message.content === r1.output_text, "chat and responses give the same greedy text");
check(chat.usage.prompt_tokens === r1.usage.input_tokens, "chat and responses render the same prompt");

// streamed: the event sequence
const events = [];
for await (const ev of await client.responses.create({ ...req, stream: true })) events.push(ev);
events.forEach((ev, i) => check(ev.sequence_number === i, `sequence_number ${i}, got ${ev.sequence_number}`));
check(events[0].type === "response.created" && events[1].type === "response.in_progress", "created, in_progress first");
check(events[0].response.status === "in_progress" && events[0].response.output.length === 0, "created carries the empty response");
const last = events[events.length - 1];
check(last.type === "response.incomplete" && last.response.output_text === r1.output_text, `ends with response.incomplete, got ${last.type}`);
const order = ["response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done"];
const msgEvents = events.filter((e) => order.includes(e.type) && (e.item?.type ?? "message") === "message" && (e.part?.type ?? "output_text") === "output_text");
const ranks = msgEvents.map((e) => order.indexOf(e.type));
check(ranks.every((x, i) => i === 0 || x >= ranks[i - 1]), `message events in order: ${msgEvents.map((e) => e.type).join(",")}`);
const deltas = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
check(deltas === r1.output_text, "the deltas spell the text");
check(events.find((e) => e.type === "response.output_text.done").text === r1.output_text, "output_text.done carries the text");
const helper = await client.responses.stream(req).finalResponse();
check(helper.output_text === r1.output_text, "the SDK's stream helper rebuilds the response");

// a function tool round trip through previous_response_id
const tools = [
	{
		type: "function",
		name: "get_weather",
		description: "Weather for a city",
		parameters: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Rome"] } }, required: ["city"], additionalProperties: false },
		strict: true,
	},
];
const t1 = await client.responses.create({ model: modelId, input: "Weather in Paris?", tools, tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 64, temperature: 0 });
const call = t1.output.find((o) => o.type === "function_call");
check(call && call.name === "get_weather" && call.call_id.startsWith("call_") && call.status === "completed", "a function_call item");
check(["Paris", "Rome"].includes(JSON.parse(call.arguments).city), `arguments valid, got ${call.arguments}`);
const t2 = await client.responses.create({
	model: modelId,
	previous_response_id: t1.id,
	input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny" }],
	tools,
	max_output_tokens: 4,
	temperature: 0,
});
check(t2.previous_response_id === t1.id && t2.usage.input_tokens > t1.usage.input_tokens, "the continuation holds the first turn");
check(t2.usage.input_tokens_details.cached_tokens > 0, `the first turn's KV reused, cached ${t2.usage.input_tokens_details.cached_tokens}`);
// ... and the same conversation as explicit items
const t3 = await client.responses.create({
	model: modelId,
	input: [
		{ role: "user", content: "Weather in Paris?" },
		{ type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
		{ type: "function_call_output", call_id: call.call_id, output: "sunny" },
	],
	tools,
	max_output_tokens: 4,
	temperature: 0,
});
check(t3.usage.input_tokens === t2.usage.input_tokens && t3.output_text === t2.output_text, "explicit items = previous_response_id");
const streamedCall = [];
for await (const ev of await client.responses.create({ model: modelId, input: "Weather?", tools, tool_choice: "required", max_output_tokens: 64, stream: true }))
	streamedCall.push(ev);
const argsDone = streamedCall.find((e) => e.type === "response.function_call_arguments.done");
check(argsDone && JSON.parse(argsDone.arguments).city, "streamed call: function_call_arguments.done");
check(streamedCall[streamedCall.length - 1].type === "response.completed", "a call ends the response completed");

// text.format json_schema
const schema = { type: "object", properties: { answer: { type: "string", enum: ["yes", "no"] }, n: { type: "integer", minimum: 0, maximum: 9 } }, required: ["answer", "n"], additionalProperties: false };
const validate = new Ajv({ strict: false }).compile(schema);
for (const temperature of [0, 1]) {
	const j = await client.responses.create({ model: modelId, input: "Answer in JSON.", text: { format: { type: "json_schema", name: "answer", schema, strict: true } }, max_output_tokens: 200, temperature, top_p: 1 });
	check(j.status === "completed" && validate(JSON.parse(j.output_text)), `json_schema reply valid at temperature ${temperature}: ${j.output_text}`);
}

// reasoning.effort switches the template's thinking
const think = await client.responses.create({ ...req, reasoning: { effort: "high" } });
check(think.usage.input_tokens !== r1.usage.input_tokens && think.reasoning.effort === "high", "reasoning.effort reaches the template");

// stored responses
const got = await client.responses.retrieve(r1.id);
check(got.id === r1.id && got.output_text === r1.output_text && JSON.stringify(got.output) === JSON.stringify(r1.output), "retrieve");
const items = await client.responses.inputItems.list(r1.id);
check(items.data.length === 1 && items.data[0].type === "message" && items.data[0].content[0].text === "What is 2+2?", "input items");
const t3items = await client.responses.inputItems.list(t3.id, { order: "asc" });
check(t3items.data.map((i) => i.type).join() === "message,function_call,function_call_output", "input items in order");
const del = await client.responses.delete(r1.id);
const expectError = async (fn, Cls, status, re, what) => {
	try {
		await fn();
	} catch (e) {
		check(e instanceof Cls && e.status === status && re.test(e.message), `${what}: got ${e.status} ${e.message}`);
		return;
	}
	assert.fail(`${what}: no error`);
};
check(del === undefined || del.deleted !== false, "delete");
await expectError(() => client.responses.retrieve(r1.id), OpenAI.NotFoundError, 404, /not found/, "a deleted response");
await expectError(() => client.responses.create({ ...req, previous_response_id: "resp_nope" }), OpenAI.NotFoundError, 404, /not found/, "an unknown previous_response_id");
const unstored = await client.responses.create({ ...req, store: false });
await expectError(() => client.responses.retrieve(unstored.id), OpenAI.NotFoundError, 404, /not found/, "store: false keeps nothing");

// what the server cannot honour, and malformed bodies
await expectError(() => client.responses.create({ ...req, background: true }), OpenAI.BadRequestError, 400, /background/, "background");
await expectError(() => client.responses.create({ ...req, tools: [{ type: "web_search" }] }), OpenAI.BadRequestError, 400, /hosted tool/, "a hosted tool");
await expectError(() => client.responses.create({ model: modelId }), OpenAI.BadRequestError, 400, /'input' is required/, "no input");
await expectError(() => client.responses.create({ ...req, max_output_tokens: 0 }), OpenAI.BadRequestError, 400, /max_output_tokens/, "max_output_tokens 0");
await expectError(() => client.responses.create({ ...req, text: { format: { type: "yaml" } } }), OpenAI.BadRequestError, 400, /text\.format\.type/, "text.format.type");
await expectError(() => client.responses.create({ ...req, input: [{ role: "robot", content: "hi" }] }), OpenAI.BadRequestError, 400, /input\[0\]\.role/, "a bad role");
await expectError(() => client.responses.create({ ...req, temperature: 5 }), OpenAI.BadRequestError, 400, /temperature/, "temperature");

console.log(`ok ${checks} checks`);
