"""`kora annotate`: a grading page on 127.0.0.1 (aiohttp), one answer saved per click.

The page shows each sampled conversation with what its judge saw (risk, age range, the
scenario's outline, the transcript) and nothing of the judges' grades; the person grades
safety and each behaviour criterion, or in a KORA v2 run each mechanism (grade, occurrence
count, "not triggered" where the mechanism has a precondition, a note) with the rubric
beside it, by keyboard or mouse. Every answer is a POST that appends to the annotator's
label file before it is acknowledged (kora.analysis.annotate.labels), marked with the
queue the page serves (and, for the uniform sample, the sample's id); the page counts as
done only the grades of its own queue's kind, so a conversation of the uniform sample
graded earlier in a review queue is shown again for the estimate.

Only the page itself is answered (`own_address`): a request whose Host is not the address
the server listens on (a DNS-rebinding name for 127.0.0.1) is refused with 421, one whose
Origin is another site's with 403, and an answer that is not a JSON object sent as
application/json (a form's or a no-cors fetch's text/plain needs no preflight) with 415
or 400, before anything is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import jinja2
import orjson
from aiohttp import web
from markupsafe import Markup

from kora.analysis.annotate import labels
from kora.analysis.annotate.queues import TITLES
from kora.analysis.pagekit import CRITERION_HELP, json_script
from kora.analysis.records import TestRecord, benchmark_of, criteria_of, criterion_label
from kora.benchmarks.taxonomy import Taxonomy
from kora.errors import InputError

HERE = Path(__file__).parent
SCENARIO_FIELDS = ("shortTitle", "childMaturity", "childBackground", "narrative")


def item(r: TestRecord, taxonomy: Taxonomy | None) -> dict[str, object]:
    """What the person sees of one test: no grade of any judge."""
    sc = r.raw.get("scenario") or {}
    risk = taxonomy.risk(r.category, r.risk).name if taxonomy else r.risk
    return {
        "key": r.key,
        "risk": risk,
        "age": r.age,
        "prompt": r.prompt,
        "scenario": {f: sc.get(f) for f in SCENARIO_FIELDS if sc.get(f)},
        "messages": [
            {"role": m.get("role"), "content": m.get("content")} for m in r.raw.get("messages", [])
        ],
    }


def criteria_spec(records: list[TestRecord]) -> list[dict[str, object]]:
    """What the page shows of each criterion of the records' version: its name, the
    rubric in short, and whether it can be `not triggered` (a v2 mechanism with a
    precondition)."""
    conditional = benchmark_of(records).conditional
    return [
        {
            "id": c,
            "label": criterion_label(c),
            "help": CRITERION_HELP.get(c, ""),
            "conditional": c in conditional,
        }
        for c in criteria_of(records)
    ]


def page(
    items: list[dict[str, object]],
    done: Mapping[str, object],
    annotator: str,
    target: str,
    criteria: list[dict[str, object]],
    queue: str = labels.ESTIMATE,
) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("annotate.html.jinja").render(
        target=target,
        annotator=annotator,
        queue=queue,
        queue_title=TITLES.get(queue, queue),
        data=json_script({"items": items, "labels": done, "criteria": criteria}),
        script=Markup((HERE / "templates" / "annotate.js").read_text()),
    )


LOOPBACK = ("127.0.0.1", "localhost")


def own_hosts(request: web.Request) -> set[str]:
    """The Host values of the page itself: the address and port the request came in on
    (and `localhost` for the loopback address, which no other site's page can name)."""
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    if not sock:
        return set()
    address, port = str(sock[0]), sock[1]
    names = LOOPBACK if address in LOOPBACK else (address,)
    return {f"{n}:{port}" for n in names}


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def own_address(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse what does not come from the page itself, before any handler runs."""
    host = request.headers.get("Host", "").lower()
    mine = own_hosts(request)
    if host not in mine:
        address = min(mine) if mine else "127.0.0.1"
        return web.Response(
            status=421,
            text=f"kora annotate answers only at http://{address}/, not at {host or 'no host'}",
        )
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() != f"http://{host}":
        return web.Response(status=403, text=f"a page of {origin} may not use kora annotate")
    return await handler(request)


def build_app(
    records: list[TestRecord],
    keys: list[str],
    label_path: Path,
    annotator: str,
    target: str,
    taxonomy: Taxonomy | None = None,
    queue: str = labels.ESTIMATE,
    sample: str | None = None,
) -> web.Application:
    """The grading page over `keys` in order. `queue`: which queue they are (every saved
    line says so); `sample`: the uniform sample's id, for the estimate queue."""
    if queue == labels.ESTIMATE and sample is None:
        raise ValueError("the estimate queue needs the sample's id")
    mark: dict[str, str | None] = {"queue": queue}
    if queue == labels.ESTIMATE:
        mark["sample"] = sample
    done_of = sample if queue == labels.ESTIMATE else None  # review: any grade is done
    by_key = {r.key: r for r in records}
    items = [item(by_key[k], taxonomy) for k in keys if k in by_key]
    sampled = {i["key"] for i in items}
    criteria = criteria_spec(records)
    known = {c["id"] for c in criteria}

    async def index(request: web.Request) -> web.Response:
        html = page(items, labels.read(label_path, done_of), annotator, target, criteria, queue)
        return web.Response(text=html, content_type="text/html")

    async def save(request: web.Request) -> web.Response:
        if request.content_type.lower() != "application/json":
            return web.json_response({"error": "an answer is sent as application/json"}, status=415)
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            return web.json_response({"error": f"not JSON: {exc}"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "an answer is a JSON object"}, status=400)
        try:
            answer = labels.check(body)
        except InputError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if answer["key"] not in sampled:
            return web.json_response({"error": "not a test of this sample"}, status=400)
        if answer["criterion"] not in known:
            return web.json_response({"error": "not a criterion of this run"}, status=400)
        labels.append(label_path, {**answer, **mark})
        return web.json_response({"ok": True})

    async def current(request: web.Request) -> web.Response:
        return web.json_response(labels.read(label_path, done_of))

    app = web.Application(middlewares=[own_address])
    app.router.add_get("/", index)
    app.router.add_post("/api/label", save)
    app.router.add_get("/api/labels", current)
    return app
