"""The per-target report (report.html, summary.json) and the leaderboard across targets.

report.html is one self-contained file (inline CSS, SVG and a little vanilla JS; no
network). Modules:

- `summary`: summary.json, every figure with n and its 95 % Wilson interval;
- `browser`: the conversation browser's data, embedded in the page as JSON;
- `replies`: empty and cut-short target replies, counted and flagged;
- `leaderboard`: leaderboard.json, targets ranked and compared pair by pair;
- `pairs`: each pair's cells (kora.analysis.stats.cells), its grid, the conversations
  where the two disagree (shown side by side) and each target's rank interval;
- `pages`: the HTML pages, rendered from `templates/` with autoescaping;
- `names`: display names and order (taxonomy order, age range, prompt).

The Snakemake rules `report` and `leaderboard` call these through kora.run.jobs.gather.
"""
