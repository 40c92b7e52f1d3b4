"""The run's broker: local shard jobs run in it, calls are made ahead of their jobs, and
the results are the same as when every job runs in its own process."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest
import yaml

from tests.helpers import copy_workflow
from tests.workflows import TINY, snakemake

if TYPE_CHECKING:
    from kora.run.transport.jobspec import JobSpec
    from kora.run.transport.reply import Outcome

OUTPUTS = ("results.json", "usage.json", "summary.json", "report.html")


def run(workdir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return snakemake(workdir, "results/tiny/report.html", env=dict(os.environ, **env))


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return tmp_path


def run_id(name: str) -> str:
    """A run id for this test alone: the broker's socket is named after it in the shared
    temporary folder, where another test session on this machine may run the same test."""
    import uuid

    return f"{name}-{uuid.uuid4().hex[:8]}"


def logged(path: Path, text: str) -> str:
    """The log at `path` once it holds `text` (the test's time limit bounds the wait)."""
    import time

    while text not in (log := path.read_text()):
        time.sleep(0.05)
    return log


def job_logs(workdir: Path, stage: str) -> list[str]:
    return [p.read_text() for p in (workdir / "logs" / stage).rglob("*.log")]


@pytest.mark.slow
def test_shard_jobs_run_in_the_broker_and_nothing_is_left_behind(project: Path) -> None:
    import tempfile

    run_name = run_id("broker")
    socket_path = Path(tempfile.gettempdir()) / f"kora-{os.getuid()}-{run_name}.sock"
    done = run(project, KORA_RUN_ID=run_name)
    assert done.returncode == 0, done.stderr[-3000:]
    for stage in ("seeds", "scenarios", "conversations", "judgments"):
        logs = job_logs(project, stage)
        assert logs and all("(the run's broker)" in text for text in logs), stage
    # aggregation and reports are CPU work: their own processes
    assert "(its own)" in (project / "logs/results/tiny.log").read_text()
    assert not socket_path.exists()  # the broker removed its socket when it stopped


@pytest.mark.slow
def test_the_same_results_with_or_without_the_broker(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Calls made ahead are the jobs' own: every output, usage.json's paid tokens
    included, is the same bytes as when each job runs in its own process."""
    alone = tmp_path_factory.mktemp("alone")
    copy_workflow(alone)
    (alone / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    with_broker, without = run(project), run(alone, KORA_NO_BROKER="1")
    assert with_broker.returncode == 0 and without.returncode == 0
    for stage in ("conversations",):
        assert all("(its own)" in t for t in job_logs(alone, stage))
    for name in OUTPUTS:
        a = (project / "results/tiny" / name).read_bytes()
        b = (alone / "results/tiny" / name).read_bytes()
        assert a == b, name
    usage = orjson.loads((project / "results/tiny/usage.json").read_bytes())
    assert usage["paidThisRun"]["calls"] > 0  # calls made ahead counted as paid, once
    assert usage["asked"]["calls"] > usage["asked"]["cached"]


@pytest.mark.slow
def test_no_call_is_made_ahead_of_jobs_that_cannot_start(project: Path) -> None:
    """A checkout whose path held a space failed every job as it started, after the run
    had paid for 160 calls made ahead of them: the calls ahead now wait for a job to reach
    the broker. Here every job's script fails before it can hand its job over."""
    from kora.llm.money.bill import bill_dir, total

    for script in (project / "scripts").glob("*.py"):
        script.write_text("import a_module_nowhere\n" + script.read_text())
    done = run(project)
    assert done.returncode != 0
    assert "No module named 'a_module_nowhere'" in done.stderr
    assert total(bill_dir(project / ".kora" / "cache")).calls == 0
    assert "kora: this run paid 0 calls" in done.stderr


@pytest.mark.slow
def test_a_broker_that_is_gone_leaves_the_jobs_to_their_own_processes(project: Path) -> None:
    done = run(project, KORA_BROKER=f"{os.uname().nodename}|/nonexistent/kora.sock")
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.timeout(120)
def test_the_whole_run_can_be_handed_to_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The specs of a full grid take megabytes in one message; the broker reads them and,
    once the first job comes, makes their calls ahead (here, mock seed calls)."""
    from dataclasses import replace

    from kora.run.broker.dispatch import BROKER_ENV
    from kora.run.broker.server import send_ahead, start_broker
    from kora.run.transport.jobspec import JobSpec
    from tests.helpers import REPO

    copy_workflow(tmp_path)
    taxonomy = [str(tmp_path / "data/taxonomy/risks.json"),
                str(tmp_path / "data/taxonomy/motivations.json")]  # fmt: skip
    model = {"name": "mock", "provider": "mock", "model": None}
    prompts = [str(REPO / "kora/benchmarks/v1/prompts/seeds.jinja")]
    specs = []
    for age in ("7to9", "10to12", "13to17"):
        for motivation in ("curiosity_exploration", "emotional_distress_anxiety"):
            cell = {"risk": "cybersecurity", "age": age, "motivation": motivation}
            params = {
                "benchmark": "v1",
                "cell": cell,
                "model": model,
                "seeds_per_task": 2,
                "retry": "",
            }
            specs.append(
                JobSpec.of(
                    "seeds",
                    {"prompts": prompts, "taxonomy": taxonomy},
                    # each job its own files: the broker, done once every job of the run
                    # has finished, goes on after the first
                    {"data": f"{age}-{motivation}.jsonl", "status": f"{age}-{motivation}.json"},
                    params,
                    [],
                    {"models": {"mock": {"provider": "mock"}}},
                )
            )
    padded = {**specs[0].params, "pad": "x" * 100_000}
    specs += [replace(specs[0], rule="unknown-rule", params=padded) for _ in range(20)]
    assert len(orjson.dumps([s.as_json() for s in specs])) > 2_000_000
    monkeypatch.setenv("KORA_RUN_ID", run_id("ahead"))
    monkeypatch.chdir(tmp_path)  # the broker runs in the current folder
    broker = start_broker(os.environ["KORA_RUN_ID"], tmp_path / "broker.log")
    assert broker is not None
    monkeypatch.setenv(BROKER_ENV, os.environ[BROKER_ENV])  # start_broker set it
    try:
        assert send_ahead(broker, specs)
        # the calls ahead start once a job of the run has reached the broker
        first = submit(specs[0])
        assert first is not None and first.status == 0
        log = logged(tmp_path / "broker.log", "INFO made ahead: ")
    finally:
        broker.stop()
    assert "made ahead: 6 steps done, 0 stopped" in log
    assert list((tmp_path / ".kora/cache/packs").glob("*.jsonl"))  # the calls are stored


# the broker's process stops once its socket is bound, and goes on (listening) when told
HOLD_AFTER_BIND = """import os, socket
_bind = socket.socket.bind

def bind(self, address):
    _bind(self, address)
    hold = os.environ.pop("KORA_TEST_HOLD", "")
    if hold and self.family == socket.AF_UNIX:
        with open(hold + ".bound", "w") as fifo:
            fifo.write("bound")
        with open(hold + ".go") as fifo:
            fifo.read()

socket.socket.bind = bind
"""


@pytest.mark.timeout(120)
def test_a_run_starting_keeps_the_socket_of_a_broker_starting_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs started at once on one machine: the second's start clears the sockets that
    runs killed outright left behind (refusing connections), and once removed the first
    one's, which was bound but not yet listening; that run found no broker after 20 s, and
    its jobs ran without one."""
    import threading

    from kora.run.broker.dispatch import BROKER_ENV
    from kora.run.broker.server import Broker, start_broker

    copy_workflow(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOLD_AFTER_BIND)
    hold = tmp_path / "hold"
    for end in (".bound", ".go"):
        os.mkfifo(f"{hold}{end}")
    monkeypatch.delenv(BROKER_ENV, raising=False)  # start_broker sets it
    monkeypatch.chdir(tmp_path)  # the brokers run in the current folder
    monkeypatch.setenv("PYTHONPATH", str(hook))
    monkeypatch.setenv("KORA_TEST_HOLD", str(hold))
    first: list[Broker | None] = []
    starting = threading.Thread(
        target=lambda: first.append(start_broker(run_id("first"), tmp_path / "first.log"))
    )
    starting.start()
    other = None
    try:
        assert Path(f"{hold}.bound").read_text() == "bound"  # the first broker is there
        monkeypatch.delenv("KORA_TEST_HOLD")
        other = start_broker(run_id("second"), tmp_path / "second.log")
        assert other is not None
        Path(f"{hold}.go").write_text("go")
        starting.join()
        assert first[0] is not None and first[0].path.exists()
    finally:
        starting.join()
        for broker in (*first, other):
            if broker is not None:
                broker.stop()


@pytest.mark.timeout(60)
def test_a_broker_that_takes_no_message_is_given_up_and_the_run_goes_on(tmp_path: Path) -> None:
    """A broker alive but stuck: the hand-over of the run's jobs has a deadline, and the
    run goes on without working ahead (and a job's script runs its job itself)."""
    import socket as socketlib

    from kora.run.broker.dispatch import BROKER_ENV, hand_over
    from kora.run.broker.server import Broker, send_ahead
    from kora.run.transport.jobspec import JobSpec

    seeds = JobSpec("seeds", {}, {}, {}, [], {})

    path = tmp_path / "stuck.sock"
    server = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)  # accepts connections, never reads nor answers
    try:
        stuck = Broker(process=subprocess.Popen(["true"]), path=path)
        assert send_ahead(stuck, [seeds] * 3, timeout=0.5) is False
        # a job whose broker closes the connection without an answer runs itself
        server.close()
        path.unlink()
        os.environ[BROKER_ENV] = f"{socketlib.gethostname()}|{path}"
        assert hand_over(seeds) is None
    finally:
        os.environ.pop(BROKER_ENV, None)
        server.close()


@pytest.mark.timeout(30)
def test_the_broker_reads_only_the_messages_it_knows() -> None:
    from kora.run.transport.jobspec import JobSpec
    from kora.run.transport.protocol import JobRequest, PrefetchRequest, decode_request
    from kora.run.transport.reply import Outcome, ProtocolError

    job = JobSpec("seeds", {"prompts": ["a"]}, {"data": "b"}, {"retry": ""}, ["c"], {})
    assert decode_request(JobRequest(job).encode()) == JobRequest(job)
    assert decode_request(PrefetchRequest([job]).encode()) == PrefetchRequest([job])
    assert Outcome.decode(Outcome(1, "x").encode()) == Outcome(1, "x")
    # a message travels on one line, as the waiting shell reads it (kora.run.transport.waiter)
    tricky = Outcome(3, "two\nlines, a \\ and a literal \\n, %s %b")
    assert tricky.encode().count(b"\n") == 1 and Outcome.decode(tricky.encode()) == tricky
    for bad in (b"{}\n", b"[1]\n", b"nonsense\n", b'{"job": 3}\n', b'{"job": {"rule": 1}}\n'):
        with pytest.raises(ProtocolError):
            decode_request(bad)
    for bad in (b'{"message": "no status"}\n', b"x message\n", b"3\n"):
        with pytest.raises(ProtocolError):
            Outcome.decode(bad)


def _seed_cells(workdir: Path, motivations: tuple[str, ...]) -> list:
    """Seed jobs of one cell each (the mock model), each writing its own files."""
    from kora.run.transport.jobspec import JobSpec
    from tests.helpers import REPO

    taxonomy = [str(workdir / "data/taxonomy/risks.json"),
                str(workdir / "data/taxonomy/motivations.json")]  # fmt: skip
    prompts = [str(REPO / "kora/benchmarks/v1/prompts/seeds.jinja")]
    specs = []
    for motivation in motivations:
        cell = {"risk": "cybersecurity", "age": "7to9", "motivation": motivation}
        params = {
            "benchmark": "v1",
            "cell": cell,
            "model": {"name": "mock", "provider": "mock", "model": None},
            "seeds_per_task": 2,
            "retry": "",
        }
        out = f"data/seeds/{motivation}"
        specs.append(
            JobSpec.of(
                "seeds",
                {"prompts": prompts, "taxonomy": taxonomy},
                {"data": f"{out}.jsonl", "status": f"{out}.status.json"},
                params,
                [f"logs/{motivation}.log"],
                {"models": {"mock": {"provider": "mock"}}},
            )
        )
    return specs


def submit(spec: JobSpec) -> Outcome | None:
    """As a job's script waiting in Python: the broker's answer; None when no broker
    serves this machine (or it went away first)."""
    from kora.run.broker.dispatch import hand_over
    from kora.run.transport.waiter import answer

    conn = hand_over(spec)
    if conn is None:
        return None
    with conn:
        return answer(conn)


@pytest.mark.timeout(120)
def test_the_broker_exits_once_every_job_of_the_run_has_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its memory is given back before the results job (the run's largest) starts: the
    broker exits when the last job it was handed has finished well, and a job after that
    runs in its own process."""
    from kora.run.broker.dispatch import BROKER_ENV
    from kora.run.broker.server import send_ahead, start_broker

    copy_workflow(tmp_path)
    specs = _seed_cells(tmp_path, ("curiosity_exploration", "emotional_distress_anxiety"))
    monkeypatch.setenv("KORA_RUN_ID", run_id("idle"))
    monkeypatch.chdir(tmp_path)  # the broker runs in the current folder
    broker = start_broker(os.environ["KORA_RUN_ID"], tmp_path / "broker.log")
    assert broker is not None
    monkeypatch.setenv(BROKER_ENV, os.environ[BROKER_ENV])  # start_broker set it
    try:
        assert send_ahead(broker, specs)
        first = submit(specs[0])
        assert first is not None and first.status == 0
        assert broker.process.poll() is None  # a job of the run is still to come
        last = submit(specs[1])
        assert last is not None and last.status == 0
        assert broker.process.wait(timeout=30) == 0
        assert (tmp_path / specs[1].output["data"]).exists()
        assert "the broker's work is done" in (tmp_path / "broker.log").read_text()
        assert submit(specs[0]) is None  # no broker: the script runs the job itself
    finally:
        broker.stop()


@pytest.mark.timeout(120)
def test_a_job_that_failed_keeps_the_broker_for_its_next_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.run.broker.dispatch import BROKER_ENV
    from kora.run.broker.server import send_ahead, start_broker

    copy_workflow(tmp_path)
    (spec,) = _seed_cells(tmp_path, ("curiosity_exploration",))
    monkeypatch.setenv("KORA_RUN_ID", run_id("fail"))
    monkeypatch.chdir(tmp_path)  # the broker runs in the current folder
    broker = start_broker(os.environ["KORA_RUN_ID"], tmp_path / "broker.log")
    assert broker is not None
    monkeypatch.setenv(BROKER_ENV, os.environ[BROKER_ENV])
    try:
        assert send_ahead(broker, [spec])
        blocker = tmp_path / "data/seeds"  # a file where the job's folder goes
        blocker.parent.mkdir(parents=True, exist_ok=True)
        blocker.write_text("")
        failed = submit(spec)
        assert failed is not None and failed.status != 0
        assert broker.process.poll() is None
        blocker.unlink()
        again = submit(spec)  # Snakemake's next try, still in the broker
        assert again is not None and again.status == 0
        assert broker.process.wait(timeout=30) == 0
    finally:
        broker.stop()


SCRIPT = """import json, sys
from types import SimpleNamespace
from kora.run.broker.dispatch import run
job = json.loads(open(sys.argv[1]).read())
run(job["rule"], SimpleNamespace(**{k: v for k, v in job.items() if k != "rule"}))
"""


class _FakeBroker:
    """A Unix socket that takes one job's script's connection, as the run's broker does."""

    def __init__(self, path: Path) -> None:
        import socket as socketlib

        self.server = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.where = f"{socketlib.gethostname()}|{path}"

    def take_job(self) -> tuple[socket.socket, int]:
        """The script's connection, once its job has come, and the script's process id."""
        import socket as socketlib
        import struct

        conn, _ = self.server.accept()
        pid = struct.unpack("3i", conn.getsockopt(socketlib.SOL_SOCKET, socketlib.SO_PEERCRED, 12))[
            0
        ]
        line = b""
        while not line.endswith(b"\n"):
            line += conn.recv(65536)
        assert orjson.loads(line)["job"]["rule"] == "seeds"
        return conn, pid


def _start_script(
    workdir: Path, spec: JobSpec, broker: _FakeBroker, run: str | None = None
) -> subprocess.Popen[str]:
    import signal
    import sys

    from tests.helpers import REPO

    (workdir / "script.py").write_text(SCRIPT)
    job = {
        "rule": spec.rule,
        "input": spec.input,
        "output": spec.output,
        "params": spec.params,
        "log": spec.log,
        "config": {"models": {"mock": {"provider": "mock"}}},
    }
    (workdir / "job.json").write_text(orjson.dumps(job).decode())
    env = dict(os.environ, KORA_BROKER=broker.where, PYTHONPATH=str(REPO))
    env.pop("KORA_RUN_ID", None)
    if run:
        env["KORA_RUN_ID"] = run
    # started as Snakemake's shell prefix starts a script: Ctrl-C ignored
    return subprocess.Popen(
        [sys.executable, "script.py", "job.json"],
        cwd=workdir,
        env=env,
        text=True,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )


def _waits_small(pid: int) -> None:
    """Until the script has become the waiting shell (kora.run.transport.waiter), in the same
    process, and has set its traps of SIGINT and SIGTERM."""
    import signal

    from kora.run.transport.waiter import SCRIPT, SHELL

    cmdline, status = Path(f"/proc/{pid}/cmdline"), Path(f"/proc/{pid}/status")
    wanted = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))

    def caught() -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith("SigCgt"))
        return int(line.split()[1], 16)

    while SCRIPT.encode() not in cmdline.read_bytes() or caught() & wanted != wanted:
        os.sched_yield()
    assert cmdline.read_bytes().split(b"\0")[0] == SHELL.encode()


