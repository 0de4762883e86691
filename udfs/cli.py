"""Command lines generated from an entry point's Config dataclass.

Every option is a Config field declared with ``option(...)``: its flag, help text, allowed values
and range live beside the field, so the Python API and the command line cannot drift apart.
Fields declared with ``dataclasses.field`` (or plainly) are not options. A nested dataclass field
declared with ``nested(...)`` contributes its own options as a group (and optionally a flag that
reads its fields from a YAML file first).

Values are converted by the field's type: ``int``, ``float``, ``str``, ``bool`` (a switch),
``datetime.date`` (``YYYY-MM-DD``), ``datetime.datetime`` (ISO 8601, UTC unless an offset is given), ``X | None``, ``tuple[X, ...]`` / ``list[X]`` (comma-separated,
or a repeatable flag with ``repeat=True``), a fixed ``tuple[X, X]`` (two values) and
``tuple[tuple[X, X], ...]`` (a repeatable pair). Ranges and choices are checked per value; rules
that tie fields together live in the Config's ``__post_init__``, whose ``ValueError`` becomes a
one-line usage error like argparse's own. ``InputError`` raised while running (a missing corpus
table, a file given as root) is reported the same way, with exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import sys
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from udfs import storage
from udfs.report import log_to_stderr

_MISSING: Any = dataclasses.MISSING
_KEY = "augury_cli"


class InputError(ValueError):
    """The inputs of a run are missing or unusable; the message says which and what to do."""


def option(
    default: Any = _MISSING,
    *,
    help: str,
    default_factory: Callable[[], Any] = _MISSING,
    flag: str | None = None,
    choices: Sequence[Any] | None = None,
    min: float | None = None,
    max: float | None = None,
    positional: bool = False,
    repeat: bool = False,
    metavar: str | None = None,
    clears: tuple[str, ...] = (),
) -> Any:
    """A Config field that is also a command-line option. ``clears`` names fields that a preset
    set and that this option, given explicitly, makes void (they return to their defaults)."""
    meta = {
        _KEY: {
            "help": help,
            "flag": flag,
            "choices": tuple(choices) if choices is not None else None,
            "min": min,
            "max": max,
            "positional": positional,
            "repeat": repeat,
            "metavar": metavar,
            "clears": clears,
        }
    }
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def nested(factory: Callable[[], Any], *, title: str, file_flag: str | None = None, help: str = "") -> Any:
    """A nested dataclass field whose own options join the command line as one group;
    ``file_flag`` names a flag that reads the nested fields from a YAML file first."""
    meta = {_KEY: {"nested": True, "title": title, "file_flag": file_flag, "help": help}}
    return dataclasses.field(default_factory=factory, metadata=meta)


# ----------------------------------------------------------------------------- value types
def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(text) from None


_date.__name__ = "date (YYYY-MM-DD)"


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_bool.__name__ = "boolean"


def _datetime(text: str) -> dt.datetime:
    """An ISO date (its midnight) or date and time; without an offset it is UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(text) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


_datetime.__name__ = "date or time (ISO 8601, UTC unless an offset is given)"
_SCALARS: dict[Any, Callable[[str], Any]] = {
    int: int,
    float: float,
    str: str,
    dt.date: _date,
    dt.datetime: _datetime,
    bool: _bool,
}


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


@dataclasses.dataclass(frozen=True)
class _Shape:
    """How a field's values are read: ``scalar`` one value, ``list`` many, ``pairs`` many fixed
    tuples, ``fixed`` one fixed tuple; ``item`` converts one value."""

    kind: str
    item: Callable[[str], Any]
    width: int = 1


def _shape(tp: Any, name: str) -> _Shape:
    tp = _strip_optional(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _SCALARS:
        return _Shape("scalar", _SCALARS[tp])
    if origin in (tuple, list) and args:
        if (len(args) == 2 and args[1] is Ellipsis) or origin is list:
            inner = args[0]
            if typing.get_origin(inner) is tuple:
                sub = typing.get_args(inner)
                return _Shape("pairs", _SCALARS[sub[0]], len(sub))
            return _Shape("list", _SCALARS[inner])
        return _Shape("fixed", _SCALARS[args[0]], len(args))
    raise TypeError(f"option {name}: unsupported type {tp!r}")


# ----------------------------------------------------------------------------- the parser
@dataclasses.dataclass
class _Option:
    dest: str  # "<field>" or "<nested field>.<field>"
    shape: _Shape
    meta: dict[str, Any]


def _fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if _KEY in f.metadata]


