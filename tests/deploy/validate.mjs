// validate.mjs — the deployment files (deploy/) checked without a cluster or a Docker engine:
//   1. every Kubernetes object in deploy/kubernetes validates against its published schema: the built-in kinds and
//      HTTPRoute with the schemas kubernetes-models generates from the Kubernetes and Gateway API OpenAPI
//      definitions, the InferencePool against its CRD (tests/data/k8s), unknown fields refused;
//   2. the objects agree with each other and with tern: every flag given to `tern serve` is one it has, the probes
//      and ports are the ones it serves, the grace period outlasts the drain, the selectors find the pods, and the
//      metric names the endpoint picker is configured with are metrics a running tern exports, with the type and
//      labels the picker reads;
//   3. the compose alternative: its proxy configuration is valid HAProxy (when haproxy is installed), its replicas'
//      flags exist, its grace period outlasts the drain; the Dockerfile's runtime packages hold every library the
//      built binary needs (on Debian, where dpkg can say which package holds a library).
// Exit 0 when every check holds, 1 with the reasons otherwise.
//
//   node tests/deploy/validate.mjs TERN_BIN
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const tern = process.argv[2];
if (!tern) {
	console.error("usage: node tests/deploy/validate.mjs TERN_BIN");
	process.exit(2);
}
const root = new URL("../../", import.meta.url).pathname;
const modules = join(root, "tests/oracles/node_modules/");
const YAML = await import(modules + "yaml/dist/index.js");
const Ajv = (await import(modules + "ajv/dist/ajv.js")).default;
const k8s = {
	v1: await import(modules + "kubernetes-models/v1/index.js"),
	"apps/v1": await import(modules + "kubernetes-models/apps/v1/index.js"),
	"batch/v1": await import(modules + "kubernetes-models/batch/v1/index.js"),
	"rbac.authorization.k8s.io/v1": await import(modules + "kubernetes-models/rbac.authorization.k8s.io/v1/index.js"),
	"gateway.networking.k8s.io/v1": await import(
		modules + "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/index.js"
	),
};

const failures = [];
const check = (ok, what) => {
	if (!ok) failures.push(what);
	return ok;
};
const docsOf = (file) =>
	YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => {
		if (d.errors.length) failures.push(`${file}: ${d.errors[0].message}`);
		return d.toJS();
	});

// ---- 1. schemas ----
// The CRD's schema, made strict the way `kubeconform -strict` is: an object that lists its properties has no others.
function strict(schema) {
	if (schema && typeof schema === "object") {
		if (schema.type === "object" && schema.properties && schema.additionalProperties === undefined)
			schema.additionalProperties = false;
		for (const v of Object.values(schema)) strict(v);
	}
	return schema;
}
const crd = YAML.parse(readFileSync(join(root, "tests/data/k8s/inference.networking.k8s.io_inferencepools.yaml"), "utf8"));
const poolSchema = strict(crd.spec.versions.find((v) => v.name === "v1").schema.openAPIV3Schema);
poolSchema.properties.metadata = { type: "object" }; // validated by the API server's own ObjectMeta rules
const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
ajv.addFormat("int64", { type: "number", validate: Number.isInteger });
ajv.addFormat("date-time", { type: "string", validate: (s) => !Number.isNaN(Date.parse(s)) });
const validatePool = ajv.compile(poolSchema);

