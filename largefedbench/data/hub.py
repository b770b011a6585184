"""Publishing snapshots to, and reading them from, the Hugging Face hub (``hf://owner/name``).

A published snapshot is the snapshot folder as it is — ``manifest.json``, the dataset card ``README.md`` and
``data/`` — in a dataset repository, so ``load_snapshot("hf://owner/name")`` gets back exactly what was
pushed (the manifest's content hash is checked on load).
"""

from __future__ import annotations

from pathlib import Path

from largefedbench.errors import InputError, SnapshotError


def push_snapshot(path: Path, repo_id: str, *, private: bool = False, token: str | None = None) -> str:
    """Upload a snapshot folder to a dataset repository (created if needed); returns the repo URL."""
    from huggingface_hub import HfApi

    from largefedbench.data.snapshot import read_manifest

    if repo_id.count("/") != 1:
        raise InputError(f"--push-to-hub {repo_id!r} must be a dataset repository id of the form owner/name")
    manifest = read_manifest(path)
    api = HfApi(token=token)
    try:
        url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(path), repo_id=repo_id, repo_type="dataset",
            commit_message=f"LargeFedBench snapshot {manifest['name']} ({manifest['content_sha256'][:12]})",
        )
    except Exception as exc:  # the hub client raises many error types; all mean "could not publish"
        raise SnapshotError(
            f"could not publish {path} to the hub repository {repo_id!r} ({type(exc).__name__}: {exc}). The snapshot "
            "is unchanged on disk; log in with `hf auth login` (or set HF_TOKEN) and run the push again."
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
    """Publish each snapshot of ``release`` to ``OWNER/largefedbench-DATASET`` as a revision tagged with the
    release's name, its dataset card carrying the release and its changelog; returns the repository URLs."""
    from huggingface_hub import HfApi

    from largefedbench.data.snapshot import dataset_card, read_manifest
    from largefedbench.paths import snapshots_dir

    if not owner or "/" in owner:
        raise InputError(f"--push-to-hub {owner!r}: give the hub user or organisation (each dataset goes to "
                         "OWNER/largefedbench-DATASET)")
    api, urls = HfApi(token=token), []
    for record in release["snapshots"]:
        path = snapshots_dir(home) / record["snapshot"]
        if not (path / "manifest.json").is_file():
            raise SnapshotError(f"release {release['name']}: {record['snapshot']} is not built here; "
                                f"`lfb refresh --release {release['name']}` first")
        repo_id = f"{owner}/largefedbench-{record['dataset']}"
        url = push_snapshot(path, repo_id, token=token)
        card = dataset_card(read_manifest(path)) + _release_section(release, record)
        try:
            api.upload_file(path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id=repo_id,
                            repo_type="dataset", commit_message=f"LargeFedBench release {release['name']}")
            api.create_tag(repo_id, tag=release["name"], repo_type="dataset", tag_message="; ".join(release["changes"]),
                           exist_ok=True)  # a release pushed again (an earlier push stopped): its tag may be there
        except Exception as exc:  # as in push_snapshot: any hub error means "not tagged"
            raise SnapshotError(f"{repo_id}: the snapshot was uploaded but the release tag {release['name']!r} was not "
                                f"made ({type(exc).__name__}: {exc}); run the push again") from None
        urls.append(url)
    return urls


def _release_section(release: dict, record: dict) -> str:
    lines = [f"\n## Release {release['name']}\n", f"Content SHA-256 `{record['content_sha256']}`; window "
             f"{record['window']['since']} to {record['window']['until']}; previous release: "
             f"{release.get('previous') or 'none'}. Load it with `load_snapshot(\"hf://OWNER/largefedbench-"
             f"{record['dataset']}@{release['name']}\")`.\n", "Changes:\n"]
    return "\n".join(lines + [f"- {change}" for change in release["changes"]]) + "\n"
