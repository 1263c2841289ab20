// prompt_cache_load.mjs — the prompt cache under a many-client chat load: C clients for S seconds, each sending chat
// requests (streaming or not) whose system prompt is one of a few shared ones and whose user turn is its own, some
// continuing their own earlier conversation; then the server's /metrics say how many lookups hit and how many
// prompt tokens came from the cache.
//   node bench/prompt_cache_load.mjs http://127.0.0.1:PORT [--clients 64] [--seconds 60 | --requests N] [--max-tokens 16]
//     [--temperature 0.7] [--short]   (--requests with --temperature 0: the same requests in every run, to compare
//     builds; --short: system prompts of a few words)
// Prints one JSON line: requests, errors (non-200), lookups, hits, hit rate, prompt and cached tokens.

const args = process.argv.slice(2);
const base = args[0];
const opt = (name, dflt) => {
	const i = args.indexOf(name);
	return i >= 0 ? Number(args[i + 1]) : dflt;
};
const clients = opt("--clients", 64), seconds = opt("--seconds", 60), maxTokens = opt("--max-tokens", 16);
const perClient = opt("--requests", 0), temperature = opt("--temperature", 0.7); // --requests N: N each, no time limit

const SYSTEMS = [
	"You are a careful assistant for a small library. Answer questions about borrowing books, opening hours and " +
		"membership in one or two plain sentences. If you do not know, say so and suggest asking at the front desk.",
	"You are a patient tutor of English vocabulary. When asked about a word, give its meaning in simple words, then " +
		"one example sentence. Keep every answer short and friendly, and never use lists or markup.",
	"You answer questions about the King James Bible: where a verse is found, what a passage says, and who speaks " +
		"in it. Quote only what you are sure of, and keep answers to a few sentences.",
	"You are the help desk of a hardware store. Say which aisle holds an item, what it is used for, and one safety " +
		"tip when it matters. Be brief and concrete.",
];
// --short: system prompts of a few words (whole prompts shorter than a 64-token block)
const SHORT = ["Be brief.", "Answer plainly.", "You are a helpful tutor.", "Reply in one sentence."];
if (args.includes("--short")) SYSTEMS.splice(0, SYSTEMS.length, ...SHORT);
const WORDS = ["lamb", "shepherd", "harvest", "lantern", "anchor", "orchard", "whisper", "granite", "meadow", "ladder"];

async function metric(name) {
	const text = await (await fetch(`${base}/metrics`)).text();
	const line = text.split("\n").find((l) => l.startsWith(name + " "));
	return line ? Number(line.split(" ")[1]) : 0;
}

async function chat(messages, stream) {
	const r = await fetch(`${base}/v1/chat/completions`, {
		method: "POST",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify({ messages, max_tokens: maxTokens, temperature, stream }),
	});
	if (r.status !== 200) {
		await r.text();
		return { ok: false };
	}
	if (!stream) {
		const v = await r.json();
		return { ok: true, text: v.choices[0].message.content ?? "" };
	}
	const body = await r.text();
	let text = "";
	for (const line of body.split("\n"))
		if (line.startsWith("data: {")) text += JSON.parse(line.slice(6)).choices[0]?.delta?.content ?? "";
	return { ok: body.includes("data: [DONE]"), text };
}

const before = { lookups: await metric("tern_prefix_cache_lookups_total"), hits: await metric("tern_prefix_cache_hits_total"), prompt: await metric("tern_prompt_tokens_total"), cached: await metric("tern_prompt_tokens_cached_total") };
const end = Date.now() + seconds * 1000;
let requests = 0, errors = 0;
async function client(k) {
	let seed = k * 7919 + 1;
	const rand = (n) => {
		seed = (seed * 1103515245 + 12345) % 2147483648;
		return seed % n;
	};
	let convo = null;
	for (let sent = 0; perClient ? sent < perClient : Date.now() < end; sent++) {
		if (!convo || rand(3) === 0) convo = [{ role: "system", content: SYSTEMS[rand(SYSTEMS.length)] }];
		convo.push({ role: "user", content: `Client ${k}: what does "${WORDS[rand(WORDS.length)]}" mean, and how is it used?` });
		const r = await chat(convo, rand(2) === 0);
		requests++;
		if (!r.ok) {
			errors++;
			convo = null;
			continue;
		}
		convo.push({ role: "assistant", content: r.text });
		if (convo.length > 9) convo = null;
	}
}
await Promise.all(Array.from({ length: clients }, (_, k) => client(k)));
const lookups = (await metric("tern_prefix_cache_lookups_total")) - before.lookups;
const hits = (await metric("tern_prefix_cache_hits_total")) - before.hits;
const prompt = (await metric("tern_prompt_tokens_total")) - before.prompt;
const cached = (await metric("tern_prompt_tokens_cached_total")) - before.cached;
console.log(JSON.stringify({ clients, seconds: perClient ? null : seconds, per_client: perClient || null, requests, errors, lookups, hits, hit_rate: lookups ? hits / lookups : 0, prompt_tokens: prompt, cached_tokens: cached, cached_share: prompt ? cached / prompt : 0 }));
