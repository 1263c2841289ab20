// openai_images.mjs — images through a running `tern serve` with the official `openai` and `@anthropic-ai/sdk` npm
// clients: chat requests with data-URI `image_url` parts at each detail, usage counting the image's soft tokens,
// streaming, the prefix cache keyed by the image, several images per message, `input_image` in /v1/responses and
// `image` blocks in Anthropic messages. The model is synthetic (random weights, the real Gemma 4 vocabulary and chat
// template, a vision tower): checks compare the server with itself and with exact token counts.
//   node openai_images.mjs http://127.0.0.1:PORT MODEL_ID IMAGE.png OTHER.png
// IMAGE and OTHER are 67 x 45 pictures (60 soft tokens at detail low, 260 at auto, 1080 at high).
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI, BadRequestError } = require("openai");
const Anthropic = require("@anthropic-ai/sdk");

const [base, modelId, imagePath, otherPath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
const anthropic = new (Anthropic.default ?? Anthropic)({ baseURL: base, apiKey: "unused", maxRetries: 0 });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

const b64 = readFileSync(imagePath).toString("base64");
const otherB64 = readFileSync(otherPath).toString("base64");
const image = (data, detail) => ({ type: "image_url", image_url: { url: `data:image/png;base64,${data}`, ...(detail ? { detail } : {}) } });
const ask = (parts, extra = {}) => ({
	model: modelId,
	messages: [{ role: "user", content: parts }],
	max_tokens: 6,
	temperature: 0,
	...extra,
});
// long enough that the prompt holds whole prefix-cache blocks (64 positions) past the image
const text = {
	type: "text",
	text:
		"What is in this picture? Answer in one short sentence, please. Name the main object if you can, say which " +
		"colours dominate, and whether there is text, a person or an animal in it. Keep it plain: no lists, no " +
		"markup, no quotes, and nothing you cannot see in the picture itself.",
};

// each image takes its soft tokens plus the start and end markers in place of the template's one marker (and the
// template's own spacing around an image); the budgets differ by their token counts exactly
const plain = await client.chat.completions.create(ask([text]));
const low = await client.chat.completions.create(ask([image(b64, "low"), text]));
check(low.usage.prompt_tokens >= plain.usage.prompt_tokens + 60 + 2, `detail low: 60 soft tokens (${low.usage.prompt_tokens} vs ${plain.usage.prompt_tokens})`);
const auto = await client.chat.completions.create(ask([image(b64), text]));
check(auto.usage.prompt_tokens === low.usage.prompt_tokens + 200, `detail auto: the processor's 280 budget, 260 tokens for 67 x 45 (${auto.usage.prompt_tokens})`);
check(typeof auto.choices[0].message.content === "string" && auto.usage.completion_tokens === 6, "generation runs to max_tokens");

// the same image again: the same greedy reply, its positions served by the prefix cache
const again = await client.chat.completions.create(ask([image(b64), text]));
check(again.choices[0].message.content === auto.choices[0].message.content, "the same image, the same reply");
check(again.usage.prompt_tokens_details.cached_tokens >= 64, `the same image hits the prefix cache (${again.usage.prompt_tokens_details.cached_tokens})`);
const high = await client.chat.completions.create(ask([image(b64, "high"), text]));
check(high.usage.prompt_tokens === auto.usage.prompt_tokens + 820, `detail high: the 1120 budget, 1080 tokens (${high.usage.prompt_tokens})`);
// another picture of the same size shares only the positions before it
const other = await client.chat.completions.create(ask([image(otherB64), text]));
check(other.usage.prompt_tokens === auto.usage.prompt_tokens, "same size, same prompt length");
const c = other.usage.prompt_tokens_details.cached_tokens;
check(c > 0 && c < 16, `a different image shares only what comes before it (${c})`);

// streaming gives the non-streamed text
let streamed = "";
for await (const chunk of await client.chat.completions.create({ ...ask([image(b64), text]), stream: true }))
	streamed += chunk.choices[0]?.delta?.content ?? "";
check(streamed === auto.choices[0].message.content, "streamed image chat = non-streamed");

// two images in one message, in document order
const two = await client.chat.completions.create(ask([image(b64, "low"), { type: "text", text: "and" }, image(otherB64, "low"), text]));
check(two.usage.prompt_tokens > low.usage.prompt_tokens + 60, "two images: both spliced in");

// the Responses API's input_image: the same prompt and greedy reply as chat
const rr = await client.responses.create({
	model: modelId,
	input: [{ role: "user", content: [{ type: "input_image", image_url: `data:image/png;base64,${b64}` }, { type: "input_text", text: text.text }] }],
	max_output_tokens: 6,
	temperature: 0,
});
check(rr.usage.input_tokens === auto.usage.prompt_tokens, `responses input_image: same prompt (${rr.usage.input_tokens})`);
check(rr.output_text === auto.choices[0].message.content, "responses input_image: same greedy reply");

// Anthropic messages with a base64 image block: the same prompt and reply
const am = await anthropic.messages.create({
	model: modelId,
	max_tokens: 6,
	temperature: 0,
	messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: b64 } }, { type: "text", text: text.text }] }],
});
const amIn = am.usage.input_tokens + (am.usage.cache_read_input_tokens ?? 0) + (am.usage.cache_creation_input_tokens ?? 0);
check(amIn === auto.usage.prompt_tokens, `anthropic image block: same prompt (${amIn})`);
check(am.content[0].text === auto.choices[0].message.content, "anthropic image block: same greedy reply");

// what a client gets wrong is a 400 with the reason
const bad = async (parts, needle) => {
	try {
		await client.chat.completions.create(ask(parts));
	} catch (e) {
		check(e instanceof BadRequestError && e.message.includes(needle), `400 naming "${needle}": ${e.message}`);
		return;
	}
	throw new Error(`no 400 for ${needle}`);
};
await bad([{ type: "image_url", image_url: { url: `data:image/png;base64,${b64.slice(0, 200)}` } }, text], "PNG");
await bad([{ type: "image_url", image_url: { url: "data:image/png;base64,aGVsbG8gd29ybGQ=" } }, text], "not an image format");
await bad([{ type: "image_url", image_url: { url: "https://example.com/cat.png" } }, text], "--allow-image-urls");
await bad([{ type: "image_url", image_url: { url: `data:image/png;base64,${b64}`, detail: "ultra" } }, text], "detail");
await bad([{ type: "image_url", image_url: { url: `data:text/plain;base64,${b64}` } }, text], "not image/*");

console.log(`ok ${checks} checks`);
