"""llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct, started by a
test on a free loopback port (tests/test_llamacpp.py).

The server and the model come from .ci/llamacpp-setup.sh: a virtualenv of the server's own
and the GGUF file, named in `<cache>/kora-llamacpp.env` (or by KORA_LLAMACPP_PYTHON and
KORA_LLAMACPP_MODEL). Without them the tests skip, unless KORA_REQUIRE_LLAMACPP=1 (CI sets
it when the set-up succeeded): then they fail.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ALIAS = "smollm2"
READY_WITHIN = 120.0  # seconds from launch to GET /v1/models answering (measured: 1-3 s)


def cache_dir() -> Path:
    given = os.environ.get("KORA_LLAMA_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kora-llamacpp"


def settings() -> dict[str, str]:
    """KORA_LLAMACPP_PYTHON and KORA_LLAMACPP_MODEL: from the environment, else the set-up's
    env file."""
    found: dict[str, str] = {}
    env_file = cache_dir() / "kora-llamacpp.env"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    for key in ("KORA_LLAMACPP_PYTHON", "KORA_LLAMACPP_MODEL"):
        if os.environ.get(key):
            found[key] = os.environ[key]
    return found


def require() -> tuple[str, str]:
    """The server's Python and the model file, or skip (fail when they are required)."""
    s = settings()
    python, model = s.get("KORA_LLAMACPP_PYTHON", ""), s.get("KORA_LLAMACPP_MODEL", "")
    if not all(p and Path(p).is_file() for p in (python, model)):
        reason = (
            "llama-cpp-python's server or the SmolLM2 model is not set up "
            "(bash .ci/llamacpp-setup.sh)"
        )
        if os.environ.get("KORA_REQUIRE_LLAMACPP") == "1":
            pytest.fail(f"KORA_REQUIRE_LLAMACPP=1 but {reason}")
        pytest.skip(reason)
    return python, model


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        """The process runs and answers GET /v1/models."""
        if self.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(log: Path, n_ctx: int = 4096) -> Iterator[LlamaServer]:
    """The server on a free loopback port, ready; stopped (and reaped) on the way out."""
    python, model = require()
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", ALIAS,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
             # one thread: on 2 shared cores more threads spin-wait and stall
             "--n_threads", "1"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = LlamaServer(process, port, log)
    try:
        deadline = time.monotonic() + READY_WITHIN
        # the port opens only once the model is loaded: poll GET /v1/models, waiting on
        # the process itself in between (its exit ends the wait at once)
        while not server.alive():
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the llama.cpp server was not ready in {READY_WITHIN:g} s:\n{server.tail()}"
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.1)
            if process.poll() is not None:
                pytest.fail(f"the server exited ({process.returncode}):\n{server.tail()}")
        yield server
    finally:
        process.terminate()
        try:  # it finishes the request in hand first: do not wait for a long one
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
