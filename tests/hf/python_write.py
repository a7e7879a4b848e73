"""Writes through tensorgate with the real huggingface_hub (Python), by hand.

    HF_ENDPOINT=http://127.0.0.1:PORT HF_TOKEN=hf_<write token of acme> \
    TG_ADMIN_TOKEN=hf_<admin token> PYTHONPATH=/tmp/hfhub-vX/src \
    /usr/bin/python3 tests/hf/python_write.py [REPO] [BIG_MIB]

Runs create_repo, upload_folder (a sharded safetensors model with its index, a
config, a README), create_commit (add + delete), delete_file, create_tag and
delete_tag, create_branch and delete_branch, upload_file of a pickle (refused, its
reason in the error), delete_repo; prints one line per call and its result, and
"hf-py-write: N passed, N failed". With BIG_MIB > 0 it also times upload_folder of
a BIG_MIB MiB safetensors file (printed as MB/s). Exits 1 on any failure.
"""
import json
import os
import struct
import sys
import tempfile
import time

import huggingface_hub
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.utils import HfHubHTTPError

REPO = sys.argv[1] if len(sys.argv) > 1 else "acme/py-write"
BIG_MIB = int(sys.argv[2]) if len(sys.argv) > 2 else 0
api = HfApi()
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}" + (f": {detail}" if detail else ""))
    else:
        failed += 1
        print(f"FAIL {what}" + (f": {detail}" if detail else ""))


def safetensors(name, values):
    header = json.dumps({name: {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, 4 * len(values)]}})
    header += " " * ((8 - (8 + len(header)) % 8) % 8)
    return struct.pack("<Q", len(header)) + header.encode() + struct.pack(f"<{len(values)}f", *values)


def files_of(revision="main"):
    return sorted(api.list_repo_files(REPO, revision=revision))


print(f"huggingface_hub {huggingface_hub.__version__} against {os.environ.get('HF_ENDPOINT')}")

url = api.create_repo(REPO)
check(str(url).endswith(REPO), "create_repo", str(url))
check(str(api.create_repo(REPO, exist_ok=True)).endswith(REPO), "create_repo(exist_ok=True) of an existing repo")
try:
    api.create_repo(REPO)
    check(False, "create_repo of an existing repo raises")
except HfHubHTTPError as error:
    check(error.response.status_code == 409, "create_repo of an existing repo raises 409", str(error).splitlines()[0])

with tempfile.TemporaryDirectory() as folder:
    shard1 = safetensors("a", [float(i) for i in range(300000)])
    shard2 = safetensors("b", [1.0, 2.0, 3.0])
    index = {"metadata": {"total_size": 4 * 300003},
             "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    for name, data in (("model-00001-of-00002.safetensors", shard1), ("model-00002-of-00002.safetensors", shard2),
                       ("model.safetensors.index.json", json.dumps(index).encode()),
                       ("config.json", b'{"model_type": "tiny"}'), ("README.md", b"# py-write\n")):
        with open(os.path.join(folder, name), "wb") as out:
            out.write(data)
    info = api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="upload_folder")
    first = info.oid
    check(len(first) == 40 and api.model_info(REPO).sha == first, "upload_folder", f"commit {first}")
    check(files_of() == ["README.md", "config.json", "model-00001-of-00002.safetensors",
                         "model-00002-of-00002.safetensors", "model.safetensors.index.json"],
          "upload_folder: the files of main", str(files_of()))
    got = huggingface_hub.HfFileSystem().cat_file(f"{REPO}/model-00001-of-00002.safetensors", revision=first)
    check(got == shard1, "HfFileSystem.cat_file of the LFS shard by commit id")

info = api.create_commit(REPO, operations=[CommitOperationAdd("notes.txt", b"notes\n"),
                                           CommitOperationDelete("README.md")],
                         commit_message="create_commit", parent_commit=first)
check("README.md" not in files_of() and "notes.txt" in files_of(), "create_commit (add + delete)", info.oid)
try:
    api.create_commit(REPO, operations=[CommitOperationAdd("x.txt", b"x")], commit_message="stale",
                      parent_commit=first)
    check(False, "create_commit on a stale parent_commit raises")
