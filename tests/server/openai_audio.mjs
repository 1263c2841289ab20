// openai_audio.mjs — audio through a running `tern serve` with the official `openai` npm client: chat requests with
// `input_audio` and data-URI `audio_url` parts (and input_audio in a /v1/responses input), streaming, the prefix cache across clips, and
// `audio.transcriptions.create` (json and text). The model is synthetic (random weights, the real Gemma 4 vocabulary
// and chat template, an audio tower): checks compare the server with itself and with exact token counts.
//   node openai_audio.mjs http://127.0.0.1:PORT MODEL_ID CLIP.wav
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI, toFile, BadRequestError } = require("openai");

const [base, modelId, clipPath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

const wav = readFileSync(clipPath); // 1.3 s of speech: 33 soft tokens
const b64 = wav.toString("base64");
const SOFT = 33;
// Another clip of the same length: the samples' low bits flipped (the data chunk starts at byte 44).
const other = Buffer.from(wav);
for (let i = 44; i + 1 < other.length; i += 2) other[i] ^= 0x5a;
const otherB64 = other.toString("base64");

const ask = (parts, extra = {}) => ({
	model: modelId,
	messages: [{ role: "user", content: parts }],
	max_tokens: 6,
	temperature: 0,
	...extra,
});
const audioPart = (data) => ({ type: "input_audio", input_audio: { data, format: "wav" } });
// long enough that the prompt holds whole prefix-cache blocks (64 positions) past the clip
const text = {
	type: "text",
	text:
		"What is said in this clip? Answer in one short sentence, please. Name the speaker if you can, say which " +
		"language it is in, and whether there is music, noise or silence around the words. Keep it plain: no lists, " +
		"no markup, no quotes, and nothing you cannot hear in the recording itself.",
};

// the clip takes its soft tokens plus the start and end markers in place of the template's one marker
const plain = await client.chat.completions.create(ask([text]));
const r1 = await client.chat.completions.create(ask([audioPart(b64), text]));
check(r1.object === "chat.completion" && typeof r1.choices[0].message.content === "string", "chat with input_audio");
check(r1.usage.prompt_tokens === plain.usage.prompt_tokens + SOFT + 2, `soft tokens in the prompt: ${r1.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
check(r1.choices[0].finish_reason === "length" && r1.usage.completion_tokens === 6, "generation runs to max_tokens");

// the same clip as a data URI gives the same greedy reply; the prefix cache serves its positions again
const r2 = await client.chat.completions.create(ask([{ type: "audio_url", audio_url: { url: `data:audio/wav;base64,${b64}` } }, text]));
check(r2.choices[0].message.content === r1.choices[0].message.content, "audio_url data URI = input_audio");
check(r2.usage.prompt_tokens_details.cached_tokens >= 64, `the same clip again hits the prefix cache (${r2.usage.prompt_tokens_details.cached_tokens})`);

// a different clip of the same length shares only the few positions before the clip (the turn's opening)
const r3 = await client.chat.completions.create(ask([audioPart(otherB64), text]));
check(r3.usage.prompt_tokens === r1.usage.prompt_tokens, "same length, same prompt size");
const c3 = r3.usage.prompt_tokens_details.cached_tokens;
check(c3 > 0 && c3 < 16, `a different clip shares only what comes before it (${c3})`);

// streaming gives the non-streamed text
let streamed = "";
for await (const chunk of await client.chat.completions.create({ ...ask([audioPart(b64), text]), stream: true }))
	streamed += chunk.choices[0]?.delta?.content ?? "";
check(streamed === r1.choices[0].message.content, "streamed audio chat = non-streamed");

// two clips in one message, in document order
const r4 = await client.chat.completions.create(ask([audioPart(b64), { type: "text", text: "and" }, audioPart(otherB64), text]));
check(r4.usage.prompt_tokens > r1.usage.prompt_tokens + SOFT, "two clips: both spliced in");

// the Responses API takes the same part in an input message: the same prompt and greedy reply as chat
const rr = await client.responses.create({
	model: modelId,
	input: [{ role: "user", content: [audioPart(b64), { type: "input_text", text: text.text }] }],
	max_output_tokens: 6,
	temperature: 0,
});
check(rr.usage.input_tokens === r1.usage.prompt_tokens && rr.output_text === r1.choices[0].message.content, "responses with input_audio = chat");

// transcriptions: json (text + usage) and text
const t1 = await client.audio.transcriptions.create({ file: await toFile(wav, "short.wav"), model: modelId });
check(typeof t1.text === "string", "transcription json has text");
check(t1.usage && t1.usage.type === "tokens" && t1.usage.input_tokens > SOFT && t1.usage.output_tokens > 0, "transcription usage");
const t2 = await client.audio.transcriptions.create({
	file: await toFile(wav, "short.wav", { type: "audio/wav" }),
	model: modelId,
	response_format: "text",
	language: "en",
	prompt: "Gemma",
	temperature: 0,
});
check(typeof t2 === "string", "response_format text gives a string");
const t3 = await client.audio.transcriptions.create({ file: await toFile(wav, "short.wav"), model: modelId, response_format: "text" });
const t4 = await client.audio.transcriptions.create({ file: await toFile(wav, "short.wav"), model: modelId, response_format: "text" });
check(t3 === t4, "greedy transcription is reproducible");

// errors arrive as the client's typed exceptions
const expect400 = async (fn, re, what) => {
	try {
		await fn();
	} catch (e) {
		check(e instanceof BadRequestError && e.status === 400 && re.test(e.message), `${what}: got ${e.status} ${e.message}`);
		return;
	}
	assert.fail(`${what}: no error`);
};
await expect400(() => client.chat.completions.create(ask([audioPart("!!notbase64!!"), text])), /content\[0\].*base64/, "bad base64");
await expect400(
	() => client.chat.completions.create(ask([audioPart(Buffer.from("this is not audio at all, just text ".repeat(20)).toString("base64")), text])),
	/content\[0\].*(WAV|MP3|FLAC)/,
	"undecodable clip names the containers",
);
await expect400(
	() => client.chat.completions.create(ask([{ type: "input_audio", input_audio: { data: b64, format: "midi" } }, text])),
	/format 'midi' is not supported/,
	"unsupported format",
);
await expect400(() => client.chat.completions.create(ask(Array(17).fill(audioPart(b64)))), /at most 16/, "too many clips");
const wavFile = await toFile(wav, "short.wav");
await expect400(
	() => client.audio.transcriptions.create({ file: wavFile, model: modelId, response_format: "srt" }),
	/response_format.*json.*text/,
	"transcription format",
);

console.log(`ok ${checks} checks`);