def _add(parser: argparse._ActionsContainer, dest: str, field: dataclasses.Field, tp: Any) -> _Option:
    meta = field.metadata[_KEY]
    shape = _shape(tp, field.name)
    flag = meta["flag"] or "--" + field.name.replace("_", "-")
    kwargs: dict[str, Any] = {"help": _help(meta, field), "dest": dest, "default": argparse.SUPPRESS}
    base = _strip_optional(tp)
    if not (shape.kind == "scalar" and base is bool):
        choices = meta["choices"]
        kwargs["metavar"] = meta["metavar"] or _metavar(field.name, shape, choices, meta["repeat"])
        if shape.width > 1:
            kwargs["metavar"] = (kwargs["metavar"],) * shape.width
    if shape.kind == "scalar" and base is bool and not meta["positional"]:
        kwargs["action"] = argparse.BooleanOptionalAction if field.default is True else "store_true"
    elif shape.kind == "scalar":
        kwargs["type"] = shape.item
    elif shape.kind == "list":
        kwargs["type"] = shape.item if meta["repeat"] or meta["positional"] else _csv(shape.item)
        if meta["repeat"]:
            kwargs["action"] = "append"
        elif meta["positional"]:
            kwargs["nargs"] = "+" if field.default is _MISSING and field.default_factory is _MISSING else "*"
    else:  # fixed / pairs
        kwargs.update(type=shape.item, nargs=shape.width)
        if shape.kind == "pairs":
            kwargs["action"] = "append"
    if meta["positional"]:
        kwargs.pop("dest")
        parser.add_argument(dest, **kwargs)
    else:
        if field.default is _MISSING and field.default_factory is _MISSING:
            kwargs["required"] = True
        parser.add_argument(flag, **kwargs)
    return _Option(dest, shape, meta)


def _metavar(name: str, shape: _Shape, choices: tuple | None, repeat: bool) -> str:
    if choices:
        one = "{" + ",".join(map(str, choices)) + "}"
    else:
        one = {int: "N", float: "X", _date: "YYYY-MM-DD", _datetime: "TIME"}.get(shape.item, name.upper())
    return f"{one}[,...]" if shape.kind == "list" and not repeat and one != name.upper() else one


def _help(meta: dict[str, Any], field: dataclasses.Field) -> str:
    text = meta["help"]
    if meta["choices"]:
        text += f" (one of: {', '.join(map(str, meta['choices']))})"
    default = field.default
    if default not in (_MISSING, None, False, (), "") and "default" not in text:
        shown = ",".join(map(str, default)) if isinstance(default, tuple | list) else default
        text += f" [default: {shown}]"
    return text.replace("%", "%%")


