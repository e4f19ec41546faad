"""What the earlier implementation of Pynox published about its speed, for comparison.

Its README ("Speed, measured") gave end-to-end p50 times on a Linux ARM64 host with
CPython 3.11. That is another machine, so only each time's ratio to CPython's compares
with ours; the report shows those ratios side by side.
"""

from __future__ import annotations

SOURCE = "the earlier implementation's README, Linux ARM64, CPython 3.11"

# p50 in milliseconds, by workload key (bench/workloads) and runner key (runners.RUNNERS).
P50_MS: dict[str, dict[str, float]] = {
    "tiny": {"python": 7.45, "pynox": 10.06, "no_sandbox": 7.67, "pool": 4.47},
    "json_pipeline": {"python": 153.63, "pynox": 81.52, "no_sandbox": 78.46, "pool": 74.48},
}


def ratios(workload_key: str) -> dict[str, float] | None:
    """Each runner's published p50 over CPython's, or None for a workload it did not publish."""
    figures = P50_MS.get(workload_key)
    if figures is None:
        return None
    return {runner: p50 / figures["python"] for runner, p50 in figures.items()}
