"""Secrets out of everything a run writes or prints, and terminal control out of what it
prints.

`Masker(secrets)` finds a secret in every form a server may send it back in, and
replaces it with `****`:

- as it is;
- JSON-escaped, wholly or in part: `\\/` for `/`, `\\uXXXX` (either case, surrogate pairs
  for characters beyond the BMP), `\\"`, `\\\\` and the one-letter escapes;
- percent-encoded, wholly or in part (each UTF-8 byte as `%XX`, either case; `+` for a
  space);
- inside base64: a run of base64 characters whose decoding holds the secret, such as the
  `Basic` credentials `base64(user:password)` of a password.

A value shorter than `MIN_SECRET` characters is not treated as a secret: an empty or
one-letter variable would otherwise mask every character, or every letter `a`, of the
text. Masking comes before any cutting of a text, so a secret on the cut cannot survive
in part.

`terminal_safe(text)` takes out what a terminal would act on rather than show: ANSI
escape sequences (CSI, OSC, DCS and the rest, also in their 8-bit forms), every other C0
and C1 control character but newline and tab, and the bidirectional-format characters
that reorder a line.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata
from collections.abc import Iterable

MASK = "****"
MIN_SECRET = 4

_JSON_SHORT = {"\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", '"': '"', "\\": "\\"}


def _hex(value: int, width: int) -> str:
    """A pattern for `value` in `width` hex digits, either case."""
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{width}x}")


def _char(c: str) -> str:
    """A pattern for one character of a secret in any of its encoded forms."""
    forms = [re.escape(c)]
    code = ord(c)
    if code > 0xFFFF:
        hi, lo = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(rf"\\u{_hex(hi, 4)}\\u{_hex(lo, 4)}")
    else:
        forms.append(rf"\\u{_hex(code, 4)}")
    if c in _JSON_SHORT:
        forms.append(re.escape("\\" + _JSON_SHORT[c]))
    if c == "/":
        forms.append(r"\\/")
    forms.append("".join(f"%{_hex(b, 2)}" for b in c.encode("utf-8", "surrogatepass")))
    if c == " ":
        forms.append(r"\+")
    return "(?:" + "|".join(forms) + ")"


def _decoded(run: str) -> bytes:
    """A base64 run decoded (leniently: either alphabet, padding optional); b"" if not."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:  # one character too many for whole bytes
        body = body[:-1]
    padded = body + "=" * (-len(body) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return b""


class Masker:
    """Masks a set of secrets in any text."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len)[::-1]
        self._pattern = (
            re.compile("|".join("".join(_char(c) for c in s) for s in self.secrets))
            if self.secrets
            else None
        )
        self._raw = [s.encode("utf-8", "surrogatepass") for s in self.secrets]
        # a base64 run that carries a secret of n bytes is at least 4n/3 characters long:
        # shorter runs (most words of an answer) are not decoded
        shortest = min((len(r) for r in self._raw), default=MIN_SECRET)
        self._runs = re.compile(rf"[A-Za-z0-9+/_-]{{{max(8, (4 * shortest + 2) // 3)},}}={{0,2}}")

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def masked(self, text: str) -> tuple[str, bool]:
        """`text` with every secret masked, and whether any was."""
        if self._pattern is None:
            return text, False
        out = self._pattern.sub(MASK, text)
        out = self._runs.sub(self._base64, out)
        return out, out != text

    def mask(self, text: str) -> str:
        return self.masked(text)[0]

    def _base64(self, m: re.Match[str]) -> str:
        run = m.group(0)
        data = _decoded(run)
        return MASK if data and any(s in data for s in self._raw) else run


def mask(text: str, *secrets: str | None) -> str:
    """`text` with each of `secrets` masked in every form."""
    return Masker(secrets).mask(text)


@functools.lru_cache(maxsize=64)
def masker_for(secrets: frozenset[str]) -> Masker:
    """The Masker of a set of secrets, built once: every answer of a run is masked, and
    building the patterns costs more than using them."""
    return Masker(secrets)


def cut(text: str, limit: int) -> str:
    """At most `limit` characters of an already masked text, marked when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


_SEQUENCES = re.compile(
    r"""
      \x1b\[ [0-?]* [ -/]* [@-~]?                  # CSI: ESC [ parameters final
    | \x9b [0-?]* [ -/]* [@-~]?                    # 8-bit CSI
    | \x1b[\]PX^_] .*? (?:\x07|\x1b\\|\x9c|$)      # OSC, DCS, SOS, PM, APC up to BEL or ST
    | [\x90\x98\x9d\x9e\x9f] .*? (?:\x07|\x1b\\|\x9c|$)  # their 8-bit forms
    | \x1b [ -/]* [0-~]?                            # any other escape sequence
    """,
    re.X | re.S,
)
# C0 but tab and newline, DEL, C1, and the bidirectional-format characters
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with nothing a terminal would act on: no escape sequence, no control
    character but newline and tab, no bidirectional override."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


def redact(text: str, secret: str | None) -> str:
    """`text` (from a server, for a user's terminal and logs) with `secret` masked in
    every form it may come back in (kora.llm.masking), and control and
    bidirectional-format characters shown as escapes, so that no server can move the
    cursor, clear the screen or reorder the line. Cut the result, never the text: a
    secret on the cut would survive in part."""
    text = mask(text, secret)
    return "".join(
        c if c.isprintable() and unicodedata.category(c) != "Cf" else f"\\u{ord(c):04x}"
        for c in text
    )


def secrets_of(provider: object) -> set[str]:
    """A provider's secrets (its key, once read), for masking its answers."""
    found = getattr(provider, "secrets", None)
    return set(found()) if callable(found) else set()
