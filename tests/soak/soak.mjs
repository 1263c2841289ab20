// soak.mjs — a long mixed storm against a running `tern serve`: C clients for S seconds, each picking request kinds at
// random from the whole API surface (OpenAI chat/completions/responses/embeddings, Anthropic messages; streamed and
// not; abandoned streams, slow readers, cancellations, malformed and oversize bodies, audio clips, structured output,
// predicted outputs, forced tool calls), while the server's RSS, open file descriptors, KV bytes in use and queue
// depth are sampled. Exits 1 (with the reasons) on any 5xx, any unexpected status, any stream whose events are lost,
// duplicated or out of order, and any growth after warm-up (on runs of 5 minutes or more).
//
//   node tests/soak/soak.mjs --url http://127.0.0.1:PORT --pid PID [--clients 64] [--seconds 600] [--max-body N]
//        [--audio] [--json FILE]
//
// Lost or duplicated events are caught three ways: greedy requests (temperature 0) of a few fixed prompts must give,
// in every form (streamed, slow-read, with a predicted output), the text the same prompt gave alone before the storm
// (the engine is batch-invariant, docs/architecture.md); Responses streams must number their events 0, 1, 2, … and
// their deltas must add up to the done text; every stream must end exactly once. Growth (judged on runs of 5
// minutes or more): after a warm-up (the first quarter), the largest RSS of the last quarter may exceed the largest of the second quarter by at most 5% + 16 MiB;
// once the storm is over and the server idle, KV bytes in use and queue depth must be 0 and open descriptors back
// at their count before the storm.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
	const i = args.indexOf(name);
	return i >= 0 ? args[i + 1] : dflt;
};
const base = opt("--url", "http://127.0.0.1:8080");
const pid = Number(opt("--pid", 0));
const clients = Number(opt("--clients", 64));
const seconds = Number(opt("--seconds", 600));
const maxBody = Number(opt("--max-body", 16777216));
const withAudio = args.includes("--audio");
const jsonOut = opt("--json", "");
if (!pid) {
	console.error("soak.mjs: --pid PID (the server's process) is required for the RSS and descriptor samples");
	process.exit(2);
}

const failures = [];
const fail = (kind, msg) => {
	if (failures.length < 200) failures.push(`${kind}: ${msg}`);
};
const counts = {}; // kind -> {ok, overloaded, failed}
const count = (kind, what) => {
	counts[kind] ??= { ok: 0, overloaded: 0, failed: 0 };
	counts[kind][what]++;
};
let status5xx = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rand = (n) => Math.floor(Math.random() * n);
const model = (await (await fetch(`${base}/v1/models`)).json()).data[0].id;

// ---- samples ----
const samples = [];
async function metrics() {
	const text = await (await fetch(`${base}/metrics`)).text();
	const get = (name) => {
		const line = text.split("\n").find((l) => l.startsWith(name + " "));
		return line ? Number(line.split(" ")[1]) : NaN;
	};
	return { kv: get("tern_kv_bytes_in_use"), queue: get("tern_queue_depth"), active: get("tern_active_rows") };
}
function rssBytes() {
	const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
	return m ? Number(m[1]) * 1024 : NaN;
}
const fds = () => readdirSync(`/proc/${pid}/fd`).length;
async function sample(t0) {
	const m = await metrics();
	const s = { t: (Date.now() - t0) / 1000, rss: rssBytes(), fds: fds(), ...m };
	samples.push(s);
	return s;
}

