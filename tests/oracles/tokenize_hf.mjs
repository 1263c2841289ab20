// tokenize_hf.mjs — the reference tokenizer for tern's tokenizer.json tests: @huggingface/tokenizers (the
// tokenizers.js library transformers.js uses) encodes each string without special tokens.
//
//   node tokenize_hf.mjs TOKENIZER.json STRINGS.json
//       prints a JSON array with the ids of each string of the STRINGS.json array.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokPath, stringsPath] = process.argv.slice(2);
if (!tokPath || !stringsPath) {
	console.error("usage: tokenize_hf.mjs TOKENIZER.json STRINGS.json");
	process.exit(2);
}
const tokenizer = new Tokenizer(JSON.parse(readFileSync(tokPath, "utf8")), {});
const strings = JSON.parse(readFileSync(stringsPath, "utf8"));
process.stdout.write(JSON.stringify(strings.map((s) => tokenizer.encode(s, { add_special_tokens: false }).ids)));
