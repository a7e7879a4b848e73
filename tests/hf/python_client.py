"""tests/hf/python_client.py: the real huggingface_hub client (any version found on
sys.path: PYTHONPATH=<huggingface_hub>/src) against a running tensorgate.

Usage: python3 tests/hf/python_client.py URL TOKEN REPO
  URL    the server (http://127.0.0.1:PORT), started WITHOUT --auth-read
  TOKEN  a write token of REPO's org (the hf_ prefix is added here)
  REPO   org/name of a published model with model.safetensors, config.json and a
         README.md with YAML front matter (tests/hf/python_client.sh builds one)
Prints one line per check ("ok ..." / "FAIL ...") and "hf-py: N passed, N failed";
exits 1 when a check failed. Nothing of huggingface_hub is vendored here.
"""
import json
import os
import sys
import tempfile

url, token, repo = sys.argv[1], sys.argv[2], sys.argv[3]
cache = tempfile.mkdtemp(prefix="tg-hf-cache-")
os.environ["HF_ENDPOINT"] = url
os.environ["HF_HUB_CACHE"] = cache
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "1"

import huggingface_hub  # noqa: E402  (after HF_ENDPOINT)
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, snapshot_download  # noqa: E402

passed = failed = 0


def check(name, fn):
    global passed, failed
    try:
        result = fn()
        if result is False:
            raise AssertionError("returned False")
        passed += 1
        print(f"ok   {name}")
    except Exception as error:  # noqa: BLE001 (every failure is reported)
        failed += 1
        print(f"FAIL {name}: {type(error).__name__}: {error}")


api = HfApi(endpoint=url, token="hf_" + token)
info = {}


def model_info():
    m = api.model_info(repo, files_metadata=True)
    info["sha"] = m.sha
    assert m.sha and len(m.sha) == 40, m.sha
    sizes = {s.rfilename: s.size for s in m.siblings}
    assert all(isinstance(v, int) for v in sizes.values()), sizes
    lfs = [s for s in m.siblings if s.rfilename == "model.safetensors"][0].lfs
    assert lfs is not None and len(lfs.sha256) == 64, lfs
    assert m.card_data is not None and m.card_data.get("license") == "apache-2.0", m.card_data
    return True


check("model_info(files_metadata=True): 40-hex sha, sizes, lfs, cardData", model_info)
check("repo_exists: True", lambda: api.repo_exists(repo) is True)
check("repo_exists: False for an absent repo", lambda: api.repo_exists(repo + "-absent") is False)
check("revision_exists by commit id", lambda: api.revision_exists(repo, info["sha"]))
check("file_exists", lambda: api.file_exists(repo, "config.json"))
check("file_exists: False", lambda: api.file_exists(repo, "nope.bin") is False)


def refs():
    r = api.list_repo_refs(repo)
    names = {b.name: b.target_commit for b in r.branches}
    assert names.get("main") == info["sha"], names
    return True


check("list_repo_refs: main at the commit", refs)
check("list_repo_commits", lambda: api.list_repo_commits(repo)[0].commit_id == info["sha"])


def paths_info():
    entries = api.get_paths_info(repo, ["model.safetensors", "config.json", "absent"], expand=True)
    paths = sorted(e.path for e in entries)
    assert paths == ["config.json", "model.safetensors"], paths
    return True


check("get_paths_info(expand=True)", paths_info)


def tree():
    entries = list(api.list_repo_tree(repo, expand=True))
    assert entries and all(getattr(e, "last_commit", None) is not None for e in entries), entries
    return True


check("list_repo_tree(expand=True): last_commit", tree)
check("whoami", lambda: api.whoami()["name"] == repo.split("/")[0])
check("list_models(author=)", lambda: repo in [m.id for m in api.list_models(author=repo.split("/")[0])])


def download_pinned():
    path = hf_hub_download(repo, "config.json", revision=info["sha"], cache_dir=cache)
    with open(path, "rb") as f:
        json.load(f)
    # pinned to a commit: the second call is answered from the cache, also offline
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import importlib

        import huggingface_hub.constants as constants

        importlib.reload(constants)
        again = hf_hub_download(repo, "config.json", revision=info["sha"], cache_dir=cache)
    finally:
        os.environ.pop("HF_HUB_OFFLINE", None)
        importlib.reload(constants)
    assert again == path, (again, path)
    return True


check("hf_hub_download pinned to the commit id, then offline from the cache", download_pinned)


def snapshot():
    folder = snapshot_download(repo, cache_dir=cache)
    assert os.path.exists(os.path.join(folder, "model.safetensors")), os.listdir(folder)
    assert os.path.basename(folder) == info["sha"], folder
    return True


check("snapshot_download", snapshot)


def metadata():
    meta = api.get_safetensors_metadata(repo)
    assert meta.parameter_count, meta
    return True


check("get_safetensors_metadata", metadata)


def filesystem():
    fs = HfFileSystem(endpoint=url, token="hf_" + token)
    names = [p.split("/")[-1] for p in fs.ls(repo, detail=False)]
    assert "model.safetensors" in names, names
    with fs.open(f"{repo}/config.json", "rb") as f:
        json.loads(f.read())
    return True


check("HfFileSystem ls/open", filesystem)

print(f"hf-py ({huggingface_hub.__version__}): {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
