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

    def upload_file(self, path_or_fileobj, path_in_repo, repo_id, repo_type=None, commit_message=None):
        calls.append(("upload_file", repo_id, repo_type))
        (remote / repo_id / path_in_repo).write_bytes(path_or_fileobj)

    def create_tag(self, repo_id, tag, repo_type=None, tag_message=None, exist_ok=False):
        calls.append(("create_tag", repo_id, repo_type))
        if (remote / f"{repo_id}@{tag}").exists():
            if exist_ok:
                return
            raise huggingface_hub.errors.HfHubHTTPError(f"tag {tag} exists")
        shutil.copytree(remote / repo_id, remote / f"{repo_id}@{tag}")  # a tag pins the revision as it is now

    def snapshot_download(repo_id, repo_type=None, revision=None):
        calls.append(("snapshot_download", repo_id, repo_type))
        folder = remote / (f"{repo_id}@{revision}" if revision else repo_id)
        if not folder.is_dir():
            raise huggingface_hub.errors.RepositoryNotFoundError(f"{repo_id} not found")
        return str(folder)

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_file", upload_file)
    monkeypatch.setattr(huggingface_hub.HfApi, "create_tag", create_tag)
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


def test_a_release_is_published_as_a_tagged_revision_with_its_card(local_hub):
    from largefedbench.data.hub import push_release
    from largefedbench.data.releases import write_release

    built = build_demo(n_clients=200, progress=False)
    _, release = write_release("2026q4", [built.manifest])
    (url,) = push_release(release, "someone")
    assert url.endswith("someone/largefedbench-demo")
    assert [c[0] for c in local_hub] == ["create_repo", "upload_folder", "upload_file", "create_tag"]
    fd = load_snapshot("hf://someone/largefedbench-demo@2026q4")
    assert fd.manifest["content_sha256"] == built.manifest["content_sha256"]
    card = (fd.path / "README.md").read_text()
    assert "## Release 2026q4" in card and built.manifest["content_sha256"] in card and "- first release" in card
    with pytest.raises(InputError, match="the hub user or organisation"):
        push_release(release, "someone/repo")


def test_the_published_folder_loads_back_with_datasets_load_dataset(local_hub, tmp_path):
    """What a user does with a published snapshot: `datasets.load_dataset(REPO)` reads the card's `configs:` block
    and returns every split with its rows (without it, the `save_to_disk` state files are read as data)."""
    from datasets import load_dataset

    built = build_demo(n_clients=200, progress=False)
    push_snapshot(built.path, "someone/lfb-demo")
    loaded = load_dataset(str(tmp_path / "remote" / "someone" / "lfb-demo"))
    local = load_snapshot(built.path)
    assert set(loaded) == {"train", "validation", "test", "public"}
    for split in loaded:
        assert list(loaded[split]["id"]) == list(local.splits[split].ids)


def test_a_release_is_written_only_once_its_push_succeeded_and_an_existing_one_can_be_pushed(local_hub, lfb_home,
                                                                                            monkeypatch, capsys):
    from largefedbench.cli import main
    from largefedbench.data.releases import releases_dir

    build_demo(n_clients=200, progress=False)
    good = huggingface_hub.HfApi.upload_folder

    def down(self, *args, **kwargs):
        raise ConnectionError("the hub is down")

    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", down)
    assert main(["release", "2026q4", "--snapshots", "demo", "--push-to-hub", "someone"]) != 0
    assert "the hub is down" in capsys.readouterr().err and not (releases_dir() / "2026q4.json").exists()
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", good)
    assert main(["release", "2026q4", "--snapshots", "demo", "--push-to-hub", "someone"]) == 0  # the same command again
    assert (releases_dir() / "2026q4.json").exists()
    assert "hf auth login" not in capsys.readouterr().err
    assert main(["release", "2026q4", "--push-to-hub", "someone"]) == 0  # an existing release, pushed again
    assert [c[0] for c in local_hub].count("create_tag") == 2
    assert main(["release", "2026q4", "--snapshots", "demo"]) == 2
    assert "lfb release 2026q4 --push-to-hub OWNER" in capsys.readouterr().err
