// Validates SARIF logs against the SARIF 2.1.0 JSON schema (the one @microsoft/jest-sarif
// ships, lib/schemas/sarif-2.1.0-rtm.5.json: the 2.1.0 standard's schema, JSON Schema
// draft-04), with ajv 6 (draft-04 meta-schema, full format checks: uri, uri-reference,
// date-time), then checks what the schema cannot: every ruleIndex names the rule of
// its ruleId, every artifactLocation.index names the artifact of its uri, and every
// rule is used.
//   node tests/sarif/validate.mjs FILE...
// Prints one JSON line per FILE: {file, ok, errors, runs, results: [{ruleId, level,
// uri, byteOffset, byteLength, text}], artifacts: [{uri, length, sha256, format}],
// executionSuccessful, notifications}; exits 1 when any FILE is not valid SARIF.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(import.meta.url);
const Ajv = require("ajv");
const draft04 = require("ajv/lib/refs/json-schema-draft-04.json");
const schema = require("@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json");

const ajv = new Ajv({ schemaId: "id", meta: false, allErrors: true, format: "full" });
ajv.addMetaSchema(draft04);
const validate = ajv.compile(schema);

let bad = 0;
for (const file of process.argv.slice(2)) {
  const out = { file, ok: false, errors: [] };
  let log;
  try {
    log = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    out.errors.push(`not JSON: ${e.message}`);
  }
  if (log !== undefined && !validate(log)) {
    for (const e of validate.errors) out.errors.push(`${e.dataPath} ${e.message}`);
  }
  if (log !== undefined && out.errors.length === 0) {
    out.runs = log.runs.length;
    const run = log.runs[0];
    const rules = run.tool.driver.rules || [];
    const artifacts = run.artifacts || [];
    const used = new Set();
    out.results = (run.results || []).map((r, i) => {
      const rule = rules[r.ruleIndex];
      if (rule === undefined || rule.id !== r.ruleId)
        out.errors.push(`results[${i}]: ruleIndex ${r.ruleIndex} is not rule ${r.ruleId}`);
      used.add(r.ruleIndex);
      const loc = r.locations[0].physicalLocation;
      const a = artifacts[loc.artifactLocation.index];
      if (a === undefined || a.location.uri !== loc.artifactLocation.uri)
        out.errors.push(`results[${i}]: artifact index ${loc.artifactLocation.index} is not ${loc.artifactLocation.uri}`);
      if (!rule || !rule.shortDescription || !rule.help || !rule.defaultConfiguration)
        out.errors.push(`results[${i}]: rule ${r.ruleId} lacks a description, help or level`);
      const region = loc.region || {};
      return {
        ruleId: r.ruleId,
        level: r.level,
        uri: loc.artifactLocation.uri,
        byteOffset: region.byteOffset ?? null,
        byteLength: region.byteLength ?? null,
        text: r.message.text,
        properties: r.properties || {},
      };
    });
    rules.forEach((rule, i) => {
      if (!used.has(i)) out.errors.push(`rule ${rule.id} is declared but no result uses it`);
    });
    if (new Set(rules.map((r) => r.id)).size !== rules.length) out.errors.push("a rule is declared twice");
    out.artifacts = artifacts.map((a) => ({
      uri: a.location.uri,
      length: a.length ?? null,
      sha256: (a.hashes || {})["sha-256"] ?? null,
      format: (a.properties || {}).format ?? null,
    }));
    out.executionSuccessful = run.invocations[0].executionSuccessful;
    out.notifications = (run.invocations[0].toolExecutionNotifications || []).length;
    out.driver = { name: run.tool.driver.name, version: run.tool.driver.version };
  }
  out.ok = out.errors.length === 0;
  if (!out.ok) bad++;
  console.log(JSON.stringify(out));
}
process.exit(bad ? 1 : 0);
