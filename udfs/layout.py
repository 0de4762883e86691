"""Every path under a root URI, in one place.

```
<root>/corpus/<table>/…                 corpus tables (udfs.schemas)
<root>/index/<name>/                    search indexes (LanceDB)
<root>/<namespace>/<stage>/…            LLM stage caches and outputs (namespace: builder or eval run)
<root>/benchmarks/<name>/<table>/…      benchmark tables, eval_items, rejected, dataset card
<root>/eval/…                           evaluation results and reports
```

``Layout.check_root`` and ``Layout.require`` turn the usual mistakes (a misspelled root, a file
given as the root, a corpus job not run yet) into one-line ``InputError``s before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

from udfs import storage
from udfs.cli import InputError


@dataclass(frozen=True)
class Layout:
    """The paths of one root URI (a path, ``file://`` or ``s3://``)."""

    root: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", storage.normalize_uri(self.root))

    def path(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    def table(self, spec) -> str:
        """A corpus table's URI (``spec`` is a ``udfs.schemas.TableSpec``)."""
        return self.path(spec.path)

    def index(self, name: str = "articles") -> str:
        return self.path("index", name)

    def stage(self, namespace: str, stage: str, *parts: str) -> str:
        return self.path(namespace, stage, *parts)

    def benchmark(self, name: str, *parts: str) -> str:
        return self.path("benchmarks", name, *parts)

    def eval(self, *parts: str) -> str:
        return self.path("eval", *parts)

    def check_root(self, must_exist: bool = True) -> None:
        """Refuse a root that is a file, or (``must_exist``) one that does not exist."""
        if storage.is_file(self.root):
            raise InputError(f"--root {self.root} is a file, not a directory")
        if must_exist and not storage.is_dir(self.root):
            raise InputError(f"--root {self.root} does not exist (a typo? run the corpus jobs first)")

    def require(self, *specs, any_of: bool = False) -> list:
        """Check the root, then that the corpus tables exist (all of them, or ``any_of``); an
        existing empty table is fine. Returns the specs present."""
        self.check_root()
        present = [s for s in specs if storage.exists(self.table(s))]
        missing = [s for s in specs if s not in present]
        if missing and (not any_of or not present):
            names = ", ".join(s.path for s in missing)
            lead = "none of" if any_of and len(missing) > 1 else "missing"
            raise InputError(f"{lead} {names} under {self.root}: run the corpus jobs (jobs/) first")
        return present