// ---- request helpers ----
async function post(path, body, init = {}) {
	const res = await fetch(`${base}${path}`, {
		method: "POST",
		headers: { "content-type": "application/json", ...(init.headers || {}) },
		body: typeof body === "string" ? body : JSON.stringify(body),
		signal: init.signal,
	});
	if (res.status >= 500) status5xx++;
	return res;
}
// Reads an SSE body into its data payloads; `slow` sleeps between reads; `stopAfter` aborts after that many events.
async function readEvents(res, { slow = false, stopAfter = 0, abort } = {}) {
	const reader = res.body.getReader();
	const dec = new TextDecoder();
	let buf = "";
	const events = [];
	for (;;) {
		const { done, value } = await reader.read();
		if (done) break;
		buf += dec.decode(value, { stream: true });
		let k;
		while ((k = buf.indexOf("\n\n")) >= 0) {
			const block = buf.slice(0, k);
			buf = buf.slice(k + 2);
			const data = block
				.split("\n")
				.filter((l) => l.startsWith("data:"))
				.map((l) => l.slice(5).trimStart())
				.join("\n");
			if (data) events.push({ data });
		}
		if (stopAfter && events.length >= stopAfter) {
			abort.abort();
			return events;
		}
		if (slow) await sleep(100 + rand(200));
	}
	if (buf.trim()) events.push({ data: buf.trim() }); // an unterminated last event still counts
	return events;
}
async function expectStatus(kind, res, want) {
	if (res.status === 429) {
		await res.arrayBuffer();
		count(kind, "overloaded");
		return false;
	}
	if (res.status !== want) {
		fail(kind, `status ${res.status} (wanted ${want}): ${(await res.text()).slice(0, 200)}`);
		count(kind, "failed");
		return false;
	}
	return true;
}

// ---- the fixed greedy prompts and their texts alone ----
const PROMPTS = [
	"What does harbor mean?",
	"Tell me a short story about a lantern in the rain.",
	"List three things found in an orchard.",
	"Explain what a shepherd does, in two sentences.",
];
const MAXTOK = 24;
const greedyChat = (i, extra = {}) => ({
	model,
	messages: [{ role: "user", content: PROMPTS[i] }],
	max_tokens: MAXTOK,
	temperature: 0,
	...extra,
});
const reference = { chat: [], anthropic: [] };

function chatStreamText(events) {
	const done = events.filter((e) => e.data === "[DONE]").length;
	if (done !== 1 || events[events.length - 1].data !== "[DONE]") throw new Error(`[DONE] ${done} times or not last`);
	let text = "", finishes = 0, id = null;
	for (const e of events.slice(0, -1)) {
		const c = JSON.parse(e.data);
		if (c.error) throw new Error(`error event ${e.data.slice(0, 200)}`);
		id ??= c.id;
		if (c.id !== id) throw new Error("chunk ids differ within one stream");
		for (const ch of c.choices || []) {
			text += ch.delta?.content || "";
			if (ch.finish_reason) finishes++;
		}
	}
	if (finishes !== 1) throw new Error(`${finishes} finish_reason chunks`);
	return text;
}
function anthropicStreamText(events) {
	const names = events.map((e) => JSON.parse(e.data).type);
	const once = (t) => names.filter((n) => n === t).length === 1;
	if (!once("message_start") || !once("message_stop") || !once("message_delta") || names[names.length - 1] !== "message_stop")
		throw new Error(`event order ${names.slice(0, 3).join(",")} … ${names.slice(-3).join(",")}`);
	let text = "";
	for (const e of events) {
		const d = JSON.parse(e.data);
		if (d.type === "content_block_delta" && d.delta.type === "text_delta") text += d.delta.text;
	}
	return text;
}