const dir = join(root, "deploy/kubernetes");
const objects = [];
for (const f of readdirSync(dir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort())
	for (const o of docsOf(join(dir, f))) objects.push({ file: f, o });
const kust = YAML.parse(readFileSync(join(dir, "kustomization.yaml"), "utf8"));
check(
	JSON.stringify([...kust.resources].sort()) === JSON.stringify([...new Set(objects.map((x) => x.file))].sort()),
	`kustomization.yaml lists ${kust.resources} but the folder holds ${[...new Set(objects.map((x) => x.file))]}`,
);
for (const { file, o } of objects) {
	const where = `${file}: ${o.kind} ${o.metadata?.name}`;
	if (o.apiVersion === "inference.networking.k8s.io/v1" && o.kind === "InferencePool") {
		if (!validatePool(o)) failures.push(`${where}: ${ajv.errorsText(validatePool.errors)}`);
		// the CRD's CEL rule, which JSON Schema cannot say
		const ref = o.spec?.endpointPickerRef;
		check(!ref || (ref.kind ?? "Service") !== "Service" || ref.port, `${where}: endpointPickerRef needs a port`);
		continue;
	}
	const Model = k8s[o.apiVersion]?.[o.kind];
	if (!check(Model, `${where}: no schema for ${o.apiVersion} ${o.kind}`)) continue;
	try {
		new Model(o).validate();
	} catch (e) {
		failures.push(`${where}: ${e.message.split("\n")[0]}`);
	}
}

// ---- 2. the objects agree with each other and with tern ----
const find = (kind, name) => objects.find((x) => x.o.kind === kind && x.o.metadata.name === name)?.o;
const serveHelp = execFileSync(tern, ["serve", "--help"], { encoding: "utf8" });
const serveFlags = new Set(serveHelp.match(/--?[a-z][a-z0-9-]*/g));
const flagValue = (args, flag) => {
	const i = args.indexOf(flag);
	return i >= 0 ? args[i + 1] : undefined;
};
function checkServeArgs(where, args) {
	check(args[0] === "serve", `${where}: the command is not 'tern serve'`);
	for (const a of args) if (a.startsWith("-")) check(serveFlags.has(a), `${where}: tern serve has no flag ${a}`);
}
const subset = (small, big) => Object.entries(small ?? {}).every(([k, v]) => big?.[k] === v);

const dep = find("Deployment", "tern");
const pod = dep.spec.template;
const ctr = pod.spec.containers.find((c) => c.name === "tern");
checkServeArgs("tern.yaml", ctr.args);
const port = Number(flagValue(ctr.args, "--port"));
const http = ctr.ports.find((p) => p.name === "http");
check(http?.containerPort === port, `tern.yaml: containerPort ${http?.containerPort} is not --port ${port}`);
check(flagValue(ctr.args, "--host") === "0.0.0.0", "tern.yaml: --host must be 0.0.0.0 (reachable from other pods)");
check(ctr.readinessProbe?.httpGet?.path === "/health/ready", "tern.yaml: the readiness probe is not /health/ready");
check(ctr.livenessProbe?.httpGet?.path === "/health/live", "tern.yaml: the liveness probe is not /health/live");
const drain = Number(flagValue(ctr.args, "--drain-timeout"));
const preStop = Number(ctr.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
check(
	pod.spec.terminationGracePeriodSeconds > drain + preStop,
	`tern.yaml: terminationGracePeriodSeconds ${pod.spec.terminationGracePeriodSeconds} does not outlast the drain (${drain} s) and preStop (${preStop} s)`,
);
check(subset(dep.spec.selector.matchLabels, pod.metadata.labels), "tern.yaml: the Deployment's selector misses its pods");
check(dep.spec.strategy?.rollingUpdate?.maxUnavailable === 0, "tern.yaml: a rolling update may take replicas away first");
check(
	Number(flagValue(ctr.args, "--threads")) <= Number(ctr.resources.requests.cpu),
	"tern.yaml: more --threads than requested cpus",
);
const svc = find("Service", "tern");
check(subset(svc.spec.selector, pod.metadata.labels), "tern.yaml: the Service's selector misses the pods");
check(svc.spec.ports.every((p) => p.targetPort === "http"), "tern.yaml: the Service targets another port");
const cacheMount = ctr.volumeMounts.find((m) => m.name === "cache");
check(cacheMount?.readOnly === true, "tern.yaml: serving pods must mount the model cache read-only (one writer: the Job)");
const claim = pod.spec.volumes.find((v) => v.name === "cache")?.persistentVolumeClaim?.claimName;
check(find("PersistentVolumeClaim", claim), `tern.yaml: no PersistentVolumeClaim ${claim}`);
const envOf = (c) => Object.fromEntries((c.env ?? []).filter((e) => "value" in e).map((e) => [e.name, e.value]));
const job = find("Job", "tern-fetch-model");
const jobCtr = job.spec.template.spec.containers[0];
for (const k of ["HF_HOME", "TERN_CACHE_DIR"])
	check(envOf(jobCtr)[k] === envOf(ctr)[k], `model-cache.yaml: the Job's ${k} is not the pods' (${envOf(ctr)[k]})`);
check(envOf(jobCtr).MODEL === ctr.args[1], `model-cache.yaml: the Job fetches ${envOf(jobCtr).MODEL}, the pods serve ${ctr.args[1]}`);
check(job.spec.template.spec.volumes[0].persistentVolumeClaim.claimName === claim, "model-cache.yaml: another volume");
for (const verb of ["get", "run"])
	check(jobCtr.args[0].includes(`tern ${verb} `), `model-cache.yaml: the Job does not run tern ${verb}`);

const pool = find("InferencePool", "tern");
check(subset(pool.spec.selector.matchLabels, pod.metadata.labels), "inferencepool.yaml: the pool's selector misses the pods");
check(pool.spec.targetPorts[0].number === port, "inferencepool.yaml: the pool targets another port");
const eppSvc = find("Service", pool.spec.endpointPickerRef.name);
check(
	eppSvc?.spec.ports.some((p) => p.port === pool.spec.endpointPickerRef.port.number && p.name === "grpc"),
	"inferencepool.yaml: endpointPickerRef names no gRPC port of the picker's Service",
);
const route = find("HTTPRoute", "tern");
check(
	route.spec.rules.every((r) => r.backendRefs.every((b) => b.kind === "InferencePool" && b.name === pool.metadata.name)),
	"inferencepool.yaml: the route sends traffic elsewhere than the pool",
);
const epp = find("Deployment", "tern-epp");
const eppCtr = epp.spec.template.spec.containers[0];
check(flagValue(eppCtr.args, "--pool-name") === pool.metadata.name, "epp.yaml: --pool-name is not the pool");
check(
	epp.spec.template.spec.terminationGracePeriodSeconds >= pod.spec.terminationGracePeriodSeconds,
	"epp.yaml: the picker leaves before the pods it routes to have drained",
);
const cm = find("ConfigMap", "tern-epp-config");
const mount = eppCtr.volumeMounts.find((m) => m.name === "config");
const cfgFile = flagValue(eppCtr.args, "--config-file");
check(cfgFile?.startsWith(mount.mountPath + "/") && cm.data[cfgFile.slice(mount.mountPath.length + 1)], "epp.yaml: --config-file names no key of the ConfigMap");
const eppCfg = YAML.parse(cm.data["epp.yaml"]);
check(eppCfg.kind === "EndpointPickerConfig", "epp.yaml: the configuration is not an EndpointPickerConfig");
const pluginNames = new Set(eppCfg.plugins.map((p) => p.name ?? p.type));
for (const prof of eppCfg.schedulingProfiles)
	for (const p of prof.plugins) check(pluginNames.has(p.pluginRef), `epp.yaml: profile ${prof.name} names no plugin ${p.pluginRef}`);
const extractor = eppCfg.plugins.find((p) => p.type === "core-metrics-extractor").parameters;
const engine = extractor.engineConfigs.find((e) => e.name === extractor.defaultEngine);
check(pod.metadata.labels[extractor.engineLabelKey] === engine.name, `tern.yaml: pods lack ${extractor.engineLabelKey}: ${engine.name}`);
const scrape = eppCfg.plugins.find((p) => p.type === "metrics-data-source").parameters;

// A running tern's /metrics, at the path the picker scrapes.
const scratch = mkdtempSync(join(tmpdir(), "tern-deploy-"));
let server;
try {
	execFileSync(tern, ["synth", "--preset", "tiny", "--dtype", "bf16", "--seed", "5", join(scratch, "m")], { stdio: "ignore" });
	server = spawn(tern, ["serve", join(scratch, "m"), "--port", "0", "--parallel", "2"], {
		stdio: ["ignore", "pipe", "ignore"],
		env: { ...process.env, TERN_CACHE_DIR: "off" },
	});
	const url = await new Promise((resolve, reject) => {
		let out = "";
		const t = setTimeout(() => reject(new Error("tern serve did not start")), 120000);
		server.stdout.on("data", (d) => {
			const m = (out += d).match(/serving .* at (http:\/\/[0-9.]+:[0-9]+)/);
			if (m) {
				clearTimeout(t);
				resolve(m[1]);
			}
		});
		server.on("exit", () => reject(new Error("tern serve exited")));
	});
	const text = await (await fetch(url + scrape.path)).text();
	// The picker's metric specs: "name" or "name{label=value,...}".
	for (const [field, spec] of Object.entries(engine)) {
		if (!field.endsWith("Spec") || !spec) continue;
		const name = spec.split("{")[0];
		check(text.includes(`# TYPE ${name} gauge\n`), `epp.yaml: ${field} ${name} is not a gauge tern exports`);
		const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
		if (!check(line, `epp.yaml: ${field} ${name} has no sample`)) continue;
		const value = Number(line.split(" ").pop());
		check(Number.isFinite(value), `${name}: not a number: ${line}`);
		if (field === "kvUsageSpec") check(value >= 0 && value <= 1, `${name}: not a fraction: ${line}`);
		if (field === "cacheInfoSpec")
			for (const label of ["block_size", "num_gpu_blocks"])
				check(new RegExp(`${label}="[0-9]+"`).test(line), `${name}: no integer label ${label}: ${line}`);
	}
} catch (e) {
	failures.push(`a running tern: ${e.message}`);
} finally {
	server?.kill("SIGTERM");
	rmSync(scratch, { recursive: true, force: true });
}

// ---- 3. the compose alternative and the image ----
const compose = YAML.parse(readFileSync(join(root, "deploy/compose/compose.yaml"), "utf8"));
const replicas = Object.keys(compose.services).filter((s) => s.startsWith("tern-"));
check(replicas.length === 3, "compose.yaml: not three replicas");
const proxy = compose.services.proxy;
for (const s of replicas) {
	const svcDef = compose.services[s];
	checkServeArgs(`compose.yaml ${s}`, svcDef.command);
	check(
		parseInt(svcDef.stop_grace_period) > Number(flagValue(svcDef.command, "--drain-timeout")),
		`compose.yaml ${s}: stop_grace_period does not outlast --drain-timeout`,
	);
	check(
		Object.values(proxy.environment).includes(`${s}:${flagValue(svcDef.command, "--port")}`),
		`compose.yaml: the proxy does not route to ${s}`,
	);
}
let haproxy = "";
try {
	haproxy = execFileSync("sh", ["-c", "command -v haproxy"], { encoding: "utf8" }).trim();
} catch {}
if (haproxy) {
	const env = { ...process.env, ...proxy.environment };
	for (const s of replicas) env[`TERN_${s.slice(5)}`] = "127.0.0.1:1"; // names resolve only inside compose
	try {
		execFileSync(haproxy, ["-c", "-f", join(root, "deploy/compose/haproxy.cfg")], { env, stdio: "pipe" });
	} catch (e) {
		failures.push(`haproxy.cfg: ${e.stderr}`);
	}
} else console.log("skipped: haproxy -c (haproxy is not installed)");

const dockerfile = readFileSync(join(root, "deploy/Dockerfile"), "utf8");
const cmd = JSON.parse(dockerfile.match(/^CMD (\[.*\])$/m)[1]);
checkServeArgs("Dockerfile CMD", cmd);
check(compose.services[replicas[0]].command[1] === cmd[1], "compose.yaml serves another model than the image's default");
const runtime = dockerfile.split(/^FROM /m).pop();
const packages = new Set(runtime.match(/\blib[a-z0-9.+-]+/g));
let dpkg = "";
try {
	dpkg = execFileSync("sh", ["-c", "command -v dpkg"], { encoding: "utf8" }).trim();
} catch {}
if (dpkg) {
	const needed = execFileSync("readelf", ["-d", tern], { encoding: "utf8" }).match(/\[(lib[^\]]+)\]/g).map((s) => s.slice(1, -1));
	for (const lib of needed) {
		if (/^(libc|libm|libpthread|libdl|librt|ld-linux)/.test(lib)) continue; // the base image's libc6
		const owner = execFileSync("sh", ["-c", `dpkg -S '*/${lib}' 2>/dev/null | head -1 | cut -d: -f1`], {
			encoding: "utf8",
		}).trim();
		check(owner && packages.has(owner), `Dockerfile: ${lib} (package ${owner || "?"}) is not among the runtime packages`);
	}
} else console.log("skipped: the Dockerfile's runtime libraries (no dpkg here)");

if (failures.length) {
	for (const f of failures) console.error("FAIL " + f);
	process.exit(1);
}
console.log(`deploy: ${objects.length} Kubernetes objects valid and consistent; compose and Dockerfile consistent`);
