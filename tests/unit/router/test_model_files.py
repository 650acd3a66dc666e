"""Finding checkpoints: local directories, and Hugging Face repo ids served from a local cache."""

from __future__ import annotations

import json

import pytest

from router.model_files import DEFAULT_MAX_CONTEXT, ModelFilesError, read_max_context, resolve_model_path


def make_checkpoint(directory, **config):
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "qwen3", **config}))
    return directory


def test_local_directory_is_used_as_is(tmp_path):
    model = make_checkpoint(tmp_path / "m")
    assert resolve_model_path(str(model), offline=True) == model.resolve()


def test_directory_without_config_is_rejected(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFilesError, match="no config.json"):
        resolve_model_path(str(tmp_path / "empty"), offline=True)


def test_a_path_that_is_neither_dir_nor_repo_id(tmp_path):
    with pytest.raises(ModelFilesError, match="not a local directory"):
        resolve_model_path(str(tmp_path / "missing" / "model"), offline=True)


def test_repo_id_offline_resolves_from_the_hf_cache(tmp_path, monkeypatch):
    # The Hub cache layout huggingface_hub itself writes: refs/main names a snapshot directory.
    cache = tmp_path / "hub"
    repo = cache / "models--acme--tiny"
    snapshot = make_checkpoint(repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567")
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(snapshot.name)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    assert resolve_model_path("acme/tiny", offline=True).resolve() == snapshot.resolve()


def test_repo_id_offline_missing_from_cache(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelFilesError, match="offline = true"):
        resolve_model_path("acme/absent", offline=True)


@pytest.mark.parametrize(
    ("config", "configured", "expected"),
    [
        ({"max_position_embeddings": 32768}, 0, 32768),
        ({"max_position_embeddings": 32768}, 4096, 4096),
        ({"max_position_embeddings": 2048}, 4096, 2048),
        ({"text_config": {"max_position_embeddings": 131072}}, 0, 131072),
        ({}, 0, DEFAULT_MAX_CONTEXT),
    ],
)
def test_max_context(tmp_path, config, configured, expected):
    assert read_max_context(make_checkpoint(tmp_path / "m", **config), configured) == expected
