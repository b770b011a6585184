"""Publishing snapshots to, and reading them from, the Hugging Face hub (``hf://owner/name``), or a local folder
standing in for it (``file://DIR``).

A published snapshot is the snapshot folder as it is — ``manifest.json``, the dataset card ``README.md`` (its
``configs:`` block names each split's data files) and ``data/`` — in a dataset repository, so
``load_snapshot("hf://owner/name")`` and ``datasets.load_dataset("owner/name")`` get back exactly what was pushed
(the manifest's content hash is checked on load). A release tags the repository's revision with the release's name.

A ``file://DIR`` target writes the same repository layout into a folder, through :class:`LocalHub` (the calls of
``HfApi`` that publishing makes, on a folder): each repository is a folder, and a tag is a copy of the repository as
it was when tagged, in the folder ``REPO@TAG`` beside it, since ``datasets`` reads no revisions of a local folder.
So a publication can be tried, and loaded with ``datasets.load_dataset(DIR)``, without the hub.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from largefedbench.errors import InputError, SnapshotError

#: a publication target that is a local folder: ``file:///abs/dir`` (or ``file://relative/dir``)
LOCAL_PREFIX = "file://"
#: the snapshot's data files: replaced as a whole on every push, so no shard of an earlier push is left for the card's
#: ``configs:`` globs to pick up
DATA_FILES = "data/*"


class LocalHub:
    """A folder standing in for the Hugging Face hub: the ``HfApi`` calls publishing makes, with the same arguments.

    Repository ``owner/name`` (or ``name``) is the folder ``ROOT/owner/name``; its tag ``T`` is the folder
    ``ROOT/owner/name@T``, a copy of the repository when it was tagged. Each change is written beside the folder and
    moved into place with a rename, so a reader never sees half a push.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser()

    def repo(self, repo_id: str, revision: str | None = None) -> Path:
        """The folder of ``repo_id`` (at the tag ``revision``)."""
        return self.root / (f"{repo_id}@{revision}" if revision else repo_id)

    def create_repo(self, repo_id: str, repo_type: str | None = None, private: bool = False,
                    exist_ok: bool = False) -> str:
        path = self.repo(repo_id)
        from largefedbench.paths import snapshots_dir

        if path.resolve().is_relative_to(snapshots_dir().resolve()):
            raise InputError(f"{path} is inside the home's snapshots folder: publishing there would replace a snapshot "
                             "under another's name; give a folder outside it")
        if path.is_dir() and any(path.iterdir()) and not published_before(path):
            raise InputError(f"{path} is a folder that holds no published snapshot: publishing there would replace its "
                             "files; give a new (or empty) folder, or one published to before")
        path.mkdir(parents=True, exist_ok=exist_ok)
        return path.resolve().as_uri()

    def upload_folder(self, folder_path: str | Path, repo_id: str, repo_type: str | None = None,
                      commit_message: str | None = None, delete_patterns: list[str] | str | None = None) -> None:
        repo = self.repo(repo_id)
        patterns = [delete_patterns] if isinstance(delete_patterns, str) else list(delete_patterns or [])
        tmp = self._scratch(repo)
        try:
            if repo.is_dir():
                shutil.copytree(repo, tmp, ignore=lambda folder, names: [
                    n for n in names if (Path(folder) / n).is_file() and any(
                        fnmatch.fnmatchcase((Path(folder) / n).relative_to(repo).as_posix(), p) for p in patterns)])
            shutil.copytree(folder_path, tmp, dirs_exist_ok=True)
            self._swap(tmp, repo)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def upload_file(self, path_or_fileobj: bytes, path_in_repo: str, repo_id: str, repo_type: str | None = None,
                    commit_message: str | None = None) -> None:
        from largefedbench.io import atomic_write_bytes

        atomic_write_bytes(self.repo(repo_id) / path_in_repo, path_or_fileobj)

    def create_tag(self, repo_id: str, tag: str, repo_type: str | None = None, tag_message: str | None = None,
                   exist_ok: bool = False) -> None:
        tagged = self.repo(repo_id, tag)
        if tagged.exists():
            if exist_ok:  # as on the hub: an existing tag stays where it points
                return
            raise FileExistsError(f"tag {tag!r} of {repo_id} exists already ({tagged})")
        tmp = self._scratch(tagged)
        try:
            shutil.copytree(self.repo(repo_id), tmp)
            os.replace(tmp, tagged)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def snapshot_download(self, repo_id: str, repo_type: str | None = None, revision: str | None = None) -> str:
        folder = self.repo(repo_id, revision)
        if not folder.is_dir():
            raise FileNotFoundError(f"no repository {repo_id!r}{f' at {revision!r}' if revision else ''} in {self.root}")
        return str(folder)

    @staticmethod
    def _scratch(final: Path) -> Path:
        return final.parent / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    @staticmethod
    def _swap(new: Path, final: Path) -> None:
        """Put the folder ``new`` at ``final``, replacing what is there (two renames: never a missing repository for
        longer than between them)."""
        if not final.exists():
            os.replace(new, final)
            return
        old = LocalHub._scratch(final)
        os.replace(final, old)
        os.replace(new, final)
        shutil.rmtree(old, ignore_errors=True)


