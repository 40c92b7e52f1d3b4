"""How the browser tests and bench/report_browser.py find and start headless Chromium."""

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