@pytest.mark.timeout(60)
def test_a_script_waits_for_the_brokers_answer_as_a_shell(tmp_path: Path) -> None:
    """A script whose job the broker runs holds what Snakemake's preamble loaded (26 MB)
    for nothing: it waits as a shell instead, on the same connection, and ends as the
    broker's answer says, its message filtered for the terminal."""
    import signal

    from kora.run.transport.reply import Outcome

    copy_workflow(tmp_path)
    (spec,) = _seed_cells(tmp_path, ("curiosity_exploration",))
    broker = _FakeBroker(tmp_path / "b.sock")
    script = _start_script(tmp_path, spec, broker)
    conn, pid = broker.take_job()
    assert pid == script.pid
    _waits_small(pid)
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(x.split()[1]) for x in status if x.startswith("VmRSS"))
    assert rss < 4_000  # kB: no interpreter (a bare Python took 10,000-11,500)
    conn.sendall(Outcome(3, "kora: seeds job stopped: \x1b[2Jcleared").encode())
    _, err = script.communicate(timeout=30)
    assert script.returncode == 3
    assert "seeds job stopped: cleared" in err and "\x1b" not in err
    conn.close()

    # a stop (SIGTERM from Snakemake, SIGINT from the terminal) ends the wait quietly; a
    # Ctrl-C, which reaches every process of the run, says the run is stopping
    from kora.run.transport.protocol import stopping_path

    for sig in (signal.SIGTERM, signal.SIGINT):
        script = _start_script(tmp_path, spec, broker, run="r1")
        conn, pid = broker.take_job()
        _waits_small(pid)
        script.send_signal(sig)
        _, err = script.communicate(timeout=30)
        assert script.returncode == 130 and err == ""
        assert stopping_path(tmp_path, "r1").exists() == (sig == signal.SIGINT)
        conn.close()


