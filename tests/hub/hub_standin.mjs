// hub_standin.mjs — a local stand-in for the Hugging Face hub's download protocol, for tests of `tern get`:
//   node tests/hub/hub_standin.mjs REPOS_DIR      (prints "listening PORT" once it listens on 127.0.0.1)
// REPOS_DIR/ORG/NAME/... are the repositories, each at one commit (the SHA-1 of its name). Files over 4 KiB, and
// every *.safetensors / *.gguf, are LFS files: /resolve answers them with a 302 to /cdn/SHA256 carrying
// X-Linked-Etag and X-Linked-Size, as the hub does; other files answer 200 with their git blob id as ETag.
// The hub's answers for bad names: an unknown repository 401 RepoNotFound, an unknown revision 404
// RevisionNotFound; a repository whose name contains "gated" needs "Authorization: Bearer hf_test_token".
// Faults for the tests, set by POST /_control {"cut": {"file": P, "after": N, "times": K}, "corrupt": [P],
// "slow": {"file": P, "bytesPerSec": B}} (each replaces the last; {} clears); GET /_log lists every request seen
// (method, url, range). POST /api/models/ORG/NAME/paths-info/REV answers @huggingface/hub's downloader.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import crypto from "node:crypto";

const root = process.argv[2];
const repos = new Map(); // "ORG/NAME" -> {commit, files: Map(path -> {size, lfs, etag, abs})}
for (const org of fs.readdirSync(root)) {
  for (const name of fs.readdirSync(path.join(root, org))) {
    const id = `${org}/${name}`, dir = path.join(root, id), files = new Map();
    const walk = (rel) => {
      for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
        const r = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) { walk(r); continue; }
        const abs = path.join(dir, r), bytes = fs.readFileSync(abs);
        const lfs = bytes.length > 4096 || /\.(safetensors|gguf)$/.test(r);
        const etag = lfs ? crypto.createHash("sha256").update(bytes).digest("hex")
          : crypto.createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
        files.set(r, { size: bytes.length, lfs, etag, abs });
      }
    };
    walk("");
    repos.set(id, { commit: crypto.createHash("sha1").update(id).digest("hex"), files });
  }
}

let control = {};
const log = [];
const byEtag = new Map();
for (const r of repos.values()) for (const f of r.files.values()) byEtag.set(f.etag, f);

