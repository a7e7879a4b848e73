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
const refNames = (list) => (list ?? []).map((r) => `${r.name}@${r.targetCommit}`);
check(refNames(listed.branches).includes(`dev@${firstOid}`), "refs list the branch under branches", JSON.stringify(listed.branches));
check(
  refNames(listed.tags).includes(`v1.0@${firstOid}`) && !refNames(listed.branches).some((n) => n.startsWith("v1.0@")),
  "refs list the tag under tags only",
  JSON.stringify(listed),
);
check((await text("README.md", "v1.0")) !== null, "a file read by tag");
check((await text("README.md", "dev")) !== null, "a file read by branch");

// a commit on the branch: a new version, the branch moves to it, main stays
const mainBefore = await mainSha();
const devShard = safetensors("d", 300000, 7); // LFS
const onDev = await uploadFiles({
  repo,
  accessToken: W,
  hubUrl,
  branch: "dev",
  commitTitle: "on dev",
  files: [
    { path: "dev.safetensors", content: new Blob([devShard]) },
    { path: "notes.txt", content: new Blob([Buffer.from("dev notes\n")]) },
  ],
});
const devOid = onDev?.commit?.oid;
check(/^[0-9a-f]{40}$/.test(devOid ?? "") && devOid !== firstOid, "uploadFiles on a branch: a new commit", JSON.stringify(onDev));
check((await mainSha()) === mainBefore, "a commit on a branch leaves main where it was");
listed = await refs();
check(refNames(listed.branches).includes(`dev@${devOid}`), "the branch moved to its commit", JSON.stringify(listed.branches));
check(refNames(listed.branches).includes(`main@${mainBefore}`), "main in refs is unchanged", JSON.stringify(listed.branches));
const devBytes = await text("dev.safetensors", "dev");
check(devBytes !== null && sha256(devBytes) === sha256(devShard), "the branch's new file read by branch name");
const byCommit = await text("dev.safetensors", devOid);
check(byCommit !== null && sha256(byCommit) === sha256(devShard), "the branch's new file read by commit id");
check((await text("README.md", "dev")) !== null, "the branch keeps the files of its starting point");
check(!(await files("main")).includes("dev.safetensors"), "main does not hold the branch's file");
// a second commit on the branch builds on the branch's head
const devCommit2 = await commit({
  repo,
  accessToken: W,
  hubUrl,
  branch: "dev",
  title: "drop the notes",
  operations: [{ operation: "delete", path: "notes.txt" }],
});
const devOid2 = devCommit2?.commit?.oid;
const devFiles = await files("dev");
check(devFiles.includes("dev.safetensors") && !devFiles.includes("notes.txt"), "a second commit on the branch", JSON.stringify(devFiles));
check((await mainSha()) === mainBefore, "main still where it was");
await fails(
  "a commit on a tag",
  commit({ repo, accessToken: W, hubUrl, branch: "v1.0", title: "x", operations: [{ operation: "delete", path: "README.md" }] }),
  400,
  ["not a branch"],
);
await fails(
  "a commit on a branch that does not exist",
  commit({ repo, accessToken: W, hubUrl, branch: "nope", title: "x", operations: [{ operation: "delete", path: "README.md" }] }),
  404,
);
check(/^[0-9a-f]{40}$/.test(devOid2 ?? ""), "the second branch commit's id", JSON.stringify(devCommit2));
const untagged = await fetch(`${hubUrl}/api/models/${repo}/tag/v1.0`, { method: "DELETE", headers: { Authorization: `Bearer ${W}` } });
check(untagged.status === 200, "delete a tag", untagged.status);
await deleteBranch({ repo, branch: "dev", accessToken: W, hubUrl });
listed = await refs();
check(![...(listed.branches ?? []), ...(listed.tags ?? [])].some((r) => r.name === "dev" || r.name === "v1.0"), "refs after the deletes", JSON.stringify(listed));

