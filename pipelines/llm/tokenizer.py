"""The model's tokenizer as rendering needs it: the chat template, choice plans' token ids, token
estimates. Loaded once per worker process and source, lazily: a base model's generate stage needs
none, and a plain local checkpoint (the embedded model's) loads through the tokenizers library
without importing transformers or torch."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.llm.render import RenderConfig

log = logging.getLogger("augury.llm.stage")


@functools.lru_cache(maxsize=16)
def load_tokenizer(cfg: RenderConfig) -> Any:
    """The model's tokenizer (chat template, choice token ids, token estimates), or None for an
    http model whose tokenizer cannot be loaded. Cached by configuration too, so that every token
    count does not resolve the checkpoint's path again (file checks)."""
    if cfg.backend in ("local", "scripted"):
        from pipelines.llm.local_model import model_path

        path = model_path(cfg.model_dir)
        if is_plain_tokenizer(Path(path)):
            return tokenizer_file(path)
        return tokenizer_from(path, required=True)
    return tokenizer_from(cfg.tokenizer_source, required=cfg.backend == "vllm")


@functools.lru_cache(maxsize=4)
def tokenizer_from(source: str, required: bool) -> Any:
    """The tokenizer at ``source``, loaded once per process whatever the stage's other settings:
    a worker renders stages of several configurations (the scripted and local backends, their
    token limits) and each load costs ~3 CPU-seconds for the embedded model's 262k tokens. A
    missing tokenizer is None unless ``required``, and that answer is cached too."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        if required:
            raise
        log.warning("no tokenizer at %s (%s): plain prompts, no choice requests", source, exc)
        return None


TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "additional_chat_templates")


def _tokenizer_config(path: Path) -> dict[str, Any] | None:
    config = path / "tokenizer_config.json"
    return json.loads(config.read_text()) if config.exists() else None


def _declares_template(path: Path, config: dict[str, Any] | None) -> bool:
    """Whether a local checkpoint's files hold a chat template: a template file, or one in its
    tokenizer configuration."""
    return any((path / name).exists() for name in TEMPLATE_FILES) or bool((config or {}).get("chat_template"))


def is_plain_tokenizer(path: Path) -> bool:
    """Whether a local checkpoint's tokenizer is its ``tokenizer.json`` alone, as saved by
    transformers for the tokenizers library (``"backend": "tokenizers"``): no chat template, no
    clean-up of decoded spaces. Such a tokenizer encodes and decodes through the tokenizers library
    as transformers' does (``tokenizer_file``)."""
    config = _tokenizer_config(path)
    return (
        (path / "tokenizer.json").exists()
        and config is not None
        and config.get("backend") == "tokenizers"
        and not config.get("clean_up_tokenization_spaces")
        and not _declares_template(path, config)
    )


class TokenizerFile:
    """A plain tokenizer (``is_plain_tokenizer``) through the tokenizers library, with the calls
    rendering makes of transformers' tokenizer. A worker that renders for the embedded model then
    imports neither transformers nor torch: ~3.5 of its ~4.6 CPU-seconds for the tokenizer."""

    chat_template = None

    def __init__(self, path: str):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids}

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


@functools.lru_cache(maxsize=4)
def tokenizer_file(path: str) -> TokenizerFile:
    """The plain tokenizer at ``path``, loaded once per process (as ``tokenizer_from``)."""
    return TokenizerFile(path)


@functools.lru_cache(maxsize=4)
def has_chat_template(cfg: RenderConfig) -> bool:
    """Whether the model's tokenizer has a chat template. A local checkpoint's files tell without
    loading it (no template file and no ``chat_template`` in ``tokenizer_config.json``: none), so
    a generate stage of a base model renders in a fresh worker without the tokenizer, about 5 s
    of its CPU (transformers' import, the 262k-token vocabulary); otherwise the tokenizer says."""
    if cfg.backend in ("local", "scripted"):
        from pipelines.llm.local_model import model_path

        path = Path(model_path(cfg.model_dir))
        if not any((path / name).exists() for name in TEMPLATE_FILES):
            return _declares_template(path, _tokenizer_config(path))
    tok = load_tokenizer(cfg)
    return bool(getattr(tok, "chat_template", None))
