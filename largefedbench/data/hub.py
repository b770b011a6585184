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
            "is unchanged on disk; log in with `huggingface-cli login` (or set HF_TOKEN) and run the push again."
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