// ---- request kinds ----
function wav(seconds) {
	const rate = 16000, n = Math.round(rate * seconds), buf = Buffer.alloc(44 + 2 * n);
	buf.write("RIFF", 0); buf.writeUInt32LE(36 + 2 * n, 4); buf.write("WAVEfmt ", 8); buf.writeUInt32LE(16, 16);
	buf.writeUInt16LE(1, 20); buf.writeUInt16LE(1, 22); buf.writeUInt32LE(rate, 24); buf.writeUInt32LE(2 * rate, 28);
	buf.writeUInt16LE(2, 32); buf.writeUInt16LE(16, 34); buf.write("data", 36); buf.writeUInt32LE(2 * n, 40);
	const f = 200 + rand(600);
	for (let i = 0; i < n; i++) buf.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * f * i) / rate)), 44 + 2 * i);
	return buf.toString("base64");
}
const KINDS = {
	async chat() {
		const i = rand(PROMPTS.length);
		const res = await post("/v1/chat/completions", greedyChat(i));
		if (!(await expectStatus("chat", res, 200))) return;
		const text = (await res.json()).choices[0].message.content;
		if (text !== reference.chat[i]) return fail("chat", `greedy text differs from alone: ${JSON.stringify(text)}`);
		count("chat", "ok");
	},
	async chat_stream(slow = false, kind = "chat_stream") {
		const i = rand(PROMPTS.length);
		const res = await post("/v1/chat/completions", greedyChat(i, { stream: true }));
		if (!(await expectStatus(kind, res, 200))) return;
		const text = chatStreamText(await readEvents(res, { slow }));
		if (text !== reference.chat[i]) return fail(kind, `streamed text differs from alone: ${JSON.stringify(text)}`);
		count(kind, "ok");
	},
	async slow_reader() {
		return KINDS.chat_stream(true, "slow_reader");
	},
	async predicted() {
		const i = rand(PROMPTS.length);
		// The right continuation as the prediction for half, a wrong one for the rest: lossless either way.
		const prediction = Math.random() < 0.5 ? reference.chat[i] : "nothing like the reply at all " + PROMPTS[i];
		const res = await post("/v1/chat/completions", greedyChat(i, { prediction: { type: "content", content: prediction } }));
		if (!(await expectStatus("predicted", res, 200))) return;
		const text = (await res.json()).choices[0].message.content;
		if (text !== reference.chat[i]) return fail("predicted", `text with a prediction differs: ${JSON.stringify(text)}`);
		count("predicted", "ok");
	},
	async anthropic() {
		const i = rand(PROMPTS.length);
		const res = await post("/v1/messages", { model, max_tokens: MAXTOK, temperature: 0, messages: [{ role: "user", content: PROMPTS[i] }] });
		if (!(await expectStatus("anthropic", res, 200))) return;
		const j = await res.json();
		const text = j.content.filter((b) => b.type === "text").map((b) => b.text).join("");
		if (text !== reference.anthropic[i]) return fail("anthropic", `greedy text differs from alone: ${JSON.stringify(text)}`);
		count("anthropic", "ok");
	},
	async anthropic_stream() {
		const i = rand(PROMPTS.length);
		const res = await post("/v1/messages", { model, max_tokens: MAXTOK, temperature: 0, stream: true, messages: [{ role: "user", content: PROMPTS[i] }] });
		if (!(await expectStatus("anthropic_stream", res, 200))) return;
		const text = anthropicStreamText(await readEvents(res));
		if (text !== reference.anthropic[i]) return fail("anthropic_stream", `streamed text differs: ${JSON.stringify(text)}`);
		count("anthropic_stream", "ok");
	},
	async responses_stream() {
		const res = await post("/v1/responses", { model, input: PROMPTS[rand(PROMPTS.length)], max_output_tokens: 32, temperature: 1, stream: true, store: false });
		if (!(await expectStatus("responses_stream", res, 200))) return;
		const events = (await readEvents(res)).map((e) => JSON.parse(e.data));
		let deltas = "", doneText = null;
		for (let k = 0; k < events.length; k++) {
			if (events[k].sequence_number !== k) return fail("responses_stream", `event ${k} numbered ${events[k].sequence_number}`);
			if (events[k].type === "response.output_text.delta") deltas += events[k].delta;
			if (events[k].type === "response.output_text.done") doneText = events[k].text;
		}
		const last = events[events.length - 1]?.type;
		if (last !== "response.completed" && last !== "response.incomplete") return fail("responses_stream", `ends with ${last}`);
		if (doneText !== null && doneText !== deltas) return fail("responses_stream", "deltas do not add up to the done text");
		count("responses_stream", "ok");
	},
	async completions() {
		const res = await post("/v1/completions", { model, prompt: "In the beginning", max_tokens: 16, temperature: 0.8 });
		if (!(await expectStatus("completions", res, 200))) return;
		const j = await res.json();
		if (typeof j.choices?.[0]?.text !== "string") return fail("completions", "no text");
		count("completions", "ok");
	},
	async embeddings() {
		const res = await post("/v1/embeddings", { model, input: ["a lamb in the meadow", "granite and ladders"] });
		if (!(await expectStatus("embeddings", res, 200))) return;
		const j = await res.json();
		if (j.data?.length !== 2) return fail("embeddings", "wrong count");
		count("embeddings", "ok");
	},
	async structured() {
		const schema = { type: "object", properties: { word: { type: "string" }, count: { type: "integer" } }, required: ["word", "count"], additionalProperties: false };
		const res = await post("/v1/chat/completions", {
			model, max_tokens: 64, temperature: 1,
			messages: [{ role: "user", content: "Give a word and a number as JSON." }],
			response_format: { type: "json_schema", json_schema: { name: "w", strict: true, schema } },
		});
		if (!(await expectStatus("structured", res, 200))) return;
		const j = await res.json();
		const c = j.choices[0];
		if (c.finish_reason === "stop") {
			let v;
			try {
				v = JSON.parse(c.message.content);
			} catch (e) {
				return fail("structured", `${e.message}: ${JSON.stringify(c.message.content)}`);
			}
			if (typeof v.word !== "string" || !Number.isInteger(v.count)) return fail("structured", `not the schema: ${c.message.content}`);
		}
		count("structured", "ok");
	},
	async tool_call() {
		const res = await post("/v1/chat/completions", {
			model, max_tokens: 64, temperature: 1,
			messages: [{ role: "user", content: "What is the weather in Oslo?" }],
			tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }],
			tool_choice: { type: "function", function: { name: "get_weather" } },
		});
		if (!(await expectStatus("tool_call", res, 200))) return;
		const c = (await res.json()).choices[0];
		if (c.finish_reason === "tool_calls") {
			const call = c.message.tool_calls?.[0];
			if (call?.function?.name !== "get_weather") return fail("tool_call", "no get_weather call");
			JSON.parse(call.function.arguments);
		}
		count("tool_call", "ok");
	},
	async audio() {
		if (!withAudio) return;
		const res = await post("/v1/chat/completions", {
			model, max_tokens: 16, temperature: 0.7,
			messages: [{ role: "user", content: [{ type: "text", text: "What is this sound?" }, { type: "input_audio", input_audio: { data: wav(0.5 + Math.random() * 2), format: "wav" } }] }],
		});
		if (!(await expectStatus("audio", res, 200))) return;
		await res.json();
		count("audio", "ok");
	},
	async abandoned_stream() {
		const ac = new AbortController();
		const res = await post("/v1/chat/completions", { model, max_tokens: 200, stream: true, messages: [{ role: "user", content: PROMPTS[rand(4)] }] }, { signal: ac.signal });
		if (!(await expectStatus("abandoned_stream", res, 200))) return;
		try {
			await readEvents(res, { stopAfter: 1 + rand(3), abort: ac });
		} catch (e) {
			if (e.name !== "AbortError") throw e;
		}
		count("abandoned_stream", "ok");
	},
	async cancelled() {
		const ac = new AbortController();
		setTimeout(() => ac.abort(), 20 + rand(300));
		try {
			const res = await post("/v1/chat/completions", { model, max_tokens: 200, messages: [{ role: "user", content: PROMPTS[rand(4)] }] }, { signal: ac.signal });
			await res.arrayBuffer();
		} catch (e) {
			if (e.name !== "AbortError") throw e;
		}
		count("cancelled", "ok");
	},
	async malformed() {
		const bodies = ['{"model":', '{"messages": 7}', '{"messages":[{"role":"user","content":"hi"}],"max_tokens":-3}', "\u0000\u0001", '{"messages":[{"role":"wizard","content":"x"}]}'];
		const path = ["/v1/chat/completions", "/v1/messages", "/v1/completions", "/v1/responses"][rand(4)];
		const res = await post(path, bodies[rand(bodies.length)]);
		if (!(await expectStatus("malformed", res, 400))) return;
		const j = await res.json();
		if (!j.error) return fail("malformed", "400 without an error object");
		count("malformed", "ok");
	},
	async oversize() {
		let res;
		try {
			res = await post("/v1/chat/completions", '{"messages":[{"role":"user","content":"' + "a".repeat(maxBody + 1) + '"}]}');
		} catch (e) {
			// The server may answer 413 and close before the client has sent the whole body: the client then sees its
			// upload cut off instead of the status. Refused either way.
			const code = e.cause?.code || "";
			if (!["EPIPE", "ECONNRESET", "UND_ERR_SOCKET"].includes(code)) throw e;
			return count("oversize", "ok");
		}
		if (!(await expectStatus("oversize", res, 413))) return;
		count("oversize", "ok");
	},
};
// How often each kind comes up (out of the sum).
const WEIGHTS = { chat: 10, chat_stream: 12, slow_reader: 4, predicted: 6, anthropic: 6, anthropic_stream: 8, responses_stream: 6, completions: 5, embeddings: 4, structured: 6, tool_call: 5, audio: withAudio ? 5 : 0, abandoned_stream: 6, cancelled: 5, malformed: 6, oversize: 1 };
const bag = Object.entries(WEIGHTS).flatMap(([k, w]) => Array(w).fill(k));

