// openai_tls.mjs — `tern serve` over HTTPS with several API keys, through the official `openai` npm client (which
// trusts the test's self-signed certificate through NODE_EXTRA_CA_CERTS): a chat reply with either key, the client's
// AuthenticationError for a wrong one, and /metrics behind the key unless the server was told otherwise.
//   NODE_EXTRA_CA_CERTS=cert.pem node openai_tls.mjs https://127.0.0.1:PORT KEY1 KEY2 METRICS_PUBLIC(0|1)
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI } = require("openai");

const [base, key1, key2, metricsPublic] = process.argv.slice(2);
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};
const req = { model: "m", messages: [{ role: "user", content: "Hello" }], max_tokens: 4, temperature: 0 };
for (const key of [key1, key2]) {
	const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });
	const r = await client.chat.completions.create(req);
	check(r.object === "chat.completion" && r.usage.completion_tokens === 4, `a reply over HTTPS with key ${key}`);
	let text = "";
	for await (const c of await client.chat.completions.create({ ...req, stream: true })) text += c.choices[0]?.delta?.content ?? "";
	check(text === r.choices[0].message.content, "a stream over HTTPS");
}
try {
	await new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 }).models.list();
	assert.fail("a wrong key was admitted");
} catch (e) {
	check(e instanceof OpenAI.AuthenticationError && e.status === 401, `a wrong key: ${e.status}`);
}
const m = await fetch(`${base}/metrics`);
check(m.status === (metricsPublic === "1" ? 200 : 401), `/metrics without a key: ${m.status}`);
const mk = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${key2}` } });
check(mk.status === 200, "/metrics with a key");
console.log(`ok ${checks} checks`);
