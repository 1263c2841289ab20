// prediction_server.mjs — OpenAI predicted outputs through the server, as a client sends them (text):
//   node bench/prediction_server.mjs --url http://127.0.0.1:8080 [--tokens 128] [--rounds 3]
// One plain greedy reply of --tokens tokens (ignore_eos) is the reference; then, alternating in each round, the same
// request plain and with a prediction that is the reply's own text (full agreement), the reply with about 3 words
// in 10 changed (~70%), and an unrelated text of the same length (0%). Every reply must equal the plain one (greedy
// speculation is lossless). Prints, per kind, the median tokens/s, the ratio to plain, and the share of drafted
// prediction tokens accepted (usage.completion_tokens_details.accepted_prediction_tokens / (accepted + rejected)).
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const url = args.url, tokens = Number(args.tokens || 128), rounds = Number(args.rounds || 3);
const messages = [{ role: "user", content: "Rewrite this configuration file with the port changed to 9090 and nothing else changed." }];

async function ask(prediction) {
  const body = { messages, max_tokens: tokens, temperature: 0, ignore_eos: true };
  if (prediction != null) body.prediction = { type: "content", content: prediction };
  const t0 = performance.now();
  const r = await fetch(url + "/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
                                                         body: JSON.stringify(body) });
  const j = await r.json();
  const secs = (performance.now() - t0) / 1000;
  if (!r.ok) throw new Error(`${r.status}: ${JSON.stringify(j)}`);
  const d = j.usage.completion_tokens_details || {};
  return { text: j.choices[0].message.content, n: j.usage.completion_tokens, secs,
           acc: d.accepted_prediction_tokens || 0, rej: d.rejected_prediction_tokens || 0 };
}

function changeWords(text) {
  let i = 0;
  return text.replace(/\S+/g, (w) => (i++ % 10 < 3 ? w.split("").reverse().join("") + "x" : w));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const ref = await ask(null);
const unrelated = "lorem ipsum dolor sit amet ".repeat(Math.ceil(ref.text.length / 27)).slice(0, ref.text.length);
const kinds = { plain: null, "prediction 100%": ref.text, "prediction ~70%": changeWords(ref.text),
                "prediction 0%": unrelated };
const seen = Object.fromEntries(Object.keys(kinds).map((k) => [k, { tps: [], acc: 0, rej: 0 }]));
let mismatches = 0;
for (let r = 0; r < rounds; r++)
  for (const [kind, pred] of Object.entries(kinds)) {
    const got = await ask(pred);
    if (got.text !== ref.text) mismatches++;
    seen[kind].tps.push(got.n / got.secs);
    seen[kind].acc += got.acc;
    seen[kind].rej += got.rej;
  }
const plain = median(seen.plain.tps);
console.log(`${tokens} tokens, ${rounds} rounds, replies differing from plain: ${mismatches}`);
for (const [kind, s] of Object.entries(seen)) {
  const share = s.acc + s.rej ? `${((100 * s.acc) / (s.acc + s.rej)).toFixed(0)}% of drafted accepted` : "";
  console.log(`${kind.padEnd(16)} ${median(s.tps).toFixed(1).padStart(7)} tok/s  ${(median(s.tps) / plain).toFixed(2)}x  ` +
              `accepted ${s.acc}, rejected ${s.rej} ${share}`);
}
process.exit(mismatches ? 1 : 0);
