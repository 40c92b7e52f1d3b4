"""kora.run.workflow.snakemake_api reads Snakemake's internals: each reader, run by the installed Snakemake
in a workflow of its own, gives what the Snakefile relies on (a Snakemake that changes
one fails here, not in the middle of a run)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from tests.helpers import copy_workflow
from tests.workflows import TINY, snakemake

SNAKEFILE = """
from kora.run.workflow import snakemake_api

print("OVERLAYS", snakemake_api.overlays(workflow), flush=True)


configfile: "base.yaml"


rule all:
    input:
        "a.txt",
        "b.txt",


rule make:
    output:
        "{name}.txt",
    shell:
        "touch {output}"


onstart:
    jobs = [snakemake_api.job_parts(j) for j in snakemake_api.jobs_to_run(workflow)]
    print("JOBS", sorted((n, wc.get("name", "")) for n, wc, *_ in jobs), flush=True)
    print("LOCAL", snakemake_api.runs_locally(workflow), flush=True)
    print("ISOLATED", snakemake_api.isolated_software(workflow), flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_each_reader_works_with_the_installed_snakemake(tmp_path: Path) -> None:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "base.yaml").write_text("x: 1\n")
    (tmp_path / "extra.yaml").write_text("y: 2\n")
    done = snakemake(tmp_path, cores=1, configfile="extra.yaml", timeout=280)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "OVERLAYS ['extra.yaml']" in out or f"OVERLAYS ['{tmp_path}/extra.yaml']" in out
    assert "JOBS [('all', ''), ('make', 'a'), ('make', 'b')]" in out
    assert "LOCAL True" in out
    assert "ISOLATED False" in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_file_of_no_target_or_of_another_version_is_named_as_such(tmp_path: Path) -> None:
    """snakemake_api.check_targets: a file asked on the command line that no rule can make ends
    the command before Snakemake builds its jobs, in one error line and no traceback, be
    it a run, a dry run or a report."""
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    for args in (
        ["results/nobody/results.json"],
        ["-n", "results/nobody/results.json"],
        [f"{tmp_path}/results/nobody/report.html"],
        ["results/tiny/results.json", "./results/nobody/summary.json"],
    ):
        nobody = snakemake(tmp_path, *args)
        assert nobody.returncode != 0
        said = " ".join((nobody.stdout + nobody.stderr).split())  # a dry run's on stdout
        assert "no target 'nobody' in the config (targets: tiny" in said, said[-2000:]
        assert "Exception" not in said and "Traceback" not in said and "File " not in said
        assert "Building DAG" not in said
        assert not (tmp_path / ".kora" / "cache").exists()  # no run started
    other = snakemake(tmp_path, "results-v2/tiny/report.html")
    assert other.returncode != 0
    said = " ".join(other.stderr.split())
    assert "results-v2/ holds KORA v2 results, but this run's config is KORA v1" in said
    assert "Exception" not in said and "Traceback" not in said
    # a target's name, or a file of it misspelt: Snakemake's MissingRuleException before
    for asked, says in (
        ("tiny", "tiny: a target's name; ask Snakemake for its files, e.g. its report: "
                 "snakemake --cores 2 results/tiny/report.html --configfile tiny.yaml"),
        ("results/tiny/reprot.html", "results/tiny/reprot.html: no rule makes it (did you "
                                     "mean report.html?); a target's files: results.json,"),
    ):  # fmt: skip
        wrong = snakemake(tmp_path, "-n", asked)
        said = " ".join((wrong.stdout + wrong.stderr).split())
        assert wrong.returncode != 0 and says in said, said[-2000:]
        assert "Exception" not in said and "Traceback" not in said


FAILING_SNAKEFILE = """
from pathlib import Path
from kora.run.workflow import snakemake_api

snakemake_api.tidy_job_reports(lambda: Path("stopping").exists())


rule fail:
    output:
        "a.txt",
    shell:
        "exit 3"
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failed_job_is_not_reported_while_the_run_is_stopping(tmp_path: Path) -> None:
    """snakemake_api.tidy_job_reports: Snakemake's report of a failed job, and the line that ends
    the run on it, are left out while `stopping()` holds, and only then."""
    (tmp_path / "Snakefile").write_text(FAILING_SNAKEFILE)
    failing = snakemake(tmp_path, cores=1, configfile=None, timeout=280)
    said = failing.stdout + failing.stderr
    assert failing.returncode != 0
    for line in ("Error in rule fail", "RuleException", "Exiting because a job execution failed"):
        assert line in said, said[-3000:]
    (tmp_path / "stopping").touch()
    stopped = snakemake(tmp_path, cores=1, configfile=None, timeout=280)
    said = stopped.stdout + stopped.stderr
    assert stopped.returncode != 0
    for line in ("Error in rule", "RuleException", "CalledProcessError", "Exiting because"):
        assert line not in said, said[-3000:]


REPORTING_SNAKEFILE = """
from kora.run.workflow import snakemake_api

