// openai_structured.mjs — structured output through a running `tern serve` with the official `openai` npm client, on
// a model with the real 262,144-token Gemma 4 vocabulary and random weights: whatever it writes, the token mask alone
// must make it valid. Every reply to a json_schema request must parse and validate (ajv); json_object replies must
// parse to objects; a GBNF `grammar` must be respected; tool_choice "required" and a named function must produce a
// well-formed call whose arguments validate against the tool's parameters; greedy and sampled; several requests at
// once beside unconstrained ones; errors as 400s.
//   node openai_structured.mjs http://127.0.0.1:PORT MODEL_ID
// Prints "ok N checks" and exits 0, or throws (exit 1) naming the failed check.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(new URL("../oracles/package.json", import.meta.url));
const { OpenAI, BadRequestError } = require("openai");
const Ajv = require("ajv");

const [base, modelId] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 600000 });
const ajv = new Ajv({ strict: false });
let checks = 0;
const check = (cond, what) => {
	assert.ok(cond, what);
	checks++;
};

// A random model wanders: these biases only make documents end sooner (closing quotes, braces, brackets); the
// grammar alone decides what is valid.
const logit_bias = { 236775: 12, 236783: 10, 236842: 10, 25938: 12, 827: 8 };
const messages = [{ role: "user", content: "Reply with the JSON document asked for." }];

const schemas = {
	person: {
		type: "object",
		properties: {
			name: { type: "string", maxLength: 12 },
			age: { type: "integer", minimum: 0, maximum: 120 },
			address: {
				type: "object",
				properties: { city: { type: "string", maxLength: 10 }, zip: { type: "string", pattern: "^[0-9]{5}$" } },
				required: ["city", "zip"],
				additionalProperties: false,
			},
		},
		required: ["name", "age", "address"],
		additionalProperties: false,
	},
	tags: {
		type: "object",
		properties: { tags: { type: "array", items: { type: "string", enum: ["red", "green", "blue"] }, minItems: 1, maxItems: 4 } },
		required: ["tags"],
		additionalProperties: false,
	},
	any_of: {
		type: "object",
		properties: { value: { anyOf: [{ type: "integer" }, { type: "string", maxLength: 8 }, { type: "null" }] } },
		required: ["value"],
		additionalProperties: false,
	},
	tree: {
		$defs: {
			node: {
				type: "object",
				properties: { v: { type: "integer", minimum: -5, maximum: 5 }, kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 } },
				required: ["v", "kids"],
				additionalProperties: false,
			},
		},
		$ref: "#/$defs/node",
	},
	text: {
		type: "object",
		properties: { text: { type: "string", minLength: 1, maxLength: 16 }, lang: { type: "string", enum: ["en", "fr", "中文"] } },
		required: ["text", "lang"],
		additionalProperties: false,
	},
	scalars: {
		type: "object",
		properties: {
			ok: { type: "boolean" },
			ratio: { type: "number" },
			kind: { const: "fixed" },
			level: { enum: [1, 2, "three", null] },
		},
		required: ["ok", "ratio", "kind", "level"],
		additionalProperties: false,
	},
};

const ask = (extra) => ({ model: modelId, messages, max_tokens: 400, logit_bias, ...extra });

// json_schema, strict, greedy and two seeds
for (const [name, schema] of Object.entries(schemas)) {
	const validate = ajv.compile(schema);
	for (const sampling of [{ temperature: 0 }, { temperature: 1, seed: 7 }, { temperature: 1, seed: 8 }]) {
		const r = await client.chat.completions.create(
			ask({ ...sampling, response_format: { type: "json_schema", json_schema: { name, schema, strict: true } } }),
		);
		const text = r.choices[0].message.content;
		check(r.choices[0].finish_reason === "stop", `${name} ${JSON.stringify(sampling)}: finished (${r.choices[0].finish_reason}): ${text}`);
		let doc;
		try {
			doc = JSON.parse(text);
		} catch (e) {
			assert.fail(`${name} ${JSON.stringify(sampling)}: not JSON: ${text}`);
		}
		check(validate(doc), `${name} ${JSON.stringify(sampling)}: ${text} — ${ajv.errorsText(validate.errors)}`);
	}
}

// json_object: any object
for (const seed of [1, 2, 3]) {
	const r = await client.chat.completions.create(ask({ temperature: 1, seed, response_format: { type: "json_object" } }));
	const text = r.choices[0].message.content;
	const doc = JSON.parse(text);
	check(doc !== null && typeof doc === "object" && !Array.isArray(doc), `json_object: ${text}`);
}

