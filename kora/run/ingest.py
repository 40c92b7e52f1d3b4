"""`kora import-scenarios`: pre-built scenarios (reference JSONL shape) into the data shards.

Every line is checked before anything is written; the new scenario set is built in a
staging folder and swapped in with renames, so a failed import leaves the data as it was.
After an import the workflow tests targets on these scenarios and generates nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from kora.benchmarks.detect import parsed
from kora.benchmarks.layout import IMPORTED_MANIFEST, Layout, rejected_of
from kora.benchmarks.outcomes import Conversation
from kora.benchmarks.schemas import PROMPT_VARIANTS, Scenario
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.errors import InputError
from kora.io import iter_jsonl, write_json
from kora.run.jobs.shards import write_records, write_status


@contextmanager
def _swapped_in(data: Path) -> Iterator[Path]:
    """A staging folder beside `data` for the new set, which then replaces `data` with two
    renames: a reader sees the old set or the new one, and a failure leaves the old one."""
    staging = data.with_name(f".{data.name}.import-{int(time.time() * 1000)}")
    old = data.with_name(f".{data.name}.old-{int(time.time() * 1000)}")
    try:
        yield staging
        if data.exists():
            data.rename(old)
        staging.rename(data)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def shard_of(scenario: Scenario, taxonomy: Taxonomy, where: str) -> Shard:
    """The grid cell a scenario belongs to, after checking its ids against the taxonomy
    (a record that fits no cell would be counted as imported and then never written)."""
    if scenario.riskId not in taxonomy.risks:
        raise InputError(f"{where}: unknown risk id {scenario.riskId!r}")
    if taxonomy.category_of(scenario.riskId).id != scenario.riskCategoryId:
        raise InputError(
            f"{where}: risk {scenario.riskId!r} is not in category {scenario.riskCategoryId!r}"
        )
    seed = scenario.seed
    for name in ("id", "riskCategoryId", "riskId", "ageRange"):
        if getattr(seed, name) != getattr(scenario, name):
            raise InputError(
                f"{where}: field scenario.{name} is {getattr(scenario, name)!r} but "
                f"seed.{name} is {getattr(seed, name)!r}"
            )
    name = seed.motivation.name
    if name not in taxonomy.motivations_by_name:
        raise InputError(f"{where}: unknown motivation {name!r}")
    return Shard(
        scenario.riskCategoryId,
        scenario.riskId,
        scenario.ageRange,
        taxonomy.motivations_by_name[name].id,
    )


def parse_scenarios(path: Path, taxonomy: Taxonomy) -> dict[Shard, list[Scenario]]:
    from pydantic import ValidationError

    from kora.io import describe

    by_shard: dict[Shard, list[Scenario]] = defaultdict(list)
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        try:
            scenario = Scenario.model_validate(obj)
        except ValidationError as exc:
            raise InputError(f"{path}:{lineno}: {describe(exc)}") from None
        where = f"{path}:{lineno}"
        shard = shard_of(scenario, taxonomy, where)
        if scenario.id in seen:
            raise InputError(
                f"{where}: scenario id {scenario.id} already on line {seen[scenario.id]}"
            )
        seen[scenario.id] = lineno
        if not scenario.firstUserMessage.strip():
            raise InputError(f"{where}: field firstUserMessage: empty")
        by_shard[shard].append(scenario)
    if not seen:
        raise InputError(f"{path}: no scenarios")
    return by_shard


def import_scenarios(
    path: Path,
    taxonomy: Taxonomy,
    layout: Layout,
    *,
    replace: bool = False,
) -> dict[str, int]:
    """The scenarios in `path` as the scenarios stage's shards, in the current folder."""
    by_shard = parse_scenarios(path, taxonomy)
    data = Path(layout.data, "scenarios")
    manifest = layout.import_manifest
    if data.exists() and any(data.iterdir()) and not manifest.exists() and not replace:
        raise InputError(
            f"{data} holds generated scenarios; importing would replace them. "
            "Pass --replace to do so."
        )
    with _swapped_in(data) as staging:
        for shard in taxonomy.shards():
            out = Path(layout.scenarios(shard.path))
            target = staging / out.relative_to(data)
            items = by_shard.get(shard, [])
            rejected = staging / Path(rejected_of(out)).relative_to(data)
            files = {
                target.name: write_records(target, [s.shard_record() for s in items]),
                rejected.name: write_records(rejected, []),
            }
            write_status(
                target,
                imported_status("scenarios", shard.path, len(items)),
                files,
            )
        counts = {"scenarios": sum(len(v) for v in by_shard.values()), "shards": len(by_shard)}
        _write_manifest(staging / IMPORTED_MANIFEST, path, counts)
    return counts