reporting = snakemake_api.reporting(workflow, lambda: None)


def asked(wc):
    print("REPORTING", reporting(), flush=True)
    return ["a.txt"]


rule all:
    input:
        asked,


rule make:
    output:
        report("a.txt"),
    shell:
        "touch {output}"
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_report_is_told_from_a_run_when_the_jobs_are_built(tmp_path: Path) -> None:
    (tmp_path / "Snakefile").write_text(REPORTING_SNAKEFILE)
    run = snakemake(tmp_path, cores=1, configfile=None, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "REPORTING False" in run.stdout and "REPORTING True" not in run.stdout
    packed = snakemake(tmp_path, "--report", "r.zip", cores=None, configfile=None, timeout=280)
    assert packed.returncode == 0, packed.stderr[-3000:]
    assert "REPORTING True" in packed.stdout and (tmp_path / "r.zip").exists()


PARAMS_SNAKEFILE = """
import sys
from kora.run.workflow import snakemake_api

# an installed plugin may have loaded it already (the Slurm executor's does)
print("EARLY", sys.modules.get("pandas") is not None, flush=True)
if config.get("guard"):
    snakemake_api.keep_dataframes_out()
snakemake_api.quote_the_interpreter()  # as rules/common.smk: this Python's path may hold a space


rule make:
    output:
        "a.txt",
    params:
        n=1,
    script:
        "make.py"


onsuccess:
    print("PANDAS", sys.modules.get("pandas") is not None, flush=True)
"""

# what Snakemake's process does with a rule's params: a script job's preamble keeps them
# apart from DataFrames, and a finished job's record asks importlib whether pandas is there
PARAMS_CHECK = """
import importlib.util
import sys

from kora.run.workflow import snakemake_api

if sys.argv[1] == "1":
    snakemake_api.keep_dataframes_out()
from snakemake.iocontainers import Params, Snakemake

params = Params()
params.append({"plain": 1})
Snakemake.__new__(Snakemake)._safely_store_params(params)
print("PANDAS", sys.modules.get("pandas") is not None)
print("FOUND", importlib.util.find_spec("pandas") is not None)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("guard", [False, True])
def test_snakemakes_check_of_params_leaves_pandas_unloaded(tmp_path: Path, guard: bool) -> None:
    """Snakemake imports pandas in its own process to check a rule's params for DataFrames
    (70 MB held for the run); told pandas is not there, it does not. Without that, it
    does: the day Snakemake stops, this says so."""
    import subprocess
    import sys

    from tests.helpers import REPO

    pytest.importorskip("pandas")  # a dependency of statsmodels: always there
    (tmp_path / "check.py").write_text(PARAMS_CHECK)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "check.py"), str(int(guard))],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"PANDAS {not guard}" in done.stdout
    assert f"FOUND {not guard}" in done.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("guard", [False, True])
def test_a_workflow_runs_with_pandas_kept_out_of_snakemakes_process(
    tmp_path: Path, guard: bool
) -> None:
    """The whole run, a script rule's job included, works told pandas is not there, and
    Snakemake's process ends without it, unless an installed plugin had loaded it before
    the Snakefile was read (the Slurm executor's does: then nothing is saved, nor lost)."""
    import subprocess
    import sys

    pytest.importorskip("pandas")
    (tmp_path / "Snakefile").write_text(PARAMS_SNAKEFILE)
    (tmp_path / "make.py").write_text(
        "open(snakemake.output[0], 'w').write(str(snakemake.params.n))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"guard={int(guard)}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "a.txt").read_text() == "1"
    early = "EARLY True" in done.stdout
    assert f"PANDAS {early or not guard}" in done.stdout


class _File(str):
    """An input file as Snakemake's scheduler reads it: flags, and its size asked."""

    asked: ClassVar[list[str]] = []

    def __new__(cls, name: str, temp: bool = False) -> _File:
        made = super().__new__(cls, name)
        made.temp = temp  # type: ignore[attr-defined]
        return made

    def is_flagged(self, flag: str) -> bool:
        return flag == "temp" and bool(self.temp)  # type: ignore[attr-defined]

    async def exists(self) -> bool:
        _File.asked.append(str(self))
        return True

    async def size(self) -> int:
        return 1000


@pytest.mark.timeout(60)
def test_snakemakes_scheduler_reads_only_the_sizes_it_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snakemake's scheduler read the size of every input of every ready job after each
    job that ended (70 s of CPU in a whole grid); it now reads those of jobs with a temp()
    input only, the sizes its choice weighs, and the greedy scheduler ranks the others as
    it ranks files of unknown size."""
    import asyncio
    from types import SimpleNamespace

    from snakemake.scheduling.greedy import Scheduler as Greedy
    from snakemake.scheduling.job_scheduler import JobScheduler

    from kora.run.workflow import snakemake_api

    monkeypatch.setattr(JobScheduler, "update_input_sizes", JobScheduler.update_input_sizes)
    assert snakemake_api.read_only_sizes_that_count()
    assert (
        snakemake_api.read_only_sizes_that_count()
    )  # applied once, however often the Snakefile asks
    plain = SimpleNamespace(input=[_File(f"cell{i}.jsonl") for i in range(60)], priority=0)
    with_temp = SimpleNamespace(input=[_File("big.tmp", temp=True), _File("p.txt")], priority=0)
    scheduler = SimpleNamespace(_input_sizes={})
    _File.asked = []
    asyncio.run(JobScheduler.update_input_sizes(scheduler, [plain, with_temp]))
    assert sorted(_File.asked) == ["big.tmp", "p.txt"]
    sizes = scheduler._input_sizes
    assert sizes["big.tmp"] == 1000 and sizes["cell0.jsonl"] is None
    greedy = SimpleNamespace(settings=SimpleNamespace(omit_prioritize_by_temp_and_input=False))
    assert Greedy.job_reward(greedy, plain, sizes) == (0, 0, 0)
    assert Greedy.job_reward(greedy, with_temp, sizes) == (0, 1000, 2000)


TEMP_SNAKEFILE = """
from kora.run.workflow import snakemake_api

snakemake_api.read_only_sizes_that_count()

rule all:
    input: "done.txt", expand("plain{i}.txt", i=range(4))

rule scratch:
    output: temp("scratch.txt")
    shell: "echo scratch > {output}"

rule use_scratch:
    input: "scratch.txt"
    output: "done.txt"
    shell: "cat {input} > {output}"

rule plain:
    output: "plain{i}.txt"
    shell: "echo {wildcards.i} > {output}"
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scheduler", ["ilp", "greedy"])
def test_a_workflow_with_temp_files_runs_with_either_scheduler(
    tmp_path: Path, scheduler: str
) -> None:
    import subprocess
    import sys

    from tests.helpers import REPO

    (tmp_path / "Snakefile").write_text(TEMP_SNAKEFILE)
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--scheduler", scheduler],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "done.txt").read_text() == "scratch\n"
    assert not (tmp_path / "scratch.txt").exists()  # the temp() file went once used
    assert sorted(p.name for p in tmp_path.glob("plain*.txt")) == [
        f"plain{i}.txt" for i in range(4)
    ]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_error_at_the_load_or_the_start_is_koras_own_line(tmp_path: Path) -> None:
    """snakemake_api.stop (issue 58): a config error found as the Snakefile is read, or one the
    run's start finds (here another run holding the call store), was printed in
    Snakemake's format, `WorkflowError in file ".../rules/common.smk", line 27:` and a
    frame of common.smk under it. It is kora's own line now, and the status non-zero."""
    from kora.run.runlock import hold

    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    (tmp_path / "typo.yaml").write_text("grid:\n  risks: [sycophansy]\n")
    typo = snakemake(tmp_path, "--configfile", "tiny.yaml", "typo.yaml", configfile=None)
    running = hold(tmp_path / ".kora" / "cache", "the first run")  # as a run's onstart does
    try:
        busy = snakemake(tmp_path, "--nolock", env=dict(os.environ, KORA_NO_BROKER="1"))
    finally:
        running.release()
    for done, said in (
        (typo, "typo.yaml: grid.risks: unknown risk id 'sycophansy' (did you mean 'sycophancy'?)"),
        (busy, "another run is using the call store"),
    ):
        out = done.stdout + done.stderr
        assert done.returncode == 1, out[-3000:]
        assert f"kora: error: {said}" in out, out[-3000:]
        for theirs in ("WorkflowError", "common.smk", 'File "', "Traceback", ", line "):
            assert theirs not in out, out[-3000:]
    assert not (tmp_path / "data" / "seeds").exists()  # no job ran
