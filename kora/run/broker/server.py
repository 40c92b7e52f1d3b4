"""The run's broker: one long-lived process that runs the shard jobs of a local run.

Started by the Snakefile's `onstart` (`start_broker`); it exits once every shard job the
run listed has finished (`Remaining`), or when `onsuccess`/`onerror` stops it;
it listens on a Unix socket that only this user can open. Each connection is one job: a
line of JSON (a kora.run.transport.jobspec.JobSpec) in, a line of JSON `{status, message}` out when the
job is done. A job whose script goes away (Snakemake killed it, Ctrl-C) is cancelled: its
finished calls are in the call store, as with any killed job. The broker exits when the
Snakemake process that started it is gone, so a `kill -9` of the run leaves nothing
behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kora.llm.shared_calls import RunStopping
from kora.run.broker import gc_passes
from kora.run.broker.dispatch import BROKER_ENV
from kora.run.transport.jobspec import JobSpec
from kora.run.transport.protocol import SEND_TIMEOUT, PrefetchRequest, connect, decode_request
from kora.run.transport.reply import STOPPED, Outcome, ProtocolError, read_line

if TYPE_CHECKING:
    from kora.run.jobs.context import Pool

log = logging.getLogger("kora.run.broker.server")
# seconds a stopping broker waits for the requests in flight to be answered: they are paid
# for, and kept, whatever the run does next
DRAIN = 30.0
# one line of JSON a message: the run's job specs for prefetching can take megabytes
# (a full grid's 4,500 jobs), far past asyncio's 64 KiB default
MESSAGE_LIMIT = 1 << 30


@dataclass
class _Ahead:
    """The broker's prefetching (kora.run.broker.prefetch), from the moment the run's first job
    reaches the broker: where no job can start (a job's script failed before it could
    hand its job over), no call is paid for ahead of them. The progress line counts the
    calls made ahead from the run's bill, as they arrive."""

    task: asyncio.Task[None] | None = None
    waiting: tuple[list[JobSpec], Pool] | None = None  # the run's jobs, until one comes

    def start(self) -> None:
        from kora.run.broker.prefetch import Prefetch

        if self.waiting is None:  # started, or never handed the run's jobs
            return
        (specs, pool), self.waiting = self.waiting, None
        run = Prefetch(pool, specs)
        # the run's job specs, the stages and the benchmark are here for the whole run
        gc_passes.freeze()

        # each cell's jobs are closed as the walk leaves it, cancelled or not
        self.task = asyncio.create_task(run.run())

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


ahead = _Ahead()


@dataclass
class Remaining:
    """The shard jobs of the run the broker has yet to see finish, by their output files.

    Once every one has finished well and none is being served, the broker has no more
    work: it exits then, rather than at the run's end, so that its memory (the SDKs, the
    connection pool, the prefetch's cells) is given back before the results job, the
    run's largest, starts. A job that fails keeps it: Snakemake may run it again. A job
    that comes after (one the run's start did not list) runs in its own process, as on a
    cluster."""

    files: set[str] | None = None  # None: the run's jobs were never handed over
    serving: int = 0

    def expect(self, specs: list[JobSpec]) -> None:
        self.files = {f for spec in specs for f in spec.output_files()}

    def finished(self, spec: JobSpec, ok: bool) -> None:
        if ok and self.files is not None:
            self.files.difference_update(spec.output_files())

    @property
    def done(self) -> bool:
        return self.files is not None and not self.files and self.serving == 0


remaining = Remaining()


async def _serve_job(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pool: Pool, idle: asyncio.Event
) -> None:
    """One connection: the run's jobs to work ahead of, or one job to run. `idle` is set
    once every job of the run has finished (`remaining`); a job that comes after that
    finds its connection closed unanswered, and runs in its own process."""
    if idle.is_set():
        writer.close()
        return
    remaining.serving += 1
    try:
        await _serve(reader, writer, pool)
    finally:
        remaining.serving -= 1
        if remaining.done:
            log.info("every shard job of the run has finished: the broker's work is done")
            idle.set()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pool: Pool) -> None:
    from kora.run.broker.execute import execute

    line = b""
    try:
        line = await reader.readline()
        request = decode_request(line)
    except (ProtocolError, ConnectionError) as exc:
        if line.strip():  # an empty line is start_broker's probe
            log.error("a message the broker cannot read: %s", exc)
        writer.close()
        return
    if isinstance(request, PrefetchRequest):  # from onstart: every shard job of the run
        remaining.expect(request.specs)
        ahead.waiting = (request.specs, pool)
        writer.write(Outcome(0).encode())
        await writer.drain()
        writer.close()
        return
    ahead.start()  # a job of the run could start: its calls ahead of the others go out
    job = asyncio.create_task(execute(request.spec, pool, where="the run's broker"))
    gone = asyncio.create_task(reader.read())  # ends when the job's script does
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # the broker is stopping (the run was stopped): the script is told so, and ends
        # quietly, rather than find the connection closed and run the job itself
        job.cancel()
        with contextlib.suppress(BaseException):
            await job
        with contextlib.suppress(ConnectionError, OSError):
            writer.write(Outcome(STOPPED).encode())
            writer.close()
        raise
    if not job.done():
        job.cancel()
        with contextlib.suppress(BaseException):
            await job
        writer.close()
        return
    gone.cancel()
    try:
        reply = job.result()
    except RunStopping:  # the run is being stopped: the job's next call was not sent
        reply = Outcome(STOPPED)
    except Exception:  # a bug: the job fails with its traceback, the broker goes on
        reply = Outcome(1, traceback.format_exc())
    remaining.finished(request.spec, reply.status == 0)
    with contextlib.suppress(ConnectionError):
        writer.write(reply.encode())
        await writer.drain()
    writer.close()


