// client.mjs — keeps N chat streams going through the proxy in front of the tern replicas until a stop file appears,
// then waits for those in flight and judges every request it sent (tests/scale/run.sh drives it).
//
//   node tests/scale/client.mjs --url http://127.0.0.1:PORT --stop FILE [--streams 16] [--deadline 60]
//        [--killed REPLICA --killed-at FILE] [--json FILE]
//
// A request succeeds when its status is 200 and its stream ends with `data: [DONE]` after at least one token. Every
// request must end (succeed or fail) within --deadline seconds: one that does not is a hang, always a failure.
// Without --killed, every request must succeed (a rolling restart loses nothing). With --killed R (the replica that
// run.sh killed with SIGKILL; FILE holds the time it did, in ms since the epoch), a request may fail only if it was
// sent before the kill and was on R (the X-Tern-Replica header the proxy adds) or got no reply header at all; every
// request sent after the kill must succeed. Exit 0 when the verdict holds, 1 with the reasons otherwise.
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
	const i = args.indexOf(name);
	return i >= 0 ? args[i + 1] : dflt;
};
const base = opt("--url", "");
const stopFile = opt("--stop", "");
const streams = Number(opt("--streams", 16));
const deadlineMs = Number(opt("--deadline", 60)) * 1000;
const killed = opt("--killed", "");
const killedAtFile = opt("--killed-at", "");
const jsonOut = opt("--json", "");
if (!base || !stopFile) {
	console.error("client.mjs: --url and --stop are required");
	process.exit(2);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const model = (await (await fetch(`${base}/v1/models`)).json()).data[0].id;
const PROMPTS = ["Tell me a story about a heron.", "List the planets.", "What is a tern?", "Count to twenty."];
const records = [];

// One streamed chat completion; resolves to its record, never throws.
async function one(i) {
	const rec = { start: Date.now(), end: 0, status: 0, replica: "", tokens: 0, done: false, error: "" };
	const ctl = new AbortController();
	const timer = setTimeout(() => ctl.abort(), deadlineMs);
	try {
		const res = await fetch(`${base}/v1/chat/completions`, {
			method: "POST",
			headers: { "content-type": "application/json" },
			body: JSON.stringify({
				model,
				messages: [{ role: "user", content: PROMPTS[i % PROMPTS.length] }],
				max_tokens: 48 + (i % 5) * 40,
				temperature: 0.8,
				seed: i,
				stream: true,
			}),
			signal: ctl.signal,
		});
		rec.status = res.status;
		rec.replica = res.headers.get("x-tern-replica") ?? "";
		const text = await res.text();
		for (const line of text.split("\n")) {
			if (line === "data: [DONE]") rec.done = true;
			else if (line.startsWith("data: ") && line.includes('"delta"')) rec.tokens++;
		}
		if (res.status !== 200) rec.error = `status ${res.status}: ${text.slice(0, 200)}`;
		else if (!rec.done || rec.tokens === 0) rec.error = `stream ended without [DONE] after ${rec.tokens} chunks`;
	} catch (e) {
		rec.error = ctl.signal.aborted ? `hang: no end within ${deadlineMs / 1000} s` : `${e.name}: ${e.cause?.code ?? e.message}`;
	}
	clearTimeout(timer);
	rec.end = Date.now();
	records.push(rec);
	return rec;
}

let sent = 0;
async function worker() {
	while (!existsSync(stopFile)) await one(sent++);
}
await Promise.all(Array.from({ length: streams }, worker));

// ---- the verdict ----
const reasons = [];
const ok = records.filter((r) => !r.error);
const failed = records.filter((r) => r.error);
const byReplica = {};
for (const r of records) byReplica[r.replica || "(none)"] = (byReplica[r.replica || "(none)"] ?? 0) + 1;
const status5xx = records.filter((r) => r.status >= 500).length;
for (const r of failed.filter((r) => r.error.startsWith("hang"))) reasons.push(`a request hung: ${JSON.stringify(r)}`);
let killedAt = 0, held = 0;
if (!killed) {
	for (const r of failed.slice(0, 20)) reasons.push(`request failed: ${JSON.stringify(r)}`);
	if (status5xx) reasons.push(`${status5xx} replies were 5xx`);
} else {
	killedAt = Number(readFileSync(killedAtFile, "utf8"));
	held = records.filter((r) => r.replica === killed && r.start < killedAt && r.end >= killedAt).length;
	for (const r of failed) {
		if (r.start >= killedAt) reasons.push(`a request sent after the kill failed: ${JSON.stringify(r)}`);
		else if (r.replica && r.replica !== killed) reasons.push(`a request on a live replica failed: ${JSON.stringify(r)}`);
	}
	if (!records.some((r) => r.start >= killedAt)) reasons.push("no request was sent after the kill");
}
if (records.length < streams * 2) reasons.push(`only ${records.length} requests were sent`);
const summary = {
	requests: records.length,
	ok: ok.length,
	failed: failed.length,
	status_5xx: status5xx,
	by_replica: byReplica,
	...(killed ? { killed, held_by_killed: held, failed_after_kill: failed.filter((r) => r.start >= killedAt).length } : {}),
	seconds: records.length ? (Math.max(...records.map((r) => r.end)) - Math.min(...records.map((r) => r.start))) / 1000 : 0,
};
console.log(JSON.stringify(summary));
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ summary, reasons }, null, 2));
for (const r of reasons.slice(0, 30)) console.error(r);
process.exit(reasons.length ? 1 : 0);
