// Runs the real @huggingface/hub client (pinned in package.json) against a running
// tensorgate, as `hubUrl`. Started by tests/integration/hf.c, which publishes the
// models and passes what the client must see:
//
//   TG_HF_EXPECT=/path/to/expect.json node tests/hf/metadata.mjs
//
// expect.json: {"hubUrl": "http://127.0.0.1:PORT",
//               "search": "acme",                       // listModels query
//               "models": ["acme/hf-single", ...],      // listModels must yield these
//               "cases": [{"repo": "org/name", "revision": "main", "sharded": false,
//                          "tensors": {"name": {"dtype", "shape", "data_offsets"}, ...},
//                          "parameters": {"F32": n, ...},        // the server's (modelInfo)
//                          "clientParameters": {"F32": n, ...},  // the client's own count
//                          "files": ["config.json", ...],          // listFiles, recursive
//                          "download": {"path", "size", "sha256"}}],
//               "tagFilter": {"search", "tags": [...], "models": [...]},  // optional:
//                   listModels with search.tags must yield exactly these
//               "byDownloads": {"search", "models": [...], "downloads": [...]},  // optional:
//                   listModels sort "downloads": these names in this order, these counts
//               "accessToken": "hf_tg_...",   // optional: the hf_ form of a write token,
//               "tokenRepo": {"repo", "commit", "paths": [...]}}  // used by the calls below
//
// Prints one line per check and "hf-js: N passed, N failed"; exits 1 on any failure.
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  downloadFile,
  downloadFileToCacheDir,
  listFiles,
  listModels,
  modelInfo,
  parseSafetensorsMetadata,
  pathsInfo,
  snapshotDownload,
  whoAmI,
} from "@huggingface/hub";

let passed = 0;
let failed = 0;

function check(ok, what, detail) {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.log(`FAIL: ${what}${detail === undefined ? "" : `: ${detail}`}`);
  }
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