function fail(res, status, code, message) {
  res.writeHead(status, { "Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message });
  res.end(JSON.stringify({ error: message }));
}

function authorized(req, id) {
  return !id.includes("gated") || req.headers.authorization === "Bearer hf_test_token";
}

// Sends file f (from the Range header's start), applying the faults set for it.
function sendFile(req, res, rel, f, headers) {
  let bytes = fs.readFileSync(f.abs);
  if ((control.corrupt || []).includes(rel)) { bytes = Buffer.from(bytes); bytes[bytes.length >> 1] ^= 0x5a; }
  let start = 0, end = bytes.length - 1;
  const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || "");
  if (m) {
    start = Number(m[1]);
    if (m[2] !== "") end = Math.min(end, Number(m[2]));
    if (start >= bytes.length || start > end) {
      res.writeHead(416, { "Content-Range": `bytes */${bytes.length}` });
      return res.end();
    }
    res.writeHead(206, { ...headers, "Content-Length": end - start + 1, "Accept-Ranges": "bytes",
                         "Content-Range": `bytes ${start}-${end}/${bytes.length}` });
  } else res.writeHead(200, { ...headers, "Content-Length": bytes.length, "Accept-Ranges": "bytes" });
  const body = bytes.subarray(start, end + 1);
  const cut = control.cut && control.cut.file === rel && control.cut.times > 0 ? control.cut : null;
  if (cut) {
    cut.times--;
    const n = Math.max(0, cut.after - start);
    res.write(body.subarray(0, n), () => setTimeout(() => req.socket.destroy(), 50));
    return;
  }
  const slow = control.slow && control.slow.file === rel ? control.slow : null;
  if (!slow) return res.end(body);
  let off = 0;
  const step = Math.max(1, Math.floor(slow.bytesPerSec / 10));
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer);
    const piece = body.subarray(off, off + step);
    off += piece.length;
    if (off >= body.length) { clearInterval(timer); res.end(piece); } else res.write(piece);
  }, 100);
  res.on("close", () => clearInterval(timer));
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  log.push({ method: req.method, url: req.url, range: req.headers.range || null });
  if (url.pathname === "/_control" && req.method === "POST") {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => { control = JSON.parse(body || "{}"); res.end("ok"); });
    return;
  }
  if (url.pathname === "/_log") { res.writeHead(200, { "Content-Type": "application/json" }); return res.end(JSON.stringify(log)); }
  let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
  if (m) {
    const id = m[1], rev = decodeURIComponent(m[2]), r = repos.get(id);
    if (!r) return fail(res, 401, "RepoNotFound", `Repository Not Found for url: ${req.url}.`);
    if (!authorized(req, id)) return fail(res, 401, "GatedRepo", `Access to model ${id} is restricted.`);
    if (rev !== "main" && rev !== r.commit) return fail(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
    const siblings = [...r.files].map(([p, f]) => f.lfs
      ? { rfilename: p, size: f.size, blobId: crypto.createHash("sha1").update(p).digest("hex"),
          lfs: { sha256: f.etag, size: f.size, pointerSize: 134 } }
      : { rfilename: p, size: f.size, blobId: f.etag });
    res.writeHead(200, { "Content-Type": "application/json" });
    return res.end(JSON.stringify({ _id: "x", id, modelId: id, sha: r.commit, siblings }));
  }
  // What @huggingface/hub's downloadFileToCacheDir asks first (the test's second, independent downloader).
  m = /^\/api\/models\/([^/]+\/[^/]+)\/paths-info\/([^/]+)$/.exec(url.pathname);
  if (m && req.method === "POST") {
    const r = repos.get(m[1]);
    if (!r) return fail(res, 401, "RepoNotFound", "Repository not found");
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const out = JSON.parse(body).paths.filter((p) => r.files.has(p)).map((p) => {
        const f = r.files.get(p);
        return { type: "file", path: p, size: f.size, oid: f.lfs ? crypto.createHash("sha1").update(p).digest("hex") : f.etag,
                 ...(f.lfs ? { lfs: { oid: f.etag, size: f.size, pointerSize: 134 } } : {}),
                 lastCommit: { id: r.commit, title: "x", date: "2026-01-01T00:00:00Z" } };
      });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(out));
    });
    return;
  }
  m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
  if (m) {
    const id = m[1], rev = decodeURIComponent(m[2]), rel = m[3].split("/").map(decodeURIComponent).join("/");
    const r = repos.get(id);
    if (!r) return fail(res, 401, "RepoNotFound", "Repository not found");
    if (!authorized(req, id)) return fail(res, 401, "GatedRepo", "restricted");
    if (rev !== "main" && rev !== r.commit) return fail(res, 404, "RevisionNotFound", "Invalid rev id");
    const f = r.files.get(rel);
    if (!f) return fail(res, 404, "EntryNotFound", `${rel} does not exist`);
    if (f.lfs) {
      res.writeHead(302, { Location: `/cdn/${f.etag}?file=${encodeURIComponent(rel)}`, "X-Repo-Commit": r.commit,
                           "X-Linked-Etag": `"${f.etag}"`, "X-Linked-Size": String(f.size), ETag: `"${f.etag}"` });
      return res.end();
    }
    return sendFile(req, res, rel, f, { ETag: `"${f.etag}"`, "X-Repo-Commit": r.commit });
  }
  m = /^\/cdn\/([0-9a-f]{64})$/.exec(url.pathname);
  if (m && byEtag.has(m[1]))
    return sendFile(req, res, url.searchParams.get("file"), byEtag.get(m[1]), { ETag: `"${m[1]}"` });
  fail(res, 404, "NotFound", "not found");
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