def remove_imported_scenarios(layout: Layout) -> int:
    """Switch back to generated scenarios: remove the imported set (the next run makes the
    generated one again from the seeds; its calls come from the store). Returns how many
    scenarios were removed."""
    data = Path(layout.data, "scenarios")
    manifest = layout.import_manifest
    try:
        count = int(orjson.loads(manifest.read_bytes()).get("scenarios", 0))
    except FileNotFoundError:
        raise InputError(f"{data}: no imported scenarios to remove") from None
    except orjson.JSONDecodeError:
        count = 0
    old = data.with_name(f".{data.name}.removed-{int(time.time() * 1000)}")
    data.rename(old)  # one rename: a reader sees the imported set or none
    shutil.rmtree(old, ignore_errors=True)
    return count


def parse_conversations(
    path: Path,
    taxonomy: Taxonomy,
    target: str | None,
    *,
    whole_turns: bool = False,
    keep: Callable[[str, Scenario], bool] | None = None,
) -> dict[str, dict[Shard, list[Conversation]]]:
    """Recorded conversations by target and shard; every line checked, numbered errors.

    `whole_turns`: each must end with the target's reply (to be carried on); `keep(model
    id, scenario)`: which records to take (the others are skipped unchecked)."""
    out: dict[str, dict[Shard, list[Conversation]]] = defaultdict(lambda: defaultdict(list))
    seen: dict[tuple[str, str], str] = {}
    for where, obj in _recorded(path):
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object")
        recorded_as = obj.get("target") or obj.get("modelId")
        if keep is not None and not keep(str(recorded_as), _scenario(where, obj)):
            continue
        record = _conversation(where, obj, target or recorded_as, whole_turns)
        shard = shard_of(record.scenario, taxonomy, where)
        if (record.target, record.key) in seen:
            raise InputError(
                f"{where}: test {record.key} already at {seen[(record.target, record.key)]}"
            )
        seen[(record.target, record.key)] = where
        out[record.target][shard].append(record)
    if not seen:
        raise InputError(
            f"{path}: no conversations" + (" match the filters" if keep is not None else "")
        )
    return out


def _scenario(where: str, obj: dict[str, Any]) -> Scenario:
    from pydantic import ValidationError

    from kora.io import describe

    try:
        return Scenario.model_validate(obj.get("scenario"))
    except ValidationError as exc:
        raise InputError(f"{where}: {describe(exc)}") from None


def _conversation(where: str, obj: dict[str, Any], name: Any, whole_turns: bool) -> Conversation:
    """One recorded line as a conversation of target `name`, each field checked."""
    from pydantic import ValidationError

    from kora.benchmarks.testkeys import TestKey
    from kora.config.schema import NAME_RE
    from kora.io import describe

    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InputError(
            f"{where}: field modelId: {name!r} is not a usable target name "
            "(letters, digits, . _ -); pass --target NAME"
        )
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or prompt not in PROMPT_VARIANTS:
        raise InputError(
            f"{where}: field prompt: {prompt!r} is not one of {', '.join(PROMPT_VARIANTS)}"
        )
    scenario = _scenario(where, obj)
    try:
        record = Conversation(
            key=str(TestKey.of(scenario, prompt)),
            target=name,
            prompt=prompt,
            scenario=scenario,
            messages=obj.get("messages"),
        )
    except ValidationError as exc:
        raise InputError(f"{where}: {describe(exc)}") from None
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    if not record.messages or record.messages[0].role != "user":
        raise InputError(f"{where}: field messages: must start with the child's message")
    if whole_turns:
        from kora.benchmarks.converse import check_pairs

        try:
            check_pairs(record.messages)
        except ValueError as exc:
            raise InputError(f"{where}: field messages: {exc}") from None
    return record