def published_before(folder: Path) -> bool:
    """Whether ``folder`` holds a snapshot published there before: a LargeFedBench manifest beside a dataset card
    with its ``configs:`` block (any other folder's files are not ours to replace)."""
    import json

    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        card = (folder / "README.md").read_text()
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return (isinstance(manifest, dict) and {"name", "content_sha256", "window"} <= set(manifest)
            and "\nconfigs:" in card)


def local_root(target: str) -> Path | None:
    """The folder of a ``file://DIR`` publication target (``file:///abs``, ``file://localhost/abs`` or
    ``file://relative``); None for a hub id."""
    if not target.startswith(LOCAL_PREFIX):
        return None
    rest = unquote(target[len(LOCAL_PREFIX):])
    if rest.startswith("localhost/"):  # the URL form with a host: the local machine's absolute path
        rest = rest[len("localhost"):]
    try:
        folder = Path(rest or "/").expanduser().resolve()
    except (OSError, ValueError) as err:
        raise InputError(f"{target!r} is not a folder path ({err}): give file:///DIR") from None
    if not folder.name:
        raise InputError(f"{target!r}: name the folder to publish into, e.g. file:///tmp/lfb-hub")
    return folder


def push_snapshot(path: Path, repo_id: str, *, private: bool = False, token: str | None = None) -> str:
    """Upload a snapshot folder to a dataset repository (created if needed), or into the folder of a ``file://DIR``
    target; returns the repository's URL."""
    root = local_root(repo_id)
    if root is not None:
        return _upload(LocalHub(root.parent), Path(path), root.name, private=private)
    from huggingface_hub import HfApi

    if repo_id.count("/") != 1:
        raise InputError(f"--push-to-hub {repo_id!r} must be a dataset repository id of the form owner/name "
                         "(or file://DIR, a local folder)")
    return _upload(HfApi(token=token), Path(path), repo_id, private=private)


def _upload(api: Any, path: Path, repo_id: str, *, private: bool = False) -> str:
    from largefedbench.data.snapshot import read_manifest

    manifest = read_manifest(path)
    try:
        url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(path), repo_id=repo_id, repo_type="dataset", delete_patterns=[DATA_FILES],
            commit_message=f"LargeFedBench snapshot {manifest['name']} ({manifest['content_sha256'][:12]})",
        )
    except InputError:
        raise
    except Exception as exc:  # the hub client raises many error types; all mean "could not publish"
        fix = (f"check that {api.root} is a folder you can write to" if isinstance(api, LocalHub) else
               "log in with `hf auth login` (or set HF_TOKEN)")
        raise SnapshotError(
            f"could not publish {path} to the {'folder' if isinstance(api, LocalHub) else 'hub'} repository "
            f"{repo_id!r} ({type(exc).__name__}: {exc}). The snapshot is unchanged on disk; {fix} and run the push again."
        ) from None
    return str(url)


