"""Fixtures: a real `spool server`, built from this repository and started
by the tests on a free loopback port with a fresh data folder."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[3]
_LISTENING = re.compile(r"^spool listening on (http://\S+)", re.M)

ADMIN_SECRET = "admin-" + uuid.uuid4().hex
READER_SECRET = "reader-" + uuid.uuid4().hex


class Server:
    """A running `spool server`; ``url`` is its base URL."""

    def __init__(self, binary: Path, workdir: Path, args: List[str],
                 env: Optional[Dict[str, str]] = None) -> None:
        self.log_path = workdir / "server.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(binary), "server", "--addr", "127.0.0.1:0", "--data", str(workdir / "data"),
             "--log-level", "warn", *args],
            stdout=subprocess.DEVNULL, stderr=self._log,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 20
        self.url = ""
        while time.monotonic() < deadline:
            m = _LISTENING.search(self.log_path.read_text(errors="replace"))
            if m:
                self.url = m.group(1)
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not self.url:
            self.stop()
            raise RuntimeError("spool server did not start:\n" + self.log_path.read_text(errors="replace"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def spool_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spool binary: $SPOOL_BIN, or built from the repository once per session."""
    given = os.environ.get("SPOOL_BIN")
    if given:
        return Path(given)
    if shutil.which("go") is None:
        pytest.skip("go is needed to build spool")
    out = tmp_path_factory.mktemp("bin") / "spool"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/spool"], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="session")
def server(spool_bin: Path) -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="spool-py-") as d:
        s = Server(spool_bin, Path(d), [])
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="session")
def auth_server(spool_bin: Path) -> Iterator[Server]:
    tokens = f"admin admin * {ADMIN_SECRET}; reader read-only * {READER_SECRET}"
    with tempfile.TemporaryDirectory(prefix="spool-py-auth-") as d:
        s = Server(spool_bin, Path(d), ["--auth"], env={"SPOOL_AUTH_TOKENS": tokens})
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="session")
def small_payload_server(spool_bin: Path) -> Iterator[Server]:
    """A server that keeps results (and payloads) of at most 1 KiB."""
    with tempfile.TemporaryDirectory(prefix="spool-py-small-") as d:
        s = Server(spool_bin, Path(d), ["--max-payload-bytes", "1024"])
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture
def queue() -> str:
    """A queue name of this test's own."""
    return "py-" + uuid.uuid4().hex[:12]


def run(coro, timeout: float = 30.0):
    """Runs a coroutine to completion in a new event loop, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro, timeout))