def _csv(item: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def convert(text: str) -> list[Any]:
        return [item(part.strip()) for part in text.split(",") if part.strip()]

    convert.__name__ = f"comma-separated {item.__name__}"
    return convert


def _check(opt: _Option, value: Any) -> Any:
    """The value in its field's type, after the range and choice checks (ValueError on failure)."""
    if opt.shape.kind == "list":
        value = tuple(v for part in value for v in (part if isinstance(part, list) else [part]))
    elif opt.shape.kind == "pairs":
        value = tuple(tuple(p) for p in value)
    elif opt.shape.kind == "fixed":
        value = tuple(value)
    _validate(opt.meta, opt.meta["flag"] or "--" + opt.dest.split(".")[-1].replace("_", "-"), value)
    return value


def _validate(meta: dict[str, Any], flag: str, value: Any) -> None:
    """Choices and ranges of one option's value (every element of a list or pair)."""
    if value is None:
        return
    items = [value] if not isinstance(value, tuple | list) else list(value)
    items = [v for item in items for v in (item if isinstance(item, tuple | list) else [item])]
    for v in items:
        if meta["choices"] and v not in meta["choices"]:
            raise ValueError(f"argument {flag}: {v!r} is not one of {', '.join(map(str, meta['choices']))}")
        if meta["min"] is not None and v < meta["min"]:
            raise ValueError(f"argument {flag}: must be at least {meta['min']}, got {v}")
        if meta["max"] is not None and v > meta["max"]:
            raise ValueError(f"argument {flag}: must be at most {meta['max']}, got {v}")


def check_options(config: Any) -> None:
    """Choices and ranges of every option field of a Config instance (for the Python API, where
    no parser checked them); call it from ``__post_init__``."""
    for f in dataclasses.fields(config):
        meta = f.metadata.get(_KEY)
        if meta and not meta.get("nested"):
            _validate(meta, meta["flag"] or "--" + f.name.replace("_", "-"), getattr(config, f.name))


def build_parser(
    cls: type, prog: str, description: str | None, presets: dict[str, tuple[str, dict]]
) -> tuple[argparse.ArgumentParser, list[_Option], dict[str, tuple[str, type, str | None]]]:
    """The parser of ``cls``; returns it, its options and its nested groups (field → (title, class, file flag))."""
    required = [
        f.metadata[_KEY]["flag"] or "--" + f.name.replace("_", "-") + " " + f.name.upper()
        for f, _ in _fields(cls)
        if not f.metadata[_KEY].get("nested")
        and not f.metadata[_KEY]["positional"]
        and f.default is _MISSING
        and f.default_factory is _MISSING
    ]
    positional = [f.name.upper() + " ..." for f, _ in _fields(cls) if f.metadata[_KEY].get("positional")]
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=" ".join([prog, *required, "[options]", *positional]),
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for name, (text, _) in presets.items():
        parser.add_argument(f"--{name}", action="store_true", help=text)
    options, groups = [], {}
    for field, tp in _fields(cls):
        meta = field.metadata[_KEY]
        if meta.get("nested"):
            sub = _strip_optional(tp)
            group = parser.add_argument_group(meta["title"])
            if meta["file_flag"]:
                group.add_argument(
                    meta["file_flag"],
                    dest=f"{field.name}.__file__",
                    default=argparse.SUPPRESS,
                    metavar="FILE",
                    help=meta["help"],
                )
            groups[field.name] = (meta["title"], sub, meta["file_flag"])
            options += [_add(group, f"{field.name}.{f.name}", f, t) for f, t in _fields(sub)]
        else:
            options.append(_add(parser, field.name, field, tp))
    return parser, options, groups


def parse(
    cls: type,
    argv: Sequence[str] | None,
    prog: str,
    description: str | None = None,
    presets: dict[str, tuple[str, dict[str, Any]]] | None = None,
) -> Any:
    """Parse ``argv`` into an instance of ``cls``; usage errors exit with status 2 and one line.

    ``presets`` maps a switch name to (help, field values) applied before the explicit flags."""
    presets = presets or {}
    parser, options, groups = build_parser(cls, prog, description, presets)
    args = vars(parser.parse_args(argv))
    try:
        values: dict[str, Any] = {}
        for name, (_, fields) in presets.items():
            if args.pop(name, False):
                values.update(fields)
        given = [opt for opt in options if opt.dest in args]
        for opt in given:
            for name in opt.meta["clears"]:
                values.pop(name, None)
        for opt in given:
            values[opt.dest] = _check(opt, args[opt.dest])
        for name, (_, sub, file_flag) in groups.items():
            nested_values = dict(values.get(name) or {})  # a preset gives a nested config as a dict
            if f"{name}.__file__" in args:
                try:
                    nested_values |= read_settings(args[f"{name}.__file__"], sub)
                except ValueError as exc:
                    raise ValueError(f"argument {file_flag}: {exc}") from None
            prefix = f"{name}."
            nested_values |= {k[len(prefix) :]: values.pop(k) for k in list(values) if k.startswith(prefix)}
            values[name] = sub(**nested_values)
        return cls(**values)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc).splitlines()[0])


def read_settings(path: str, cls: type) -> dict[str, Any]:
    """Field values of the dataclass ``cls`` from a YAML mapping in a file (a path or a URI,
    ``s3://`` too); unknown keys are an error."""
    try:
        data = yaml.safe_load(storage.read_bytes(path).decode("utf-8")) or {}
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a mapping of settings")
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls) if f.init})
    if unknown:
        raise ValueError(f"unknown keys {unknown} in {path}")
    return data


def run_cli(
    cls: type,
    run: Callable[[Any], Any],
    prog: str,
    description: str | None,
    argv: Sequence[str] | None = None,
    presets: dict[str, tuple[str, dict[str, Any]]] | None = None,
) -> Any:
    """Parse, set up logging, run; an ``InputError`` ends the process with one line and status 2."""
    config = parse(cls, argv, prog, description, presets)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log_to_stderr()  # a no-op basicConfig (the root logger set up before) must not silence them
    try:
        return run(config)
    except InputError as exc:
        # one raised in a Ray Data task arrives wrapped (its text: the remote traceback); the
        # task's own error is its cause, with Ray's retry advice on the lines after the message
        message = str(exc.cause).split("\n", 1)[0] if hasattr(exc, "cause") else str(exc)
        print(f"{prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2) from None
