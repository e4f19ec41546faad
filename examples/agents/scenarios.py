"""The use cases of examples/use_cases/, as scenarios a scripted model plays in a framework.

A scenario is what the user asks, the `run_python` tool the application built for it, the
calls a model makes (the same code as the use case), the model's final answer, and what
the application finds afterwards. `Script` is the model's side, shared by every framework:
one call per turn, printing each result the framework handed back, so the transcript
shows exactly what the model read.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# The use cases own the setup (project, backend, service); these examples reuse it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "use_cases"))

import api_agent  # noqa: E402
import data_analyst  # noqa: E402
import support_agent  # noqa: E402
from transcript import show_reply, show_request  # noqa: E402

import pynox  # noqa: E402


@dataclass
class Scenario:
    title: str
    request: str
    run_python: Callable[[str], str]
    calls: list[tuple[str, str]]
    answer: str
    # What the application finds once the agent is done, given the replies the model read.
    outcome: Callable[[list[str]], str]


@contextmanager
def analyst() -> Iterator[Scenario]:
    with data_analyst.analyst_project() as (project, run_python):
        yield Scenario(
            title="data analyst with notebook-style state",
            request="Total the March revenue by region and write a report to out/.",
            run_python=run_python,
            calls=data_analyst.MODEL_CALLS,
            answer="West leads with 2360.50; the report is in out/report.md. "
            "The sandbox did not let me read .env, so I used no database settings.",
            outcome=lambda replies: (
                "out/report.md:\n" + (project / "out" / "report.md").read_text()
            ),
        )


@contextmanager
def support() -> Iterator[Scenario]:
    with support_agent.support_desk() as (backend, run_python):
        yield Scenario(
            title="support agent calling the backend",
            request="Ada's lamp (order 1042) arrived broken and Grace wants her desk "
            "(order 1043) refunded.",
            run_python=run_python,
            calls=support_agent.model_calls(backend.database),
            answer="I refunded 19.50 to Ada. Grace's refund of 420.00 needs a person's "
            "approval; a colleague will follow up.",
            outcome=lambda replies: f"refunds in the database: {backend.refunds()}",
        )


@contextmanager
def api() -> Iterator[Scenario]:
    with api_agent.api_desk() as (base_url, run_python):
        yield Scenario(
            title="API agent with a key",
            request="Where are parcels PX-1001 and PX-1002?",
            run_python=run_python,
            calls=api_agent.model_calls(base_url),
            answer="PX-1001 is out for delivery in Lyon; PX-1002 is held at customs in Basel.",
            outcome=lambda replies: (
                "the API key appeared in a tool result: "
                + ("YES" if any(api_agent.DEMO_KEY in reply for reply in replies) else "no")
            ),
        )


def matplotlib_dir() -> str | None:
    """The package directory matplotlib is installed in, beside this interpreter."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:
        return None
    return os.path.dirname(os.path.dirname(spec.origin))


# The chart analyst's calls: a total read back as the value of the last expression, then
# a chart that comes back as an image.
CHART_CALLS = [
    (
        "total the revenue by region; the last expression is the answer",
        """\
import csv
with open(SALES, newline="") as file:
    rows = list(csv.DictReader(file))
revenue = {}
for row in rows:
    amount = int(row["units"]) * float(row["unit_price"])
    revenue[row["region"]] = revenue.get(row["region"], 0.0) + amount
dict(sorted(revenue.items()))
""",
    ),
    (
        "draw the totals as a bar chart and look at it",
        """\
import matplotlib.pyplot as plt
plt.bar(list(revenue), list(revenue.values()))
plt.title("Revenue by region, March 2024")
plt.show()
""",
    ),
]


@contextmanager
def charts() -> Iterator[Scenario]:
    packages = matplotlib_dir()
    assert packages is not None, "play_all runs this scenario only with matplotlib"
    sales = str(data_analyst.DATA / "sales.csv")
    run_python = pynox.tool(
        session=True, allow_read=[str(data_analyst.DATA)], package_dirs=[packages], timeout="60s"
    )
    (intent, first), *rest = CHART_CALLS
    calls = [(intent, f"SALES = {sales!r}\n" + first), *rest]
    yield Scenario(
        title="chart analyst: values and images",
        request="Chart the March revenue by region.",
        run_python=run_python,
        calls=calls,
        answer="West leads with 2360.50; the chart shows the three regions.",
        outcome=lambda replies: (
            "images the model was told of: " + str(sum(reply.count("[image ") for reply in replies))
        ),
    )


SCENARIOS = [analyst, support, api, charts]


@dataclass
class Script:
    """The scripted model: the scenario's calls, one per turn, then its answer."""

    scenario: Scenario
    replies: list[str] = field(default_factory=list)
    turns: int = 0

    def sees_tools(self, descriptions: dict[str, str]) -> None:
        """Prints, once, the tools the framework offers and how each description starts."""
        if self.turns == 0:
            for name, description in descriptions.items():
                lines = description.strip().splitlines()
                print(f"tool offered to the model: {name}: {lines[0]} [{len(lines)} lines]")
            print()

    def sees_images(self, images: list[tuple[str, int]]) -> None:
        """Prints the images that reached the model as content, besides the text."""
        for mime, size in images:
            print(f"  the model sees an image: {mime}, {size} bytes")
        if images:
            print()

    def next_call(self, reply: str | None) -> str | None:
        """Reads the previous call's result; returns the next call's code, None when done."""
        if reply is not None:
            self.replies.append(reply)
            show_reply(reply)
        if self.turns == len(self.scenario.calls):
            return None
        intent, code = self.scenario.calls[self.turns]
        self.turns += 1
        show_request(intent, code)
        return code


def play_all(play: Callable[[Scenario, Script], str], framework: str) -> None:
    """Runs every scenario through `play` (one framework's agent) and prints the outcome."""
    for open_scenario in SCENARIOS:
        if open_scenario is charts and matplotlib_dir() is None:
            print(f"=== {framework}: no chart analyst: matplotlib is not installed here")
            print()
            continue
        with open_scenario() as scenario:
            print(f"=== {framework}: {scenario.title}")
            print(f"user: {scenario.request}")
            print()
            script = Script(scenario)
            answer = play(scenario, script)
            print(f"agent's answer: {answer}")
            print(scenario.outcome(script.replies))
            print()