// ---- the namespace's code policy: code is admitted where an admin allows it ----
const A = expect.adminToken;
const admin = (method, path, body) =>
  fetch(`${hubUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${A}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const org = repo.split("/")[0];
check((await admin("PUT", `/v1/namespaces/${org}/policy`, { allow_code: true })).status === 200, "allow code in the namespace");
const codeCommit = await uploadFiles({
  repo,
  accessToken: W,
  hubUrl,
  commitTitle: "code under the policy",
  files: [{ path: "modeling_tiny.py", content: new Blob([Buffer.from("import torch\n")]) }],
});
check(/^[0-9a-f]{40}$/.test(codeCommit?.commit?.oid ?? ""), "a commit of code where the policy allows it", JSON.stringify(codeCommit));
const described = await (await admin("GET", `/v1/models/${repo}`)).json();
check(described.holds_code === true, "the version is marked as holding code", JSON.stringify(described.holds_code));
const admissions = await (await admin("GET", `/v1/rejections?namespace=${org}`)).json();
const admitted = (admissions.rejections ?? admissions.items ?? []).find((r) => r.path === "modeling_tiny.py");
check(admitted?.outcome === "admitted_by_policy" && admitted?.reason === "code_python", "the admission is recorded", JSON.stringify(admitted));
check((await admin("PUT", `/v1/namespaces/${org}/policy`, { allow_code: false })).status === 200, "refuse code again");
await fails(
  "code once the policy refuses it again",
  uploadFiles({ repo, accessToken: W, hubUrl, files: [{ path: "modeling_more.py", content: new Blob([Buffer.from("x = 1\n")]) }] }),
  422,
);

// ---- the storage quota: an LFS upload past it is refused, nothing left behind ----
const usage = async () => (await (await admin("GET", `/v1/namespaces/${org}`)).json()).usage_bytes;
const usedBefore = await usage();
check((await admin("PUT", `/v1/namespaces/${org}/quota`, { quota_bytes: usedBefore + 1000 })).status === 200, "set a quota");
const mainAtQuota = await mainSha();
const big = safetensors("q", 300000, 11); // 1.2 MB through LFS
await fails(
  "uploadFiles past the quota",
  uploadFiles({ repo, accessToken: W, hubUrl, files: [{ path: "big.safetensors", content: new Blob([big]) }] }),
  413,
);
// the same by hand: the LFS PUT answers in the Hub's dialect
const batch = await fetch(`${hubUrl}/${repo}.git/info/lfs/objects/batch`, {
  method: "POST",
  headers: { Authorization: `Bearer ${W}`, "Content-Type": "application/vnd.git-lfs+json" },
  body: JSON.stringify({ operation: "upload", transfers: ["basic"], objects: [{ oid: sha256(big), size: big.length }] }),
});
const href = (await batch.json()).objects?.[0]?.actions?.upload?.href;
const put = href ? await fetch(href, { method: "PUT", body: big }) : null;
check(put?.status === 413 && put.headers.get("X-Error-Code") === "storage_quota_exceeded", "the LFS PUT: 413 with X-Error-Code", put?.status);
check((put?.headers.get("X-Error-Message") ?? "").includes("quota"), "the LFS PUT: X-Error-Message names the quota");
check((await usage()) === usedBefore, "nothing of the refused upload is kept", await usage());
check((await mainSha()) === mainAtQuota, "main unchanged after the refused upload");
// inline files count too
await fails(
  "inline files past the quota",
  uploadFiles({ repo, accessToken: W, hubUrl, files: [{ path: "big.txt", content: new Blob([Buffer.alloc(2000, 97)]) }] }),
  413,
);
check((await usage()) === usedBefore, "nothing of the refused inline file is kept", await usage());
check((await admin("PUT", `/v1/namespaces/${org}/quota`, { quota_bytes: null })).status === 200, "unset the quota");

// ---- deleteRepo: an admin's; a write token may not ----
await fails("deleteRepo with a write token", deleteRepo({ repo, accessToken: W, hubUrl }), 403);
await deleteRepo({ repo, accessToken: expect.adminToken, hubUrl });
const gone = await fetch(`${hubUrl}/api/models/${repo}`);
check(gone.status === 404 && gone.headers.get("X-Error-Code") === "RepoNotFound", "deleteRepo: gone", gone.status);

console.log(`hf-js-write: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