def download_snapshot(repo_id: str, *, revision: str | None = None) -> Path:
    """Fetch a published snapshot; the folder it returns is loaded like any local snapshot."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision))
    except Exception as exc:
        raise SnapshotError(
            f"could not download the dataset {repo_id!r} from the Hugging Face hub ({type(exc).__name__}: {exc}). "
            "Check the repository id and your network, or download it yourself and pass the folder."
        ) from None


def push_release(release: dict, owner: str, *, home: Path | None = None, token: str | None = None) -> list[str]:
    """Publish each snapshot of ``release`` to ``OWNER/largefedbench-DATASET`` (or, for ``owner`` ``file://DIR``, to
    ``DIR/largefedbench-DATASET``) as a revision tagged with the release's name, its dataset card carrying the release
    and its changelog; returns the repository URLs."""
    from largefedbench.data.snapshot import dataset_card, read_manifest
    from largefedbench.paths import snapshots_dir

    root = local_root(owner)
    api: Any
    if root is not None:
        api, namespace = LocalHub(root), ""
    else:
        from huggingface_hub import HfApi

        if not owner or "/" in owner:
            raise InputError(f"--push-to-hub {owner!r}: give the hub user or organisation (each dataset goes to "
                             "OWNER/largefedbench-DATASET), or file://DIR (a local folder)")
        api, namespace = HfApi(token=token), f"{owner}/"
    urls = []
    for record in release["snapshots"]:
        path = snapshots_dir(home) / record["snapshot"]
        if not (path / "manifest.json").is_file():
            raise SnapshotError(f"release {release['name']}: {record['snapshot']} is not built here; "
                                f"`lfb refresh --release {release['name']}` first")
        repo_id = f"{namespace}largefedbench-{record['dataset']}"
        url = _upload(api, path, repo_id)
        card = dataset_card(read_manifest(path)) + _release_section(release, record, api, repo_id)
        try:
            api.upload_file(path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id=repo_id,
                            repo_type="dataset", commit_message=f"LargeFedBench release {release['name']}")
            api.create_tag(repo_id, tag=release["name"], repo_type="dataset", tag_message="; ".join(release["changes"]),
                           exist_ok=True)  # a release pushed again (an earlier push stopped): its tag may be there
        except Exception as exc:  # as in _upload: any hub error means "not tagged"
            raise SnapshotError(f"{repo_id}: the snapshot was uploaded but the release tag {release['name']!r} was not "
                                f"made ({type(exc).__name__}: {exc}); run the push again") from None
        urls.append(url)
    return urls


def _release_section(release: dict, record: dict, api: Any, repo_id: str) -> str:
    name = release["name"]
    if isinstance(api, LocalHub):  # the folder beside this one, by name: the card holds no local path
        tagged = api.repo(repo_id, name).name
        load = (f"`load_snapshot(\"DIR/{tagged}\")` or `datasets.load_dataset(\"DIR/{tagged}\", "
                "download_mode=\"force_redownload\")`, DIR the folder holding this one (datasets caches a local folder "
                "by its name, not its content)")
    else:
        load = f"`load_snapshot(\"hf://{repo_id}@{name}\")` or `datasets.load_dataset(\"{repo_id}\", revision=\"{name}\")`"
    lines = [f"\n## Release {name}\n", f"Content SHA-256 `{record['content_sha256']}`; window "
             f"{record['window']['since']} to {record['window']['until']}; previous release: "
             f"{release.get('previous') or 'none'}. Load it with {load}.\n", "Changes:\n"]
    return "\n".join(lines + [f"- {change}" for change in release["changes"]]) + "\n"