// ---- run ----
for (let i = 0; i < PROMPTS.length; i++) {
	reference.chat.push((await (await post("/v1/chat/completions", greedyChat(i))).json()).choices[0].message.content);
	const a = await (await post("/v1/messages", { model, max_tokens: MAXTOK, temperature: 0, messages: [{ role: "user", content: PROMPTS[i] }] })).json();
	reference.anthropic.push(a.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
}
await sleep(6000); // the reference requests' keep-alive connections close
const t0 = Date.now();
const before = await sample(t0);
const deadline = t0 + seconds * 1000;
let running = true;
const sampler = (async () => {
	while (running) {
		await sleep(2000);
		if (running) await sample(t0);
	}
})();
let requests = 0;
await Promise.all(
	Array.from({ length: clients }, async () => {
		while (Date.now() < deadline) {
			const kind = bag[rand(bag.length)];
			requests++;
			try {
				await KINDS[kind]();
			} catch (e) {
				fail(kind, `${e.name}: ${e.message}`);
				count(kind, "failed");
			}
		}
	}),
);
running = false;
await sampler;
// Idle: the server's timeouts close what clients left open.
let after;
for (let k = 0; k < 30; k++) {
	await sleep(1000);
	after = await sample(t0);
	if (after.kv === 0 && after.queue === 0 && after.active === 0 && after.fds <= before.fds) break;
}

const inWindow = (a, b) => samples.filter((s) => s.t >= a * seconds && s.t < b * seconds && s.t <= seconds);
const maxRss = (w) => Math.max(...w.map((s) => s.rss));
const rssWarm = maxRss(inWindow(0.25, 0.5)), rssEnd = maxRss(inWindow(0.75, 1.0001));
if (status5xx) failures.unshift(`${status5xx} responses with a 5xx status`);
// Growth is judged on runs of 5 minutes or more: in a shorter one the allocator's per-thread arenas are still
// being made when the last quarter starts (make test's soak_short checks everything else).
const growthJudged = seconds >= 300;
if (growthJudged && rssEnd > rssWarm * 1.05 + 16 * 1048576)
	failures.push(`RSS grew after warm-up: ${(rssWarm / 1048576).toFixed(1)} MiB -> ${(rssEnd / 1048576).toFixed(1)} MiB`);
if (after.kv !== 0) failures.push(`KV bytes in use ${after.kv} when idle`);
if (after.queue !== 0 || after.active !== 0) failures.push(`queue ${after.queue}, active rows ${after.active} when idle`);
if (after.fds > before.fds) failures.push(`open descriptors ${before.fds} before, ${after.fds} idle after`);

const report = {
	clients, seconds, requests, status5xx, counts,
	growth_judged: growthJudged,
	rss_mib: { before: +(before.rss / 1048576).toFixed(1), warm_max: +(rssWarm / 1048576).toFixed(1), end_max: +(rssEnd / 1048576).toFixed(1), idle_after: +(after.rss / 1048576).toFixed(1) },
	fds: { before: before.fds, max: Math.max(...samples.map((s) => s.fds)), idle_after: after.fds },
	kv_bytes_max: Math.max(...samples.map((s) => s.kv)), queue_max: Math.max(...samples.map((s) => s.queue)),
	samples: samples.length, failures,
};
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ ...report, series: samples }, null, 1));
console.log(JSON.stringify(report, null, 1));
process.exit(failures.length ? 1 : 0);
