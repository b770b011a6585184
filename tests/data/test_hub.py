"""Publishing to and loading from the hub, through huggingface_hub's real API calls.

The hub is unreachable here, so its two transfer calls are replaced by a local folder standing in for the
remote repository; everything around them (repo creation, folder layout, loading, errors) is real.
"""

from __future__ import annotations

import shutil

import huggingface_hub
import pytest

from largefedbench.data.demo import build_demo
from largefedbench.data.federated import load_snapshot
from largefedbench.data.hub import push_snapshot
from largefedbench.errors import InputError, SnapshotError


@pytest.fixture
def local_hub(tmp_path, monkeypatch):
    remote = tmp_path / "remote"
    calls = []

    def create_repo(self, repo_id, repo_type=None, private=False, exist_ok=False):
        calls.append(("create_repo", repo_id, repo_type))
        return f"https://huggingface.co/datasets/{repo_id}"

    def upload_folder(self, folder_path, repo_id, repo_type=None, commit_message=None):
        calls.append(("upload_folder", repo_id, repo_type))
        shutil.copytree(folder_path, remote / repo_id, dirs_exist_ok=True)

    def snapshot_download(repo_id, repo_type=None, revision=None):
        calls.append(("snapshot_download", repo_id, repo_type))
        if not (remote / repo_id).is_dir():
            raise huggingface_hub.errors.RepositoryNotFoundError(f"{repo_id} not found")
        return str(remote / repo_id)

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_push_then_load_from_the_hub_gives_the_same_snapshot(local_hub):
    built = build_demo(n_clients=200, progress=False)
    url = push_snapshot(built.path, "someone/lfb-demo")
    assert url.endswith("someone/lfb-demo")
    fd = load_snapshot("hf://someone/lfb-demo")
    assert fd.manifest["content_sha256"] == built.manifest["content_sha256"]
    assert len(fd.train) == len(load_snapshot(built.path).train)
    assert [c[0] for c in local_hub] == ["create_repo", "upload_folder", "snapshot_download"]
    assert all(c[2] == "dataset" for c in local_hub)


def test_hub_errors_are_clear(local_hub):
    with pytest.raises(SnapshotError, match="could not download"):
        load_snapshot("hf://nobody/missing")
    built = build_demo(n_clients=200, progress=False)
    with pytest.raises(InputError, match="owner/name"):
        push_snapshot(built.path, "no-owner")