// a GBNF grammar (llama.cpp's field)
const grammar = 'root ::= ("yes" | "no") ", " [0-9]{2} " " [a-z]{1,5}';
for (const seed of [1, 2]) {
	const r = await client.chat.completions.create(ask({ temperature: 1, seed, grammar }));
	check(/^(yes|no), [0-9]{2} [a-z]{1,5}$/.test(r.choices[0].message.content), `grammar: ${r.choices[0].message.content}`);
}

// max_tokens inside the document: "length", and a prefix of a valid document
const cut = await client.chat.completions.create(
	ask({ temperature: 0, max_tokens: 3, response_format: { type: "json_schema", json_schema: { name: "p", schema: schemas.person, strict: true } } }),
);
check(cut.choices[0].finish_reason === "length" && cut.choices[0].message.content.startsWith("{"), `cut: ${cut.choices[0].finish_reason}`);

// tool_choice: required (any tool) and a named one
const tools = [
	{
		type: "function",
		function: {
			name: "get_weather",
			description: "Weather for a city",
			parameters: {
				type: "object",
				properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
				required: ["city", "days"],
			},
		},
	},
	{
		type: "function",
		function: {
			name: "set_alarm",
			description: "Set an alarm",
			parameters: {
				type: "object",
				properties: { hour: { type: "integer", minimum: 0, maximum: 23 }, label: { type: "string", enum: ["work", "gym"] } },
				required: ["hour"],
			},
		},
	},
];
const byName = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
for (const [choice, seed] of [["required", 3], ["required", 4], [{ type: "function", function: { name: "set_alarm" } }, 5]]) {
	const r = await client.chat.completions.create(ask({ temperature: 1, seed, tools, tool_choice: choice }));
	const c = r.choices[0];
	check(c.finish_reason === "tool_calls" && c.message.tool_calls?.length === 1, `tool_choice ${JSON.stringify(choice)}: ${JSON.stringify(c)}`);
	const call = c.message.tool_calls[0].function;
	if (typeof choice === "object") check(call.name === "set_alarm", "the named function is called");
	const args = JSON.parse(call.arguments);
	check(byName[call.name] && byName[call.name](args), `arguments valid: ${call.name} ${call.arguments}`);
}

// several at once, constrained beside unconstrained: the plain greedy reply is what it is alone
const plainReq = { model: modelId, messages, max_tokens: 12, temperature: 0 };
const alone = (await client.chat.completions.create(plainReq)).choices[0].message.content;
const mixed = await Promise.all([
	client.chat.completions.create(plainReq),
	client.chat.completions.create(ask({ temperature: 1, seed: 11, response_format: { type: "json_schema", json_schema: { name: "t", schema: schemas.tags, strict: true } } })),
	client.chat.completions.create(ask({ temperature: 0, response_format: { type: "json_object" } })),
	client.chat.completions.create(plainReq),
]);
check(mixed[0].choices[0].message.content === alone && mixed[3].choices[0].message.content === alone, "unconstrained rows unchanged by constrained ones");
check(ajv.validate(schemas.tags, JSON.parse(mixed[1].choices[0].message.content)), "batched json_schema validates");
JSON.parse(mixed[2].choices[0].message.content);
checks++;

// errors: 400s naming the problem
const expect400 = async (body, re, what) => {
	try {
		await client.chat.completions.create({ model: modelId, messages, max_tokens: 4, ...body });
	} catch (e) {
		check(e instanceof BadRequestError && re.test(e.message), `${what}: got ${e.status} ${e.message}`);
		return;
	}
	assert.fail(`${what}: no error`);
};
await expect400(
	{ response_format: { type: "json_schema", json_schema: { name: "x", strict: true, schema: { type: "object", properties: { a: { not: { type: "string" } } }, required: ["a"], additionalProperties: false } } } },
	/not/,
	"unsupported keyword under strict",
);
await expect400(
	{ response_format: { type: "json_schema", json_schema: { name: "x", strict: true, schema: { type: "object", properties: { a: { type: "string" } }, required: ["a"] } } } },
	/additionalProperties/,
	"strict needs additionalProperties false",
);
await expect400(
	{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/$defs/missing" } } } },
	/missing|resolve|\$ref/,
	"a $ref that does not resolve",
);
await expect400({ grammar: "root ::= (" }, /grammar/, "a grammar that does not compile");
await expect400(
	{ max_tokens: 10, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", minLength: 4000 } } } },
	/shortest reply takes at least/,
	"a schema whose shortest document cannot fit",
);
await expect400({ response_format: { type: "json_schema" } }, /json_schema/, "json_schema without a schema");

console.log(`ok ${checks} checks`);
