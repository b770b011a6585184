"""Publishing to and loading from the hub, through huggingface_hub's real API calls, and to a local folder
(``file://DIR``).

The hub is unreachable here, so its transfer calls are replaced by the package's own local target
(:class:`largefedbench.data.hub.LocalHub`: a folder standing in for the remote repositories, a tag a folder
``REPO@TAG``); everything around them (repo creation, folder layout, loading, errors) is real.
"""

from __future__ import annotations

import huggingface_hub
import pytest

from largefedbench.data.demo import build_demo
from largefedbench.data.federated import load_snapshot
from largefedbench.data.hub import LocalHub, push_snapshot
from largefedbench.data.snapshot import ALL_SPLITS, dataset_content_hash
from largefedbench.errors import InputError, SnapshotError


@pytest.fixture
def local_hub(tmp_path, monkeypatch):
    hub, calls = LocalHub(tmp_path / "remote"), []

    def stand_in(name):
        def call(*args, **kwargs):
            args = args[1:] if args and isinstance(args[0], huggingface_hub.HfApi) else args  # drop self
            calls.append((name, kwargs.get("repo_id", args[0] if args else None), kwargs.get("repo_type")))
            return getattr(hub, name)(*args, **kwargs)
        return call

    for name in ("create_repo", "upload_folder", "upload_file", "create_tag"):
        monkeypatch.setattr(huggingface_hub.HfApi, name, stand_in(name))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", stand_in("snapshot_download"))
    return calls