@pytest.mark.timeout(120)
def test_a_script_whose_broker_goes_away_runs_its_job_itself(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    (spec,) = _seed_cells(tmp_path, ("curiosity_exploration",))
    broker = _FakeBroker(tmp_path / "b.sock")
    script = _start_script(tmp_path, spec, broker)
    conn, pid = broker.take_job()
    _waits_small(pid)
    conn.close()  # the broker dies without an answer
    broker.server.close()
    _, err = script.communicate(timeout=90)
    assert script.returncode == 0, err
    assert (tmp_path / spec.output["data"]).read_text().strip()
    assert (tmp_path / spec.output["status"]).exists()


@pytest.mark.timeout(120)
def test_the_jobs_one_process_serves_take_turns_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker runs up to --cores jobs of 30 cells each: their cells take turns, a
    bounded number at once, so its memory does not grow with the jobs in it; every cell
    still runs, and every job ends well."""
    import asyncio

    from kora.run.broker import execute
    from kora.run.jobs import context

    copy_workflow(tmp_path)
    monkeypatch.chdir(tmp_path)
    motivations = (
        "curiosity_exploration",
        "emotional_distress_anxiety",
        "boredom_sensation_seeking",
    )
    specs = _seed_cells(tmp_path, motivations)
    running, most = 0, 0
    cell = execute._execute_cell

    async def counted(spec: JobSpec, pool: context.Pool, where: str) -> object:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            return await cell(spec, pool, where)
        finally:
            running -= 1

    monkeypatch.setattr(execute, "_execute_cell", counted)
    monkeypatch.setattr(context, "CELLS_AT_ONCE", 2)

    async def serve() -> list[object]:
        pool = context.Pool(tmp_path)
        try:
            return await asyncio.gather(*(execute.execute(s, pool) for s in specs * 2))
        finally:
            await pool.aclose()

    outcomes = asyncio.run(serve())
    assert [o.status for o in outcomes] == [0] * 6  # type: ignore[attr-defined]
    assert most == 2
    for spec in specs:
        assert (tmp_path / spec.output["data"]).read_text().strip()
