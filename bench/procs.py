"""What each kind of process of a run costs: Snakemake's own process, the broker, the jobs.

Read from /proc ten times a second while the run goes: each process's CPU time (user +
system, the last value seen before it ended), resident and proportional memory (Pss, from
/proc/<pid>/smaps_rollup), and how many times the broker's event loop slept and woke
(`broker_wakes`). The run's peak is the largest sum of every process's Pss at one moment;
`at_peak` says which process held what then (a job by its rule's name). Resident memory summed
over processes counts a page they share (the interpreter's code, a forked parent's pages)
once for each of them; the proportional figure (Pss: each shared page split among those
that share it) counts it once, which is what the machine spends. A job that lives less
than a tenth of a second can be missed, so the jobs' CPU is given as what is left of the
whole tree's (`os.wait4`'s usage, exact) once Snakemake's and the broker's are taken out.

A process between its fork and its exec is left out of a sample: Snakemake starts a job
with vfork, whose child shares its parent's memory and reads in /proc as holding all of
it (a "job" of Snakemake's 197 MB once made a v2 run's peak 616 MB where it was 447-465
in the next two); so is one that exec'd while it was read.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> Iterator[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    todo = [pid]
    while todo:
        p = todo.pop()
        yield p
        todo.extend(children.get(p, []))


def kind(pid: int, root: int, cmdline: bytes) -> str | None:
    cmd = cmdline.replace(b"\0", b" ").decode(errors="replace")
    if pid == root:
        return "snakemake"
    if "kora.run.broker.server" in cmd:
        return "broker"
    if "python" in cmd:
        return "job"
    return None  # shells, Snakemake's solver: counted with the jobs' remainder


def script(cmdline: bytes) -> str:
    """A job's script by its name (`results` for .snakemake/scripts/tmpXXXX.results.py)."""
    for word in cmdline.split(b"\0"):
        if word.endswith(b".py") and b".snakemake/scripts/" in word:
            return f"job {word.decode(errors='replace').rsplit('.', 2)[-2]}"
    return "job"


def _read(pid: int) -> tuple[float, int, int] | None:
    """(CPU seconds, resident bytes, parent's pid) of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, rss, int(fields[1])


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def _field(path: str, name: bytes) -> int | None:
    """The number on the line of a /proc file that starts with `name` (None: no such
    line, or the process is gone)."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _sleeps(pid: int) -> int | None:
    """How many times the process's main thread (the broker's event loop) has gone to
    sleep waiting for something (the kernel's voluntary context switches): each is a wake
    that follows, to work on whatever it waited for."""
    return _field(f"/proc/{pid}/status", b"voluntary_ctxt_switches:")


def _pss(pid: int) -> int:
    """Proportional resident bytes of a process (0 where the kernel does not say)."""
    kib = _field(f"/proc/{pid}/smaps_rollup", b"Pss:")
    return 0 if kib is None else kib * 1024


class Watch(threading.Thread):
    """Peak memory and CPU of each kind of process below `root`, until `done` is set."""

    def __init__(self, root: int, every: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.every = every
        self.peak: dict[str, int] = {}
        self.total = 0  # the largest resident memory of all of them at once
        self.total_pss = 0  # the largest proportional memory of all of them at once
        # the moment of that proportional peak: Pss by process (Snakemake, the broker, each
        # job by its rule's name; several jobs of a rule summed) and how many of each
        self.at_peak: dict[str, int] = {}
        self.at_peak_count: dict[str, int] = {}
        self.at_peak_time = 0.0
        # the largest Pss one process of each name held at any moment (a job by its rule)
        self.peak_pss: dict[str, int] = {}
        self._cpu: dict[int, tuple[str, float]] = {}
        self._sleeps: dict[int, int] = {}  # the broker's, by process (the last value seen)
        self.samples: list[tuple[float, dict[str, float]]] = []  # (time, CPU s by kind)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            total = pss = 0
            now: dict[str, int] = {}
            count: dict[str, int] = {}
            for pid in descendants(self.root):
                before = _cmdline(pid)
                got = _read(pid)
                if got is None:
                    continue
                cpu, rss, parent = got
                own = _pss(pid)
                # not exec'd yet (its parent's command line), or exec'd while read
                if before is None or (pid != self.root and before == _cmdline(parent)):
                    continue
                if _cmdline(pid) != before:
                    continue
                what = kind(pid, self.root, before)
                total += rss
                pss += own
                name = (script(before) if what == "job" else what) or "other"
                now[name] = now.get(name, 0) + own
                count[name] = count.get(name, 0) + 1
                self.peak_pss[name] = max(self.peak_pss.get(name, 0), own)
                if what:
                    self.peak[what] = max(self.peak.get(what, 0), rss)
                    self._cpu[pid] = (what, cpu)
                if what == "broker":
                    slept = _sleeps(pid)
                    if slept is not None:
                        self._sleeps[pid] = slept
            self.total = max(self.total, total)
            if pss > self.total_pss:
                self.total_pss, self.at_peak, self.at_peak_count = pss, now, count
                self.at_peak_time = time.time()
            self.samples.append((time.time(), self.cpu(0.0)))

    @property
    def broker_wakes(self) -> int:
        """The times the brokers' event loops slept and woke (up to the last sample)."""
        return sum(self._sleeps.values())

    def cpu(self, whole: float) -> dict[str, float]:
        """CPU seconds by kind; `whole` is the tree's (jobs: the rest of it)."""
        out = {"snakemake": 0.0, "broker": 0.0}
        for what, seconds in self._cpu.values():
            if what in out:
                out[what] += seconds
        out["jobs"] = max(whole - out["snakemake"] - out["broker"], 0.0)
        return out


def watched_run(
    cmd: list[str], cwd: Path, env: dict[str, str], log: Path
) -> tuple[int, resource.struct_rusage, Watch]:
    """Run `cmd` (its output to `log`) under a Watch: its exit status, the whole tree's
    resource usage (exact, from `os.wait4`) and the Watch's figures."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=out)
        watch = Watch(proc.pid)
        watch.start()
        _, status, usage = os.wait4(proc.pid, 0)
        watch.done.set()
        watch.join()
    return os.waitstatus_to_exitcode(status), usage, watch


def busy(samples: list[tuple[float, dict[str, float]]], what: str, step: float) -> str:
    """Share of a core `what` used, `step` seconds at a time (from the first sample)."""
    if not samples:
        return ""
    out: list[str] = []
    i = 0
    while i < len(samples) - 1:
        j = i
        while j < len(samples) - 1 and samples[j][0] - samples[i][0] < step:
            j += 1
        dt = samples[j][0] - samples[i][0]
        out.append(f"{(samples[j][1][what] - samples[i][1][what]) / max(dt, 1e-9):.2f}")
        i = j
    return " ".join(out)
