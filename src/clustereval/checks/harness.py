"""Harness checks: could the evaluation reach the node at all."""

from __future__ import annotations

from clustereval.checks import Context, Verdict, check


@check("harness.node.reachable")
def node_reachable(ctx: Context) -> Verdict:
    """Pass when the node answered the collection round trip; the callback records the failures."""
    error = ctx.options.get("unreachable")
    if error:
        return Verdict("fail", f"{ctx.subject} is unreachable: {error}", None,
                       evidence={"error": str(error)[:500]})
    seconds = ctx.options.get("collect_duration_s")
    return Verdict("pass", f"{ctx.subject} answered over SSH", seconds, "s",
                   evidence={"collect_duration_s": seconds})
