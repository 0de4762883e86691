"""Processes of the emulated cluster: each started in a session of its own, a node in its own
mount namespace, and all of them stopped by session at the end (never by name).

A node sees the machine's files (the virtualenv and the repository stand in for the image every
node of a real cluster has) except ``/tmp``: its own directory is bind-mounted there, and HOME
and TMPDIR point into it, so nothing the driver or another node keeps in its temp dir or home
(a staging directory, a converted model) is visible to it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# Enters a private mount namespace, puts the node's own directory over /tmp, then runs the node.
NODE_SHELL = 'mount --bind "$0" /tmp && mkdir -p /tmp/home && exec "$@"'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(**extra: str) -> dict[str, str]:
    """A small environment: the virtualenv first on PATH, offline model hubs, nothing of the
    test process's own S3 settings (each process is given what a real node would have)."""
    keep = ("LANG", "LC_ALL", "JAVA_HOME", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        PATH=f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@dataclass
class Processes:
    """Every process the tier started; ``stop`` ends them and whatever they started."""

    log_dir: Path
    started: list[subprocess.Popen] = field(default_factory=list)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        node_dir: Path | None = None,
        cwd: Path = REPO,
    ) -> subprocess.Popen:
        """Start ``argv`` in a new session, its output in ``<log_dir>/<name>.log``; with
        ``node_dir`` as a node in its own mount namespace whose /tmp is ``node_dir``."""
        if node_dir is not None:
            node_dir.mkdir(parents=True, exist_ok=True)
            env = {**env, "HOME": "/tmp/home", "TMPDIR": "/tmp"}
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                NODE_SHELL,
                str(node_dir),
                *argv,
            ]
        log = (self.log_dir / f"{name}.log").open("ab")
        process = subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.started.append(process)
        return process

    def stop(self, process: subprocess.Popen | None = None, grace: float = 5.0) -> None:
        """SIGTERM to the session's leader (a node shuts its children down), then SIGKILL to
        every process left in the sessions this tier started."""
        targets = [process] if process is not None else list(reversed(self.started))
        family = [d for p in targets for d in _descendants(p.pid)]  # before any of them exits
        for p in targets:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + grace
        for p in targets:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.time()))
        sessions = {p.pid for p in targets}
        for _ in range(3):
            left = [q for q in psutil.process_iter() if _session(q) in sessions]
            left += [q for q in family if q.is_running() and q not in left]
            if not left:
                break
            for q in left:
                with contextlib.suppress(psutil.NoSuchProcess):
                    q.kill()
            psutil.wait_procs(left, timeout=5)
        for p in targets:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p in self.started:
                self.started.remove(p)


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _session(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def wait_for(check: Callable[[], bool], what: str, timeout: float = 120, process=None, log=None) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` (and the log's tail) on timeout or
    when ``process`` exits first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        if process is not None and process.poll() is not None:
            break
        time.sleep(1)
    tail = Path(log).read_text(errors="replace")[-3000:] if log and Path(log).exists() else ""
    raise RuntimeError(f"{what} did not come up\n{tail}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False