// Keys sorted, so two objects with the same entries compare equal.
function sorted(object) {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

// Every tensor of the parsed metadata: one header, or one per shard.
function tensorsOf(metadata) {
  const headers = metadata.sharded ? Object.values(metadata.headers) : [metadata.header];
  const tensors = {};
  for (const header of headers) {
    for (const [name, info] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      tensors[name] = { dtype: info.dtype, shape: info.shape, data_offsets: info.data_offsets };
    }
  }
  return tensors;
}

async function runCase(hubUrl, c) {
  const label = `${c.repo}@${c.revision}`;
  let metadata;
  try {
    metadata = await parseSafetensorsMetadata({
      repo: c.repo,
      hubUrl,
      revision: c.revision,
      computeParametersCount: true,
    });
  } catch (error) {
    check(false, `${label}: parseSafetensorsMetadata`, error.stack ?? String(error));
    return;
  }
  check(metadata.sharded === c.sharded, `${label}: sharded`, `got ${metadata.sharded}`);
  const tensors = tensorsOf(metadata);
  check(same(sorted(tensors), sorted(c.tensors)), `${label}: tensor table`,
    `got ${JSON.stringify(sorted(tensors))}, expected ${JSON.stringify(sorted(c.tensors))}`);
  // The client counts parameters itself from the headers (skipping scalars, shape []).
  const parameters = metadata.parameterCount ?? {};
  check(same(sorted(parameters), sorted(c.clientParameters)), `${label}: parameter count`,
    `got ${JSON.stringify(parameters)}, expected ${JSON.stringify(c.clientParameters)}`);
  console.log(`${label}: ${Object.keys(tensors).length} tensors, parameters ${JSON.stringify(parameters)}`);

  const files = [];
  try {
    for await (const entry of listFiles({ repo: c.repo, hubUrl, revision: c.revision, recursive: true })) {
      if (entry.type === "file") files.push(entry.path);
    }
  } catch (error) {
    check(false, `${label}: listFiles`, String(error));
  }
  check(same(files.sort(), [...c.files].sort()), `${label}: listFiles`,
    `got ${JSON.stringify(files)}, expected ${JSON.stringify(c.files)}`);

  try {
    const blob = await downloadFile({ repo: c.repo, hubUrl, revision: c.revision, path: c.download.path });
    check(blob !== null, `${label}: downloadFile ${c.download.path} found`);
    if (blob !== null) {
      const bytes = Buffer.from(await blob.arrayBuffer());
      check(bytes.length === c.download.size, `${label}: downloadFile size`, `got ${bytes.length}`);
      const sha = createHash("sha256").update(bytes).digest("hex");
      check(sha === c.download.sha256, `${label}: downloadFile sha256`, `got ${sha}`);
    }
    const missing = await downloadFile({ repo: c.repo, hubUrl, revision: c.revision, path: "no/such/file.bin" });
    check(missing === null, `${label}: downloadFile of a missing entry gives null (EntryNotFound)`);
  } catch (error) {
    check(false, `${label}: downloadFile`, String(error));
  }

  try {
    const info = await modelInfo({ name: c.repo, hubUrl, revision: c.revision, additionalFields: ["safetensors", "sha"] });
    check(info.name === c.repo, `${label}: modelInfo name`, `got ${info.name}`);
    check(same(sorted(info.safetensors?.parameters ?? {}), sorted(c.parameters)), `${label}: modelInfo safetensors`,
      JSON.stringify(info.safetensors));
    check(typeof info.sha === "string" && /^[0-9a-f]{40}$/.test(info.sha), `${label}: modelInfo sha (a 40-hex commit id)`, info.sha);
  } catch (error) {
    check(false, `${label}: modelInfo`, String(error));
  }
}

// The calls that need /paths-info, the 40-hex commit id and an hf_ token.
async function tokenCalls(hubUrl, accessToken, t) {
  const label = `${t.repo} (hf_ token)`;
  const cacheDir = mkdtempSync(join(tmpdir(), "tg-hf-js-"));
  try {
    const me = await whoAmI({ hubUrl, accessToken });
    check(me.name === t.repo.split("/")[0], `${label}: whoAmI name`, JSON.stringify(me.name));
  } catch (error) {
    check(false, `${label}: whoAmI`, String(error));
  }
  try {
    const infos = await pathsInfo({ repo: t.repo, hubUrl, accessToken, paths: [...t.paths, "absent.bin"], expand: true });
    check(same(infos.map((i) => i.path).sort(), [...t.paths].sort()), `${label}: pathsInfo`,
      JSON.stringify(infos.map((i) => i.path)));
    check(infos.every((i) => i.lastCommit && i.lastCommit.id === t.commit), `${label}: pathsInfo lastCommit`,
      JSON.stringify(infos.map((i) => i.lastCommit)));
  } catch (error) {
    check(false, `${label}: pathsInfo`, String(error));
  }
  try {
    const first = await downloadFileToCacheDir({ repo: t.repo, hubUrl, accessToken, path: t.paths[0], cacheDir });
    check(existsSync(first) && first.includes(t.commit), `${label}: downloadFileToCacheDir into the commit's snapshot`, first);
    const pinned = await downloadFileToCacheDir({ repo: t.repo, hubUrl, accessToken, path: t.paths[0], cacheDir, revision: t.commit });
    check(pinned === first, `${label}: downloadFileToCacheDir pinned to the commit id`, pinned);
  } catch (error) {
    check(false, `${label}: downloadFileToCacheDir`, String(error));
  }
  try {
    const folder = await snapshotDownload({ repo: t.repo, hubUrl, accessToken, cacheDir });
    check(folder.endsWith(t.commit) && t.paths.every((p) => existsSync(join(folder, p))), `${label}: snapshotDownload`, folder);
  } catch (error) {
    check(false, `${label}: snapshotDownload`, String(error));
  }
  rmSync(cacheDir, { recursive: true, force: true });
}

async function main() {
  const path = process.env.TG_HF_EXPECT;
  if (!path) {
    console.error("metadata.mjs: set TG_HF_EXPECT to the expectations file (see the top of this file)");
    process.exit(2);
  }
  const expect = JSON.parse(readFileSync(path, "utf8"));
  // First, before the cases' downloads change the counts the expectations hold.
  if (expect.byDownloads) {
    try {
      const got = [];
      for await (const model of listModels({
        hubUrl: expect.hubUrl,
        search: { query: expect.byDownloads.search },
        sort: "downloads",
      })) {
        got.push([model.name, model.downloads]);
      }
      const want = expect.byDownloads.models.map((name, i) => [name, expect.byDownloads.downloads[i]]);
      check(JSON.stringify(got) === JSON.stringify(want), "listModels sort downloads", `got ${JSON.stringify(got)}`);
    } catch (error) {
      check(false, "listModels sort downloads", String(error));
    }
  }
  if (expect.tagFilter) {
    try {
      const names = [];
      for await (const model of listModels({
        hubUrl: expect.hubUrl,
        search: { query: expect.tagFilter.search, tags: expect.tagFilter.tags },
      })) {
        names.push(model.name);
      }
      check(same(names.sort(), [...expect.tagFilter.models].sort()), "listModels tag filter", `got ${JSON.stringify(names)}`);
    } catch (error) {
      check(false, "listModels tag filter", String(error));
    }
  }
  for (const c of expect.cases) {
    await runCase(expect.hubUrl, c);
  }
  // listModels asks for pages of 500 and follows Link; hf.c checks the paging itself.
  try {
    const names = [];
    for await (const model of listModels({ hubUrl: expect.hubUrl, search: { query: expect.search } })) {
      names.push(model.name);
    }
    check(same(names.sort(), [...expect.models].sort()), "listModels", `got ${JSON.stringify(names)}`);
  } catch (error) {
    check(false, "listModels", String(error));
  }
  if (expect.accessToken && expect.tokenRepo) {
    await tokenCalls(expect.hubUrl, expect.accessToken, expect.tokenRepo);
  }
  try {
    await parseSafetensorsMetadata({ repo: "nobody/nothing", hubUrl: expect.hubUrl });
    check(false, "parseSafetensorsMetadata of a missing repo throws");
  } catch (error) {
    check(true, "parseSafetensorsMetadata of a missing repo throws");
  }
  // Only models are served: a dataset or a Space is a Hub 404 that says so.
  for (const type of ["dataset", "space"]) {
    try {
      for await (const entry of listFiles({ repo: { type, name: "acme/hf-single" }, hubUrl: expect.hubUrl })) {
        void entry;
      }
      check(false, `listFiles of a ${type} throws`);
    } catch (error) {
      const text = JSON.stringify(error.data ?? {});
      check(error.statusCode === 404 && text.includes("serves models only"),
            `listFiles of a ${type}: 404 saying only models are served`, `${error.statusCode} ${text}`);
    }
  }
  console.log(`hf-js: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((error) => {
  console.log(`FAIL: ${error.stack ?? error}`);
  console.log(`hf-js: ${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
