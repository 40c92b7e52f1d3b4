"""How the browser tests and bench/report_browser.py find and start headless Chromium."""

import os
import shutil

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# no network, no first-run work: the browser only ever opens local files
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> tuple[str | None, str]:
    """Chromium's path ($KORA_CHROMIUM if set, else the first of CANDIDATES on PATH), or
    None; and where it was looked for, for the message when it is not found."""
    explicit = os.environ.get("KORA_CHROMIUM")
    if explicit:
        return shutil.which(explicit), "KORA_CHROMIUM=" + explicit
    return next((p for p in map(shutil.which, CANDIDATES) if p), None), "not on PATH"
