// render_jinja.mjs — the reference chat-template renderer for tern's Jinja tests:
// renders templates with @huggingface/jinja (what transformers.js uses; Hugging Face's
// trim_blocks/lstrip_blocks settings) so tests can compare tern's output byte for byte.
//
//   node render_jinja.mjs TEMPLATE CONTEXT.json
//       prints the rendering to stdout; on a template error prints "error: MESSAGE" to
//       stderr and exits 1.
//   node render_jinja.mjs --batch OUTDIR TEMPLATE... -- CONTEXT.json...
//       renders every template with every context; writes OUTDIR/T__C.out (the rendering)
//       or OUTDIR/T__C.err (the error message), T and C being the file names without
//       their extensions.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { Template } from "@huggingface/jinja";

function render(templatePath, contextPath) {
	const source = readFileSync(templatePath, "utf8");
	const context = JSON.parse(readFileSync(contextPath, "utf8"));
	try {
		return { out: new Template(source).render(context) };
	} catch (e) {
		return { err: String(e && e.message !== undefined ? e.message : e) };
	}
}

const args = process.argv.slice(2);
if (args[0] === "--batch") {
	const outdir = args[1];
	const sep = args.indexOf("--");
	if (!outdir || sep < 0) {
		console.error("usage: render_jinja.mjs --batch OUTDIR TEMPLATE... -- CONTEXT...");
		process.exit(2);
	}
	const templates = args.slice(2, sep);
	const contexts = args.slice(sep + 1);
	for (const t of templates) {
		for (const c of contexts) {
			const name = basename(t).replace(/\.jinja$/, "") + "__" + basename(c).replace(/\.json$/, "");
			const r = render(t, c);
			if (r.err !== undefined) writeFileSync(join(outdir, name + ".err"), r.err);
			else writeFileSync(join(outdir, name + ".out"), r.out);
		}
	}
} else if (args.length === 2) {
	const r = render(args[0], args[1]);
	if (r.err !== undefined) {
		process.stderr.write("error: " + r.err + "\n");
		process.exit(1);
	}
	process.stdout.write(r.out);
} else {
	console.error("usage: render_jinja.mjs TEMPLATE CONTEXT.json | --batch OUTDIR TEMPLATE... -- CONTEXT...");
	process.exit(2);
}
