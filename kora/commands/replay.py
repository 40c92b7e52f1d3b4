"""`kora replay FILE`: rebuild a bundled result (`kora bundle`) with no key and no network,
and say whether it is the result published: "identical", or each file and answer that
differs (kora.run.rebuild)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

# lines of each kind printed before the rest are counted
SHOWN = 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "replay",
        help="rebuild a bundled result offline and check it is the one published",
        description="Rebuild results.json, summary.json and the report of a bundle from "
        "its stored answers alone (no key, no network; every call is answered from the "
        "bundle), and compare them, and every rebuilt shard, with the bundle's. Exit 0 "
        "only if all are identical and every answer is the one the manifest's digest "
        "names; otherwise each file and answer that differs is named.",
    )
    r.add_argument("bundle", help="a file written by `kora bundle`")
    r.add_argument(
        "--keep",
        metavar="DIR",
        help="rebuild in DIR (new or empty) and keep it; default: a temporary folder",
    )
    r.add_argument(
        "--manifest",
        metavar="FILE",
        help="the manifest.json published with the result: the bundle's must be it, byte "
        "for byte (a bundle rebuilt whole around changed answers carries another)",
    )
    r.set_defaults(func=run)


def _some(lines: list[str]) -> list[str]:
    more = len(lines) - SHOWN
    return lines[:SHOWN] + ([f"  ... and {more} more"] if more > 0 else [])


def say(line: str) -> None:
    print(line, file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from kora.errors import KoraError
    from kora.run.rebuild import replay

    path = Path(args.bundle)
    path.open("rb").close()  # one not there, or a folder, said in kora's words (main)
    if args.keep:
        work = Path(args.keep).resolve()
        if work.exists() and any(work.iterdir()):
            raise KoraError(f"--keep {args.keep}: not empty; name a new or empty folder")
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="kora-replay-"))
    try:
        published = Path(args.manifest).resolve() if args.manifest else None
        found = replay(path.resolve(), work, published)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    say(
        f"replayed {path}: {found.rebuilt_shards} shards rebuilt from the bundle's answers, "
        f"then results.json, summary.json and the report, in {found.seconds:.1f} s"
    )
    if found.given:
        say(
            f"taken as given, not rebuilt: {len(found.given)} files (imports, recordings, "
            "people's grades, a chat service's conversations)"
        )
    lines = [f"  changed in the bundle: {m}" for m in found.changed_members]
    for key in found.changed_answers:
        model, stage = found.answer_of.get(key, ("?", "?"))
        lines.append(f"  answer {key} ({model}, {stage}): not the one the result rests on")
    if not found.answers_digest_ok:
        lines.append("  answers.index: its digest is not the manifest's")
    for key, model in sorted(found.missing_answers.items()):
        lines.append(f"  answer {key} ({model}): asked by the rebuild, not in the bundle")
    lines += [f"  job failed: {j}" for j in found.failed_jobs]
    lines += [f"  differs: {f}" for f in found.differing]
    for note in found.notes:
        say(f"note: {note}")
    if found.identical:
        say(
            f"identical: {', '.join(found.checked)} and every rebuilt shard are byte for byte "
            "the bundle's, and every answer is the one the manifest names"
        )
        return 0
    say("NOT identical:")
    for line in _some(lines):
        say(line)
    return 1
