// Writes through tensorgate with the real @huggingface/hub client (pinned in
// package.json), nothing but hubUrl and a token. Started by tests/integration/hf.c:
//
//   TG_HF_SCRIPT=write.mjs TG_HF_EXPECT=/path/to/write.json sh tests/hf/run.sh
//
// write.json: {"hubUrl": "http://127.0.0.1:PORT",
//              "repo": "acme/hf-write",          // created, written and deleted here
//              "writeToken": "hf_tg_...",        // write, limited to acme
//              "adminToken": "hf_tg_...",        // admin (deleteRepo)
//              "otherToken": "hf_tg_..."}        // write, limited to another namespace
//
// Prints one line per failed check and "hf-js-write: N passed, N failed"; exits 1 on
// any failure.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  commit,
  createBranch,
  createRepo,
  deleteBranch,
  deleteRepo,
  downloadFile,
  listFiles,
  modelInfo,
  uploadFiles,
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

const expect = JSON.parse(readFileSync(process.env.TG_HF_EXPECT, "utf8"));
const hubUrl = expect.hubUrl;
const repo = expect.repo;
const W = expect.writeToken;

// A safetensors file of one F32 tensor of n values (i, i+1, ...), padded header.
function safetensors(name, n, first) {
  let header = JSON.stringify({ [name]: { dtype: "F32", shape: [n], data_offsets: [0, 4 * n] } });
  while ((8 + header.length) % 8 !== 0) header += " ";
  const bytes = Buffer.alloc(8 + header.length + 4 * n);
  bytes.writeBigUInt64LE(BigInt(header.length), 0);
  bytes.write(header, 8, "latin1");
  for (let i = 0; i < n; i++) bytes.writeFloatLE(first + i, 8 + header.length + 4 * i);
  return bytes;
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

async function fails(what, promise, status, includes) {
  try {
    await promise;
    check(false, what, "succeeded; a refusal was expected");
    return null;
  } catch (error) {
    check(error.statusCode === status, `${what}: status`, `${error.statusCode} (${error.message})`);
    for (const text of includes ?? [])
      check(String(error.message).includes(text), `${what}: the message names ${text}`, error.message);
    return error;
  }
}

async function files(revision) {
  const paths = [];
  for await (const entry of listFiles({ repo, revision, recursive: true, hubUrl, accessToken: W }))
    if (entry.type === "file") paths.push(entry.path);
  return paths.sort();
}

async function mainSha() {
  return (await modelInfo({ name: repo, hubUrl, accessToken: W, additionalFields: ["sha"] })).sha;
}

async function text(path, revision) {
  const blob = await downloadFile({ repo, path, revision, hubUrl, accessToken: W });
  return blob === null ? null : Buffer.from(await blob.arrayBuffer());
}

async function refs() {
  const res = await fetch(`${hubUrl}/api/models/${repo}/refs`, { headers: { Authorization: `Bearer ${W}` } });
  return res.json();
}

// ---- createRepo (and again: 409, what create_repo(exist_ok=True) reads) ----
const created = await createRepo({ repo, accessToken: W, hubUrl });
check(created.repoUrl === `${hubUrl}/${repo}`, "createRepo: repoUrl", created.repoUrl);
await fails("createRepo of an existing repo", createRepo({ repo, accessToken: W, hubUrl }), 409, [
  "already created",
]);
await fails(
  "createRepo in another namespace",
  createRepo({ repo: "acme/hf-write-other", accessToken: expect.otherToken, hubUrl }),
  403,
);
await fails(
  "createRepo of a dataset",
  createRepo({ repo: { type: "dataset", name: "acme/data" }, accessToken: W, hubUrl }),
  404,
  ["models only"],
);

// ---- uploadFiles: small files inline, a sharded safetensors model through LFS ----
const shard1 = safetensors("a", 300000, 0); // 1.2 MB: LFS by name and size
const shard2 = safetensors("b", 1000, 5);
const index = Buffer.from(
  JSON.stringify({
    metadata: { total_size: (300000 + 1000) * 4 },
    weight_map: { a: "model-00001-of-00002.safetensors", b: "model-00002-of-00002.safetensors" },
  }),
);
const config = Buffer.from('{"model_type": "tiny"}');
const readme = Buffer.from("# hf-write\n\nWritten by @huggingface/hub.\n");
const first = await uploadFiles({
  repo,
  accessToken: W,
  hubUrl,
  commitTitle: "first upload",
  files: [
    { path: "config.json", content: new Blob([config]) },
    { path: "README.md", content: new Blob([readme]) },
    { path: "model-00001-of-00002.safetensors", content: new Blob([shard1]) },
    { path: "model-00002-of-00002.safetensors", content: new Blob([shard2]) },
    { path: "model.safetensors.index.json", content: new Blob([index]) },
  ],
});
const firstOid = first?.commit?.oid;
check(/^[0-9a-f]{40}$/.test(firstOid ?? ""), "uploadFiles: commit oid", firstOid);
check((await mainSha()) === firstOid, "uploadFiles: main is the new commit");
check(
  JSON.stringify(await files("main")) ===
    JSON.stringify([
      "README.md",
      "config.json",
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
    ]),
  "uploadFiles: the files of main",
  JSON.stringify(await files("main")),
);
const got1 = await text("model-00001-of-00002.safetensors", firstOid);
check(got1 !== null && sha256(got1) === sha256(shard1), "uploadFiles: the LFS shard's bytes, by commit id");
check(String(await text("config.json", "main")) === String(config), "uploadFiles: the inline file's bytes");

// The same files again: the batch answer asks for no upload, and the commit changes nothing.
const again = await uploadFiles({
  repo,
  accessToken: W,
  hubUrl,
  files: [{ path: "model-00001-of-00002.safetensors", content: new Blob([shard1]) }],
});
check(again?.commit?.oid === firstOid, "uploadFiles of the same content: the same commit", again?.commit?.oid);

// ---- commit with deletions ----
const second = await commit({
  repo,
  accessToken: W,
  hubUrl,
  title: "drop the README",
  operations: [
    { operation: "delete", path: "README.md" },
    { operation: "addOrUpdate", path: "notes/a.txt", content: new Blob([Buffer.from("a\n")]) },
  ],
});
const secondOid = second?.commit?.oid;
check(secondOid !== undefined && secondOid !== firstOid, "commit: a new commit", secondOid);
const afterDelete = await files("main");
check(!afterDelete.includes("README.md") && afterDelete.includes("notes/a.txt"), "commit: deleted and added", JSON.stringify(afterDelete));
check((await text("README.md", firstOid)) !== null, "commit: the earlier commit keeps its files");
const third = await commit({
  repo,
  accessToken: W,
  hubUrl,
  title: "drop notes/",
  operations: [{ operation: "delete", path: "notes/" }],
});
check(!(await files("main")).includes("notes/a.txt"), "commit: a deleted folder", third?.commit?.oid);
const thirdOid = third?.commit?.oid;
await fails(
  "commit deleting a file that is not there",
  commit({ repo, accessToken: W, hubUrl, title: "x", operations: [{ operation: "delete", path: "absent.txt" }] }),
  404,
  ["absent.txt"],
);

// ---- refusals: nothing published, the gate's reason in the client's message ----
// a pickle (pytorch_model.bin goes through LFS; the gate refuses it as its bytes arrive)
const pickleCall = Buffer.concat([
  Buffer.from("8002", "hex"),
  Buffer.from("cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.", "latin1"),
]);
await fails(
  "uploadFiles of a pickle",
  uploadFiles({
    repo,
    accessToken: W,
    hubUrl,
    files: [
      { path: "config.json", content: new Blob([Buffer.from('{"changed": true}')]) },
      { path: "pytorch_model.bin", content: new Blob([pickleCall]) },
    ],
  }),
  415,
  ["refused_format", "pickle"],
);
check((await mainSha()) === thirdOid, "after the refused pickle: main has not moved");
check(String(await text("config.json", "main")) === String(config), "after the refused pickle: config.json is the old one");
// code by name, inline
await fails(
  "commit of modeling_tiny.py",
  commit({
    repo,
    accessToken: W,
    hubUrl,
    title: "code",
    operations: [
      { operation: "addOrUpdate", path: "extra.txt", content: new Blob([Buffer.from("x")]) },
      { operation: "addOrUpdate", path: "modeling_tiny.py", content: new Blob([Buffer.from("import os\n")]) },
    ],
  }),
  422,
  ["code_python"],
);
// an index that names a tensor no shard holds
await fails(
  "commit of an inconsistent index",
  commit({
    repo,
    accessToken: W,
    hubUrl,
    title: "bad index",
    operations: [
      {
        operation: "addOrUpdate",
        path: "model.safetensors.index.json",
        content: new Blob([Buffer.from(JSON.stringify({ weight_map: { a: "model-00001-of-00002.safetensors", zz: "model-00002-of-00002.safetensors" } }))]),
      },
    ],
  }),
  422,
  ["index_mismatch"],
);
// parentCommit that is not main
await fails(
  "commit on a stale parentCommit",
  commit({
    repo,
    accessToken: W,
    hubUrl,
    title: "stale",
    parentCommit: firstOid,
    operations: [{ operation: "addOrUpdate", path: "x.txt", content: new Blob([Buffer.from("x")]) }],
  }),
  412,
  ["parentCommit"],
);
check((await mainSha()) === thirdOid, "after the refusals: main has not moved");
const versions = await (await fetch(`${hubUrl}/v1/models/${repo}`, { headers: { Authorization: `Bearer ${W}` } })).json();
check(
  Array.isArray(versions.versions) && versions.versions.length === 3 && versions.versions.every((v) => v.published !== false),
  "after the refusals: three versions, no draft left",
  JSON.stringify(versions.versions),
);

// ---- a token of another namespace, and none ----
await fails(
  "uploadFiles with another namespace's token",
  uploadFiles({ repo, accessToken: expect.otherToken, hubUrl, files: [{ path: "y.txt", content: new Blob([Buffer.from("y")]) }] }),
  403,
  ["namespace"],
);
const anonymous = await fetch(`${hubUrl}/api/models/${repo}/commit/main`, {
  method: "POST",
  headers: { "Content-Type": "application/x-ndjson" },
  body: '{"key":"header","value":{"summary":"x"}}\n',
});
check(anonymous.status === 401, "a commit without a token: 401", anonymous.status);
check((anonymous.headers.get("X-Error-Message") ?? "") !== "", "a commit without a token: X-Error-Message");

// ---- branches and tags ----
await createBranch({ repo, branch: "dev", revision: firstOid, accessToken: W, hubUrl });
await fails("createBranch of an existing branch", createBranch({ repo, branch: "dev", accessToken: W, hubUrl }), 409);
const tagged = await fetch(`${hubUrl}/api/models/${repo}/tag/${firstOid}`, {
  method: "POST",
  headers: { Authorization: `Bearer ${W}`, "Content-Type": "application/json" },
  body: JSON.stringify({ tag: "v1.0", message: "first" }),
});
check(tagged.status === 200, "create a tag", tagged.status);
let listed = await refs();
const names = [...(listed.branches ?? []), ...(listed.tags ?? [])].map((r) => `${r.name}@${r.targetCommit}`);
check(names.includes(`dev@${firstOid}`) && names.includes(`v1.0@${firstOid}`), "refs list the branch and the tag", JSON.stringify(names));
check((await text("README.md", "v1.0")) !== null, "a file read by tag");
check((await text("README.md", "dev")) !== null, "a file read by branch");
await fails(
  "a commit on a branch other than main",
  commit({ repo, accessToken: W, hubUrl, branch: "dev", title: "x", operations: [{ operation: "delete", path: "README.md" }] }),
  400,
  ["main"],
);
const untagged = await fetch(`${hubUrl}/api/models/${repo}/tag/v1.0`, { method: "DELETE", headers: { Authorization: `Bearer ${W}` } });
check(untagged.status === 200, "delete a tag", untagged.status);
await deleteBranch({ repo, branch: "dev", accessToken: W, hubUrl });
listed = await refs();
check(![...(listed.branches ?? []), ...(listed.tags ?? [])].some((r) => r.name === "dev" || r.name === "v1.0"), "refs after the deletes", JSON.stringify(listed));

// ---- deleteRepo: an admin's; a write token may not ----
await fails("deleteRepo with a write token", deleteRepo({ repo, accessToken: W, hubUrl }), 403);
await deleteRepo({ repo, accessToken: expect.adminToken, hubUrl });
const gone = await fetch(`${hubUrl}/api/models/${repo}`);
check(gone.status === 404 && gone.headers.get("X-Error-Code") === "RepoNotFound", "deleteRepo: gone", gone.status);

console.log(`hf-js-write: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