def _listening(path: Path) -> socket.socket:
    """The broker's socket at `path`, listening before it takes its name: a run starting
    meanwhile removes a socket of that name that refuses connections, as one a run killed
    outright left (start_broker)."""
    listening = socket.socket(socket.AF_UNIX)
    old = os.umask(0o077)  # the socket: this user only
    try:
        Path(f"{path}.new").unlink(missing_ok=True)  # one a broker killed here left
        listening.bind(f"{path}.new")
    finally:
        os.umask(old)
    listening.listen(100)
    os.rename(f"{path}.new", path)
    return listening


def _log_the_end(unclaimed: int) -> None:
    """The broker's last line in its log: what it made for nothing."""
    # every call made ahead should have been asked for by its job: one that was not is
    # a call the run paid for nothing (kora.run.broker.walk walks exactly the jobs' units)
    log.info("calls made ahead that no job asked for: %d", unclaimed)


async def serve(path: Path, parent: int) -> None:
    from kora.run.jobs.context import Pool

    pool = Pool(Path.cwd())
    # stop: the run is stopping; now: a second Ctrl-C; idle: every job of the run is done
    stop, now, idle = asyncio.Event(), asyncio.Event(), asyncio.Event()
    server = await asyncio.start_unix_server(
        lambda r, w: _serve_job(r, w, pool, idle), sock=_listening(path), limit=MESSAGE_LIMIT
    )
    loop = asyncio.get_running_loop()

    interrupts = 0

    def on_signal(sig: int) -> None:
        # a stop keeps every answer paid for; a second Ctrl-C (SIGINT: the run's own
        # SIGTERM may come between the two of a group's) stops now
        nonlocal interrupts
        interrupts += sig == signal.SIGINT
        (now if interrupts > 1 else stop).set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)

    async def watch_parent() -> None:
        while os.getppid() == parent:
            await asyncio.sleep(0.5)
        stop.set()  # the run is gone (killed): nothing will ask for more

    watcher = asyncio.create_task(watch_parent())
    async with server:
        ending = [asyncio.create_task(e.wait()) for e in (stop, idle)]
        await asyncio.wait(ending, return_when=asyncio.FIRST_COMPLETED)
        for task in ending:
            task.cancel()
        # no request goes out any more; those in flight are answered, billed and stored
        # (up to DRAIN seconds, or a second signal)
        pool.shared_calls.stop()
        draining = asyncio.create_task(pool.shared_calls.drain())
        hurry = asyncio.create_task(now.wait())
        await asyncio.wait({draining, hurry}, timeout=DRAIN, return_when=asyncio.FIRST_COMPLETED)
        hurry.cancel()
    watcher.cancel()
    ahead.cancel()
    _log_the_end(pool.shared_calls.unclaimed())
    for task in asyncio.all_tasks() - {asyncio.current_task()}:
        task.cancel()
    await pool.aclose()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m kora.run.broker.server", allow_abbrev=False)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--parent", type=int, required=True)
    args = ap.parse_args(argv)
    path = Path(args.socket)
    from kora.run.transport.joblog import install

    install()  # what no job owns goes to standard error: logs/broker.log
    try:
        # libuv's event loop: this one loop carries every job's calls, and is what holds a
        # run below a provider's limit; uvloop's spends 4-14 % less of the broker's CPU on
        # the same calls (bench/README.md). Imported here: Snakemake's process imports this
        # module for `Broker` alone.
        import uvloop

        gc_passes.tune()
        uvloop.run(serve(path, args.parent))
    finally:
        path.unlink(missing_ok=True)


@dataclass
class Broker:
    """The Snakemake process's handle on its broker."""

    process: subprocess.Popen[bytes]
    path: Path
    asked: bool = False  # to stop: a second signal would cut its calls in flight short

    def ask_to_stop(self) -> None:
        """Stop without waiting: the calls in flight are answered, the jobs told `stopped`."""
        if self.process.poll() is None and not self.asked:
            self.asked = True
            self.process.terminate()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.ask_to_stop()
            try:
                self.process.wait(timeout=DRAIN + 10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.path.unlink(missing_ok=True)
        os.environ.pop(BROKER_ENV, None)


def send_ahead(broker: Broker, specs: list[JobSpec], timeout: float = SEND_TIMEOUT) -> bool:
    """Hand the broker every shard job of the run, to make their calls ahead of them;
    False (and the run goes on without working ahead) when it does not take them."""
    try:
        with connect(str(broker.path), timeout) as conn:
            conn.sendall(PrefetchRequest(specs).encode())
            return read_line(conn) is not None
    except OSError as exc:
        print(
            f"kora: warning: no calls made ahead: the broker did not take the jobs ({exc})",
            file=sys.stderr,
        )
        return False


def start_broker(run_id: str, log_path: Path) -> Broker | None:
    """Start the broker for this run (in the current folder), its output to `log_path`,
    and point the jobs at it (in the environment they inherit); None, and the jobs run in
    their own processes, if it does not come up."""
    folder = Path(tempfile.gettempdir())
    for stale in folder.glob(f"kora-{os.getuid()}-*.sock"):
        # left by a run killed with its broker (kill -9 of the process group)
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(stale))
            except ConnectionRefusedError:
                stale.unlink(missing_ok=True)
    path = folder / f"kora-{os.getuid()}-{run_id}.sock"
    path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "kora.run.broker.server", "--socket", str(path)]
    command += ["--parent", str(os.getpid())]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:  # the broker keeps its own copy of the file
        process = subprocess.Popen(command, stdout=out, stderr=out)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(path))
            os.environ[BROKER_ENV] = f"{socket.gethostname()}|{path}"
            return Broker(process, path)
        time.sleep(0.05)
    process.kill()
    return None


if __name__ == "__main__":
    main()
