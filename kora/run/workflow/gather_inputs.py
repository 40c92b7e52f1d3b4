"""What the rules that gather a target's shards declare: the results, report and
leaderboard rules' inputs and the params that come from the run (their jobs:
kora.run.jobs.gather).

Each is a function of the run's pipeline. The Snakefile and `kora replay`
(kora.run.rebuild) ask the same functions, so a replayed result is gathered from exactly
what a run's would be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kora.analysis.results import ResultsMeta
from kora.benchmarks.layout import CELL, risk_folder

if TYPE_CHECKING:
    from kora.run.workflow.pipeline import Pipeline


def risk_folders(p: Pipeline, shard_of: Callable[[str], str]) -> list[str]:
    """A stage's folder of each of the run's risks (cell order), from its pattern."""
    risks = dict.fromkeys(c.split("/")[0] for c in p.cells())
    folder = risk_folder(shard_of(CELL))
    return [folder.replace("{risk}", r) for r in risks]


def judgment_folders(p: Pipeline, target: str) -> list[str]:
    return risk_folders(p, lambda c: p.layout.judgments(target, c))


def result_stages(p: Pipeline, target: str) -> list[str]:
    """The stages whose work a target's result rests on (an import's are not run)."""
    stages = ["judgments"]
    if not p.target_imported(target):
        stages.insert(0, "conversations")
    made = not (p.target_imported(target) or p.target_continued(target))
    if made and not p.imported:
        stages[:0] = ["seeds", "scenarios"]
    return stages


def result_templates(p: Pipeline, target: str) -> list[str]:
    found = [t for stage in result_stages(p, target) for t in p.templates(stage)]
    return list(dict.fromkeys(found))


def results_inputs(p: Pipeline, target: str) -> dict[str, list[str]]:
    """Each stage's folders behind a target's results (one per risk), the taxonomy and the
    templates. Every stage's are inputs, so a folder a failed or killed job left missing
    is made again by the same command (Snakemake would keep a missing intermediate while
    the files after it exist); a shard missing from its folder renews its own job's retry
    token (kora.run.jobs.shards)."""
    shard_of: dict[str, Callable[[str], str]] = {
        "judgments": lambda c: p.layout.judgments(target, c),
        "conversations": lambda c: p.layout.conversations(target, c),
        "scenarios": p.layout.scenarios,
        "seeds": p.layout.seeds,
    }
    # an imported or continued target's conversations are its own files (no scenarios
    # behind them); imported scenarios have no seeds
    given = p.target_imported(target) or p.target_continued(target)
    left_out = {"scenarios", "seeds"} if given else {"seeds"} if p.imported else set()
    out = {stage: risk_folders(p, of) for stage, of in shard_of.items() if stage not in left_out}
    out["taxonomy"] = p.taxonomy_files()
    # what the manifest hashes as it is on disk: an edited template re-writes it
    out["templates"] = result_templates(p, target)
    return out


def results_meta(p: Pipeline, target: str) -> dict[str, Any]:
    meta = ResultsMeta.of(p.config, target).model_dump(mode="json")
    if not meta["continued"]:
        del meta["continued"]  # the params of every other target's results stay as they were
    return meta


def agreement_files(p: Pipeline, target: str) -> list[str]:
    path = p.layout.agreement_json(target)
    return [path] if (p.workdir / path).exists() else []


def annotation_files(p: Pipeline, target: str) -> list[str]:
    """People's label files and the uniform sample (kora annotate), once there are any:
    none for a run nobody graded, whose report is then as it was."""
    folder = p.layout.annotations(target)
    found = sorted((p.workdir / folder).glob("*.jsonl"))
    if not found:
        return []
    sample = p.workdir / folder / "sample.json"
    found += [sample] if sample.exists() else []
    return [f"{folder}/{f.name}" for f in found]


def report_inputs(p: Pipeline, target: str) -> dict[str, Any]:
    return {
        # the target's judgments folders, one per risk
        "judgments": judgment_folders(p, target),
        "results": p.layout.results_json(target),
        # what the target's calls cost a test, beside its rates
        "usage": p.layout.usage_json(target),
        # linked from the report and summary.json
        "manifest": p.layout.manifest_json(target),
        "taxonomy": p.taxonomy_files(),
        # `kora agreement`'s figures, once people have graded (kora annotate)
        "agreement": agreement_files(p, target),
        # people's grades (kora annotate): they correct the report's rates
        "annotations": annotation_files(p, target),
    }


def leaderboard_judgments(p: Pipeline) -> dict[str, list[str]]:
    """Each target's judgments folders, for the paired comparisons."""
    return {t: judgment_folders(p, t) for t in p.config.targets}


def leaderboard_annotations(p: Pipeline) -> dict[str, list[str]]:
    """The targets people graded: their label files, for the corrected ranking."""
    found = {t: annotation_files(p, t) for t in p.config.targets}
    return {t: files for t, files in found.items() if files}
