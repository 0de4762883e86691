"""pipelines.llm.local_model: each node prepares its own checkpoint, by converting the embedded
model or by copying one published at a URI (moto S3) into its cache, once."""

from __future__ import annotations

import pytest

from pipelines.llm import local_model
from udfs import storage

pytestmark = pytest.mark.s3

FILES = {"config.json": b"{}", "model.safetensors": b"weights", "tokenizer.json": b"{}", "DONE": b"x"}


@pytest.fixture
def converted(tmp_path, monkeypatch):
    """A machine whose cache already holds the converted embedded model (a small stand-in)."""
    home = tmp_path / "publisher"
    (home / local_model.CHECKPOINT_NAME).mkdir(parents=True)
    for name, data in FILES.items():
        (home / local_model.CHECKPOINT_NAME / name).write_bytes(data)
    monkeypatch.setenv("AUGURY_MODEL_CACHE", str(home))
    return home


def test_a_published_checkpoint_is_copied_once_per_node(converted, s3_root, tmp_path, monkeypatch):
    uri = storage.join(s3_root, "models", "gemma-3-270m")
    assert local_model.publish(uri) == len(FILES)
    node = tmp_path / "node"
    monkeypatch.setenv("AUGURY_MODEL_CACHE", str(node))
    path = local_model.model_path(uri)
    assert path.startswith(str(node))
    assert {p.name: p.read_bytes() for p in local_model.Path(path).iterdir()} == FILES

    def no_download(*args):
        raise AssertionError("downloaded twice")

    monkeypatch.setattr(local_model.storage, "download_tree", no_download)
    assert local_model.model_path(uri) == path


def test_a_uri_without_a_checkpoint_is_an_error(s3_root, tmp_path, monkeypatch):
    monkeypatch.setenv("AUGURY_MODEL_CACHE", str(tmp_path / "node"))
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        local_model.model_path(storage.join(s3_root, "models", "absent"))


def test_local_paths_are_taken_as_given(converted):
    assert local_model.model_path("/some/checkpoint") == "/some/checkpoint"
    assert local_model.model_path("file:///some/checkpoint") == "/some/checkpoint"
    assert local_model.model_path(None) == str(converted / local_model.CHECKPOINT_NAME)