except HfHubHTTPError as error:
    check(error.response.status_code == 412, "create_commit on a stale parent_commit: 412", str(error).splitlines()[0])
info = api.delete_file("config.json", REPO)
check("config.json" not in files_of(), "delete_file", info.oid)

api.create_tag(REPO, tag="v1", revision=first)
refs = api.list_repo_refs(REPO)
names = [ref.name for ref in refs.branches] + [ref.name for ref in refs.tags]
check("v1" in names, "create_tag, list_repo_refs", str(names))
check("v1" in [r.name for r in refs.tags] and "v1" not in [r.name for r in refs.branches],
      "the tag is listed under tags only")
check("README.md" in files_of("v1"), "a file list by tag")
api.delete_tag(REPO, tag="v1")
check("v1" not in [r.name for r in api.list_repo_refs(REPO).tags], "delete_tag")
api.create_branch(REPO, branch="dev", revision=first)
check("dev" in [r.name for r in api.list_repo_refs(REPO).branches], "create_branch")
api.create_branch(REPO, branch="dev", exist_ok=True)
check(True, "create_branch(exist_ok=True) of an existing branch")
main_before = api.model_info(REPO).sha
info = api.upload_file(path_or_fileobj=b"on dev\n", path_in_repo="dev.txt", repo_id=REPO,
                       revision="dev")
dev_head = [r.target_commit for r in api.list_repo_refs(REPO).branches if r.name == "dev"]
check(dev_head == [info.oid] and api.model_info(REPO).sha == main_before,
      "upload_file(revision='dev'): the branch moves, main stays", info.oid)
check("dev.txt" in files_of("dev") and "dev.txt" not in files_of(),
      "the branch's file is read by branch, not on main")
api.delete_branch(REPO, branch="dev")
check("dev" not in [r.name for r in api.list_repo_refs(REPO).branches], "delete_branch")

before = api.model_info(REPO).sha
pickle = b"\x80\x02cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03."
try:
    api.upload_file(path_or_fileobj=pickle, path_in_repo="pytorch_model.bin", repo_id=REPO)
    check(False, "upload_file of a pickle raises")
except (HfHubHTTPError, RuntimeError) as error:
    # huggingface_hub raises RuntimeError("Error while uploading ...") from the
    # HfHubHTTPError of the LFS PUT, whose message ends with X-Error-Message
    chain = [error, error.__cause__]
    message = " | ".join(str(e) for e in chain if e is not None)
    check("refused_format" in message and "pickle" in message,
          "upload_file of a pickle: the gate's reason in the error",
          [line for line in message.splitlines() if "refused_format" in line][0])
check(api.model_info(REPO).sha == before, "after the refused pickle: main has not moved")

if BIG_MIB > 0:
    with tempfile.TemporaryDirectory() as folder:
        count = BIG_MIB * 1024 * 1024 // 4
        header = json.dumps({"w": {"dtype": "F32", "shape": [count], "data_offsets": [0, 4 * count]}})
        header += " " * ((8 - (8 + len(header)) % 8) % 8)
        with open(os.path.join(folder, "big.safetensors"), "wb") as out:
            out.write(struct.pack("<Q", len(header)) + header.encode())
            block = struct.pack("<1024f", *([0.5] * 1024))
            for _ in range(count // 1024):
                out.write(block)
        size = os.path.getsize(os.path.join(folder, "big.safetensors"))
        start = time.monotonic()
        api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="big")
        seconds = time.monotonic() - start
        check(True, f"upload_folder of {size} bytes", f"{seconds:.2f} s, {size / seconds / 1e6:.0f} MB/s")

admin = os.environ.get("TG_ADMIN_TOKEN")
if admin:
    try:
        api.delete_repo(REPO)
        check(False, "delete_repo with a write token raises")
    except HfHubHTTPError as error:
        check(error.response.status_code == 403, "delete_repo with a write token: 403")
    HfApi(token=admin).delete_repo(REPO)
    check(not api.repo_exists(REPO), "delete_repo (admin token)")

print(f"hf-py-write: {passed} passed, {failed} failed")
sys.exit(0 if failed == 0 else 1)