def _recorded(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, record) of a JSONL file, or of the per-test results of a folder, a .zip or
    a .json file (the reference run's files, as `kora aggregate` reads them: their
    grades are left behind, only the conversations are taken)."""
    if path.is_file() and path.suffix == ".jsonl":
        for lineno, obj in iter_jsonl(path):
            yield f"{path}:{lineno}", obj
        return
    import tempfile

    from kora.analysis.records import input_files, zip_named

    with tempfile.TemporaryDirectory(prefix="kora-import-") as tmp, zip_named(path, tmp):
        for f in input_files(path, Path(tmp)):
            # a file of a .zip is named by the .zip and its name in it
            shown = f"{path}:{f.relative_to(tmp)}" if f.is_relative_to(tmp) else str(f)
            yield from parsed(shown, f.read_bytes())


def _fingerprint(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def _write_manifest(manifest: Path, source: Path, counts: dict[str, int]) -> None:
    """What an import filed: where from, the source's fingerprint, how many, when."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(
        manifest,
        {"source": str(source), "sha256": _fingerprint(source), **counts, "importedAt": when},
    )


def import_conversations(
    path: Path,
    taxonomy: Taxonomy,
    layout: Layout,
    *,
    target: str | None = None,
    force: bool = False,
) -> dict[str, int]:
    """Recorded conversations into <results>/<target>/conversations/, for judging only;
    the conversations a run made there are replaced only if `force`."""
    by_target = parse_conversations(path, taxonomy, target)
    made = [
        folder
        for folder in (f"{layout.results}/{name}/conversations" for name in by_target)
        if any(Path(folder).glob("*")) and not Path(folder, IMPORTED_MANIFEST).exists()
    ]
    if made and not force:
        raise InputError(
            f"{', '.join(made)} holds conversations a run made (paid for), not imported ones: "
            "not replaced, and nothing was written. Name another --target, or give --force "
            "to replace them"
        )
    return write_recorded(path, by_target, taxonomy, layout)


def write_recorded(
    path: Path,
    by_target: dict[str, dict[Shard, list[Conversation]]],
    taxonomy: Taxonomy,
    layout: Layout,
    folder: str = "conversations",
    manifest: str = IMPORTED_MANIFEST,
) -> dict[str, int]:
    """Each target's recordings into results/<target>/<folder>/, one shard per grid cell
    (empty ones included), swapped in whole; how many each target got."""
    counts = {}
    for name, shards in by_target.items():
        data = Path(layout.results, name, folder)
        with _swapped_in(data) as staging:
            for shard in taxonomy.shards():
                rel = Path(f"{shard.path}.jsonl")
                items = shards.get(shard, [])
                write_status(
                    staging / rel,
                    imported_status(folder, f"{name}/{shard.path}", len(items)),
                    {rel.name: write_records(staging / rel, items)},
                )
            n = sum(len(v) for v in shards.values())
            _write_manifest(staging / manifest, path, {"conversations": n})
        counts[name] = n
    return counts


def imported_status(stage: str, shard: str, items: int) -> dict[str, Any]:
    """The status of a shard filed from elsewhere: every item done, no call made here."""
    return {
        "stage": stage,
        "shard": shard,
        "imported": True,
        "items": items,
        "done": items,
        "failed": 0,
        "errors": [],
        "usage": [],
    }
