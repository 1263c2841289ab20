// browser.mjs — the chat page in a real browser (Debian's chromium, headless, driven by puppeteer-core) against a
// running `tern serve` that requires an API key:
//   node tests/webui/browser.mjs --url http://127.0.0.1:PORT --key KEY --pid SERVER_PID --wav CLIP.wav
//                                [--chromium /usr/bin/chromium]
// Checks, in order: the page asks for the key and then shows the model's name and context; a message gets a reply
// streamed piece by piece (seen in the page as a growing text) with tokens/s and prompt-cache figures; an audio
// clip attached to a message is sent as input_audio and answered; a reply
// whose text is markup (forced by a JSON-schema constraint added to the page's request) is shown as text and runs
// nothing; Stop ends a long reply; New chat starts empty and the old chat survives a reload; a 400 from the server
// is shown plainly; and when the server goes away (SIGKILL to --pid) the page says so. Exit 0 when all pass.
import { createRequire } from "node:module";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const puppeteer = require("puppeteer-core");

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const url = args.url, key = args.key, pid = Number(args.pid);
const chromium = args.chromium || "/usr/bin/chromium";

let failures = 0;
function check(ok, what, detail = "") {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? ": " + detail : ""}`);
  if (!ok) failures++;
}

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
const page = await browser.newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("dialog", (d) => { pageErrors.push("dialog: " + d.message()); d.dismiss(); });

// Extra fields merged into the page's next /v1/chat/completions body (the test's hand on the request; the page
// itself sends only what a user set).
let extra = null, lastBody = null;
await page.setRequestInterception(true);
page.on("request", (req) => {
  if (req.method() === "POST" && req.url().endsWith("/v1/chat/completions")) lastBody = JSON.parse(req.postData());
  if (extra && req.method() === "POST" && req.url().endsWith("/v1/chat/completions")) {
    const body = Object.assign(JSON.parse(req.postData()), extra);
    return req.continue({ postData: JSON.stringify(body) });
  }
  return req.continue();
});

const text = (sel) => page.$eval(sel, (e) => e.textContent);
const errors = () => page.$$eval("#log .error", (es) => es.map((e) => e.textContent));
async function setField(id, value) {
  await page.$eval("#" + id, (e, v) => { e.value = v; e.dispatchEvent(new Event("change")); }, String(value));
}
async function sendAndWait(message, timeout = 60000) {
  await page.type("#prompt", message);
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.getElementById("stop").disabled === false, { timeout: 5000 }).catch(() => {});
  await page.waitForFunction(() => document.getElementById("stop").disabled === true, { timeout });
}

try {
  // 1. The page, the key, the model.
  const resp = await page.goto(url + "/", { waitUntil: "load" });
  check(resp.status() === 200 && (resp.headers()["content-security-policy"] || "").includes("default-src 'none'"),
    "GET / serves the page with a content security policy", String(resp.status()));
  await page.waitForFunction(() => document.querySelector("#log .error"), { timeout: 10000 });
  const keyErr = (await errors()).join(" ");
  check(keyErr.includes("401") && keyErr.includes("API key"), "without the key the page says it needs one", keyErr);
  await setField("apikey", key);
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("context"), { timeout: 10000 });
  const modelName = await text("#model"), status = await text("#status");
  check(modelName.length > 0 && modelName !== "tern", "the model's name from /v1/models", modelName);
  check(/context [\d,]+ tokens/.test(status), "the context size from /v1/models", status);
  check(!(await page.$eval("#attach", (e) => e.hidden)), "the audio attachment is offered (the model has an audio tower)");
  await page.evaluate(() => document.querySelectorAll("#log .error").forEach((e) => e.remove()));

  // 2. A streamed reply: record every text the reply shows while it grows.
  await setField("temperature", 0);
  await setField("max_tokens", 400);
  extra = { ignore_eos: true };
  await page.evaluate(() => {
    window.__snapshots = [];
    new MutationObserver(() => {
      const b = document.querySelectorAll("#log .msg.assistant .body");
      const t = b.length ? b[b.length - 1].textContent : "";
      if (t && t !== window.__snapshots[window.__snapshots.length - 1]) window.__snapshots.push(t);
    }).observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
  });
  await sendAndWait("Say something long.");
  const snaps = await page.evaluate(() => window.__snapshots);
  const final = snaps[snaps.length - 1] || "";
  const growing = snaps.slice(0, -1).filter((s) => s.length < final.length).length;
  check(growing >= 4, "the reply appears piece by piece while it streams", `${snaps.length} distinct texts seen`);
  const roles = lastBody.messages.map((m) => m.role).join(",");
  check(roles === "user", "the request carries the conversation, ending with the user's turn", roles);
  const stats = await page.$$eval("#log .msg.assistant .stats", (es) => es.map((e) => e.textContent));
  const last = stats[stats.length - 1] || "";
  check(/400 tokens/.test(last) && /tok\/s/.test(last) && /from the prompt cache/.test(last),
    "tokens/s and prompt-cache figures under the reply", last);

  // 2b. An audio clip attached to a message goes out as an input_audio part and gets a reply.
  extra = null;
  await setField("max_tokens", 8);
  const [input] = await page.$$("#audiofile");
  await input.uploadFile(args.wav);
  await page.waitForFunction(() => document.getElementById("attachment").textContent.includes(".wav"), { timeout: 5000 });
  await sendAndWait("What is said in this clip?");
  const parts = lastBody.messages[lastBody.messages.length - 1].content;
  const audioPart = Array.isArray(parts) && parts.find((p) => p.type === "input_audio");
  const audioReply = await page.$$eval("#log .msg.assistant .body", (es) => es[es.length - 1].textContent);
  check(audioPart && audioPart.input_audio.format === "wav" && audioPart.input_audio.data.length > 1000 &&
        audioReply.length > 0 && (await errors()).length === 0,
    "an attached clip is sent as input_audio and answered",
    `${audioPart ? audioPart.input_audio.data.length : 0} base64 bytes ${(await errors()).join(" ")}`);

  // 3. Markup from the model is text: force the reply with a constraint and look for what it would do as HTML.
  await setField("max_tokens", 200);
  const evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"><b>bold?</b>';
  extra = { response_format: { type: "json_schema", json_schema: { name: "x", schema: { const: evil } } } };
  await sendAndWait("Now write some HTML.");
  const shown = await page.$$eval("#log .msg.assistant .body", (es) => es[es.length - 1].textContent);
  const tags = await page.$$eval("#log script, #log img, #log b", (es) => es.length);
  const pwned = await page.evaluate(() => window.pwned);
  check(shown.includes("<script>window.pwned=1</script>") && tags === 0 && pwned === undefined,
    "a reply containing <script> and <img onerror> is shown as text and runs nothing", `${shown.slice(0, 60)}… tags=${tags}`);

  // 4. Stop: a reply that would run to 3,000 tokens, stopped after it has started.
  extra = { ignore_eos: true };
  await setField("max_tokens", 3000);
  await page.type("#prompt", "Go on for a long time.");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => {
    const b = document.querySelectorAll("#log .msg.assistant .body");
    return b.length && b[b.length - 1].textContent.length > 20;
  }, { timeout: 20000 });
  await page.click("#stop");
  await page.waitForFunction(() => document.getElementById("stop").disabled, { timeout: 10000 });
  const stopped = await page.$$eval("#log .msg.assistant .stats", (es) => es[es.length - 1].textContent);
  const lenAfter = await page.$$eval("#log .msg.assistant .body", (es) => es[es.length - 1].textContent.length);
  await new Promise((r) => setTimeout(r, 500));
  const lenLater = await page.$$eval("#log .msg.assistant .body", (es) => es[es.length - 1].textContent.length);
  check(stopped.includes("stopped") && lenAfter === lenLater && (await errors()).length === 0,
    "Stop ends the reply (marked stopped, no more text, no error)", stopped);
  extra = null;
  await setField("max_tokens", 16);

  // 5. New chat, and the old one kept in the browser across a reload.
  await page.click("#newchat");
  const empty = await page.$$eval("#log .msg", (es) => es.length);
  const listed = await page.$$eval("#chats li", (es) => es.length);
  check(empty === 0 && listed === 2, "New chat starts empty beside the old one", `${empty} messages, ${listed} chats`);
  await sendAndWait("Hello again.");
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("context"), { timeout: 10000 });
  const afterReload = await page.$$eval("#chats li", (es) => es.map((e) => e.textContent));
  check(afterReload.length === 2 && afterReload[0].startsWith("Hello again.") && afterReload[1].startsWith("Say something"),
    "conversations survive a reload (kept in the browser)", JSON.stringify(afterReload));
  await page.click("#chats li:nth-child(2) span");
  const oldMsgs = await page.$$eval("#log .msg", (es) => es.length);
  check(oldMsgs === 8, "an older chat opens with its messages", String(oldMsgs));
  await page.click("#newchat");

  // 6. A 4xx from the server is shown plainly.
  await setField("temperature", 7);
  await sendAndWait("This should be refused.");
  const e400 = (await errors()).join(" ");
  check(e400.includes("400") && e400.includes("temperature"), "a 400 is shown with the server's message", e400);
  await setField("temperature", 0);

  // 7. The server goes away.
  process.kill(pid, "SIGKILL");
  await new Promise((r) => setTimeout(r, 300));
  await sendAndWait("Anyone there?", 15000);
  const gone = (await errors()).join(" ");
  check(/did not answer|closed before/.test(gone), "a server that went away is reported", gone);

  check(pageErrors.length === 0, "no script errors in the page", pageErrors.join("; "));
} catch (e) {
  check(false, "the browser session", e.stack || String(e));
} finally {
  await browser.close();
}
process.exit(failures ? 1 : 0);