def _loads_back(folder, manifest):
    """`datasets.load_dataset(folder)` gives every split, and its rows hash to the manifest's content hash. A cache of
    its own: datasets caches a local folder by its name, so another test's (or user's) folder of the same name would
    answer from the cache (docs/data.md)."""
    from datasets import load_dataset

    loaded = load_dataset(str(folder), cache_dir=str(folder.parent / f".cache-{folder.name}"))
    assert set(loaded) == set(ALL_SPLITS)
    assert {s: len(loaded[s]) for s in ALL_SPLITS} == manifest["counts"]["clients"]
    assert dataset_content_hash(loaded) == manifest["content_sha256"]
    return loaded


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
    and returns every split with its rows (without it, the `save_to_disk` state files are read as data), and so does
    the release's tagged revision; the rows hash to the manifest's content hash, as `load_snapshot` checks."""
    from largefedbench.data.hub import push_release
    from largefedbench.data.releases import write_release

    built = build_demo(n_clients=200, progress=False)
    push_snapshot(built.path, "someone/lfb-demo")
    loaded = _loads_back(tmp_path / "remote" / "someone" / "lfb-demo", built.manifest)
    local = load_snapshot(built.path)
    for split in loaded:
        assert list(loaded[split]["id"]) == list(local.splits[split].ids)
    _, release = write_release("2026q4", [built.manifest])
    push_release(release, "someone")
    _loads_back(tmp_path / "remote" / "someone" / "largefedbench-demo@2026q4", built.manifest)  # the tag 2026q4


def test_a_push_that_fails_names_the_current_login_command(local_hub, monkeypatch):
    built = build_demo(n_clients=200, progress=False)

    def refused(self, *args, **kwargs):
        raise PermissionError("401 Unauthorized: no token")

    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", refused)
    with pytest.raises(SnapshotError, match=r"(?s)401 Unauthorized.*log in with `hf auth login` \(or set HF_TOKEN\)") as err:
        push_snapshot(built.path, "someone/lfb-demo")
    assert "huggingface-cli" not in str(err.value)


def test_a_republished_snapshot_leaves_no_data_file_of_the_earlier_push(local_hub, tmp_path):
    """The card's `configs:` globs read every `data-*.arrow` file: a shard of an earlier push left behind would be
    read as rows, so a push replaces the data files as a whole."""
    built = build_demo(n_clients=200, progress=False)
    push_snapshot(built.path, "someone/lfb-demo")
    stale = tmp_path / "remote" / "someone" / "lfb-demo" / "data" / "train" / "data-00001-of-00002.arrow"
    stale.write_bytes((stale.parent / "data-00000-of-00001.arrow").read_bytes())
    push_snapshot(built.path, "someone/lfb-demo")
    assert not stale.exists()
    _loads_back(stale.parents[2], built.manifest)


def test_a_release_published_to_a_local_folder_loads_with_datasets_and_load_snapshot(lfb_home, tmp_path, capsys):
    """`lfb release NAME --push-to-hub file://DIR`: the hub's repository layout in a folder, no hub needed."""
    from largefedbench.cli import main
    from largefedbench.data.releases import releases_dir

    built = build_demo(n_clients=200, progress=False)
    target = tmp_path.resolve() / "my hub"  # a space: the URL's %20 is the folder's space
    assert main(["release", "2026q4", "--snapshots", "demo", "--push-to-hub", target.as_uri()]) == 0
    assert f"published {(target / 'largefedbench-demo').as_uri()} (tag 2026q4)" in capsys.readouterr().err
    assert (releases_dir() / "2026q4.json").exists()
    repo, tagged = target / "largefedbench-demo", target / "largefedbench-demo@2026q4"
    assert {p.name for p in repo.iterdir()} == {"README.md", "manifest.json", "data"}
    card = (tagged / "README.md").read_text()
    assert "configs:" in card and "## Release 2026q4" in card and 'datasets.load_dataset("DIR/largefedbench-demo@2026q4", download_mode="force_redownload")' in card
    assert str(tmp_path) not in card  # no local path in a card that may be uploaded later
    for folder in (repo, tagged):
        _loads_back(folder, built.manifest)
    fd = load_snapshot(str(tagged))  # a folder REPO@TAG, not DATASET@RELEASE
    assert fd.manifest["content_sha256"] == built.manifest["content_sha256"]
    # the same folder takes a second publication: the tag stays where it was, the repository follows the push
    assert main(["release", "2026q4", "--push-to-hub", f"file://{target}"]) == 0
    assert main(["release", "2027q1", "--snapshots", "demo", "--push-to-hub", f"file://{target}"]) == 0
    assert "## Release 2027q1" in (repo / "README.md").read_text()
    assert "## Release 2027q1" not in (tagged / "README.md").read_text()
    assert (target / "largefedbench-demo@2027q1").is_dir()
    # one snapshot into one folder (`lfb refresh --push-to-hub file://DIR` calls this)
    url = push_snapshot(built.path, f"file://{tmp_path / 'one'}")
    assert url == (tmp_path / "one").as_uri()
    _loads_back(tmp_path / "one", built.manifest)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SnapshotError, match="a-file.*is a folder you can write to"):
        push_snapshot(built.path, f"file://{tmp_path / 'a-file' / 'x'}")
    with pytest.raises(InputError, match="name the folder"):
        push_snapshot(built.path, "file://")
    (tmp_path / "notes" / "mine.txt").parent.mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("not a publication")
    with pytest.raises(InputError, match="holds no published snapshot"):
        push_snapshot(built.path, f"file://{tmp_path / 'notes'}")
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["mine.txt"]
    # someone else's folder with a manifest.json and a README.md of its own is not a publication either
    app = tmp_path / "webapp"
    (app / "data").mkdir(parents=True)
    for name, text in (("manifest.json", '{"name": "app", "start_url": "/"}'), ("README.md", "# my app"),
                       ("data/users.csv", "id\n1\n")):
        (app / name).write_text(text)
    with pytest.raises(InputError, match="holds no published snapshot"):
        push_snapshot(built.path, f"file://{app}")
    assert sorted(str(p.relative_to(app)) for p in app.rglob("*")) == ["README.md", "data", "data/users.csv",
                                                                       "manifest.json"]
    with pytest.raises(InputError, match="inside the home's snapshots folder"):  # would rename another snapshot
        push_snapshot(built.path, f"file://{built.path.parent / 'other'}")
    with pytest.raises(InputError, match="is not a folder path"):
        push_snapshot(built.path, "file://%00x")
    assert push_snapshot(built.path, f"file://localhost{tmp_path / 'host'}") == (tmp_path / "host").as_uri()


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
