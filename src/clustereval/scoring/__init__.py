"""Scoring: check results + rubric (data) -> score (0–100), tier, and the results that moved it."""

from clustereval.scoring.score import (
    DEFAULT_RUBRIC,
    SCORE_FILE,
    explain,
    load_catalogue,
    load_rubric,
    read_run_info,
    rubric_problems,
    score_results,
    score_run,
    tier_for_score,
    unreachable_hosts,
    write_atomic,
)

__all__ = [
    "DEFAULT_RUBRIC",
    "SCORE_FILE",
    "explain",
    "load_catalogue",
    "load_rubric",
    "read_run_info",
    "rubric_problems",
    "score_results",
    "score_run",
    "tier_for_score",
    "unreachable_hosts",
    "write_atomic",
]
