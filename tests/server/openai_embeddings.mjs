// openai_embeddings.mjs — /v1/embeddings of a running `tern serve` through the official `openai` npm client: shapes,
// unit norms, base64 decoding to the same floats, `dimensions` (a renormalized prefix), token-id inputs, the same
// vector alone and in a batch, usage, and errors.
//   node openai_embeddings.mjs http://127.0.0.1:PORT MODEL_ID
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
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const close = (a, b, tol) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= tol);

const models = await client.models.list();
check(models.data[0].endpoints.includes("/v1/embeddings"), "the model card lists /v1/embeddings");

const texts = ["The cat sat on the mat.", "A dog barked.", "In the beginning God created the heaven and the earth."];
const one = await client.embeddings.create({ model: modelId, input: texts[0], encoding_format: "float" });
const H = one.data[0].embedding.length;
check(one.object === "list" && one.data.length === 1 && one.data[0].object === "embedding" && one.data[0].index === 0, "list shape");
check(H > 0 && Math.abs(norm(one.data[0].embedding) - 1) < 1e-4, `unit length, got ${norm(one.data[0].embedding)}`);
check(one.usage.prompt_tokens > 0 && one.usage.total_tokens === one.usage.prompt_tokens, "usage");
check(one.model === modelId, "model");

const many = await client.embeddings.create({ model: modelId, input: texts, encoding_format: "float" });
check(many.data.length === 3 && many.data.every((d, i) => d.index === i && d.embedding.length === H), "one vector per input, in order");
check(close(many.data[0].embedding, one.data[0].embedding, 1e-6), "the same vector in a batch as alone");
check(!close(many.data[0].embedding, many.data[1].embedding, 1e-3), "different texts, different vectors");
check(many.usage.prompt_tokens > one.usage.prompt_tokens, "usage sums the inputs");

// base64: the SDK decodes little-endian float32 (its default when no encoding_format is given)
const b64 = await client.embeddings.create({ model: modelId, input: texts });
check(b64.data.every((d, i) => close(Array.from(d.embedding), many.data[i].embedding, 1e-6)), "base64 decodes to the floats");
const raw = await fetch(`${base}/v1/embeddings`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ input: "x", encoding_format: "base64" }) }).then((r) => r.json());
check(typeof raw.data[0].embedding === "string" && Buffer.from(raw.data[0].embedding, "base64").length === 4 * H, "base64 on the wire");

// dimensions: the first k values, renormalized
const k = Math.max(1, Math.floor(H / 4));
const cut = await client.embeddings.create({ model: modelId, input: texts[0], dimensions: k, encoding_format: "float" });
const prefix = one.data[0].embedding.slice(0, k);
const pn = norm(prefix);
check(cut.data[0].embedding.length === k && close(cut.data[0].embedding, prefix.map((x) => x / pn), 1e-5), "dimensions");

// token ids: one list is one input, and a list of lists gives the same vector
const idsOnly = await client.embeddings.create({ model: modelId, input: [2, 651, 3290], encoding_format: "float" });
check(idsOnly.data.length === 1 && idsOnly.usage.prompt_tokens === 3, "one token-id list is one input (no BOS added)");
const idsList = await client.embeddings.create({ model: modelId, input: [[2, 651, 3290], [2, 651]], encoding_format: "float" });
check(idsList.data.length === 2 && close(idsList.data[0].embedding, idsOnly.data[0].embedding, 1e-6), "token-id lists");

const expectError = async (fn, status, re, what) => {
	try {
		await fn();
	} catch (e) {
		check(e instanceof OpenAI.APIError && e.status === status && re.test(e.message), `${what}: got ${e.status} ${e.message}`);
		return;
	}
	assert.fail(`${what}: no error`);
};
await expectError(() => client.embeddings.create({ model: modelId, input: "" }), 400, /empty string/, "empty input");
await expectError(() => client.embeddings.create({ model: modelId, input: [] }), 400, /empty array/, "no inputs");
await expectError(() => client.embeddings.create({ model: modelId, input: "x", dimensions: H + 1 }), 400, /dimensions/, "too many dimensions");
await expectError(() => client.embeddings.create({ model: modelId, input: "x", encoding_format: "int8" }), 400, /encoding_format/, "encoding_format");
await expectError(() => client.embeddings.create({ model: modelId, input: [[1, -5]] }), 400, /input\[0\]\[1\]/, "a bad token id");
await expectError(() => client.embeddings.create({ model: modelId, input: "word ".repeat(3000) }), 400, /may hold/, "longer than the context");

console.log(`ok ${checks} checks`);
