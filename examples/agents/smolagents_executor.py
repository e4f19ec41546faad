"""A smolagents CodeAgent whose steps run in a Pynox session, driven by a scripted model.

`PynoxExecutor` (pynox.integrations.smolagents) replaces smolagents' in-process
interpreter: every step the model writes runs in one sandboxed session, so the rows loaded
in one step are still there in the next; the agent's tools run on the host and the
sandboxed code calls them by name; `final_answer` ends the run. When a step reads the
project's .env, which the executor was not granted, the model reads the denial and its hint
as the step's observation, and carries on. The model replays a script: no key, no network.

    pip install 'pynox[smolagents]'
    python examples/agents/smolagents_executor.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from smolagents import CodeAgent, tool
from smolagents.models import ChatMessage, MessageRole, Model

from pynox.integrations.smolagents import PynoxExecutor

DATA = Path(__file__).resolve().parent.parent / "use_cases" / "data"

STEPS = [
    """\
import csv
with open(f"{project}/data/sales.csv", newline="") as file:
    sales = list(csv.DictReader(file))
revenue = {}
for row in sales:
    amount = int(row["units"]) * float(row["unit_price"])
    revenue[row["region"]] = revenue.get(row["region"], 0.0) + amount
best = max(revenue, key=revenue.get)
print(f"{best}: {revenue[best]:.2f}")
""",
    """\
print(open(f"{project}/.env").read())
""",
    """\
target = region_target(best)
print(f"target for {best}: {target:.2f}, reached: {revenue[best] >= target}")
""",
    """\
final_answer(f"{best} sold most: {revenue[best]:.2f} (target {target:.2f})")
""",
]


@tool
def region_target(region: str) -> float:
    """The revenue target the sales team set for a region, from the host's planning data.

    Args:
        region: The region's name, such as West.
    """
    return {"West": 2000.0, "North": 2500.0, "South": 1500.0}.get(region, 0.0)


class ScriptedModel(Model):
    """Answers each turn with the next step of the script, and keeps what it was told."""

    def __init__(self, project: Path) -> None:
        super().__init__(model_id="scripted")
        self.steps = [step.replace("{project}", str(project)) for step in STEPS]
        self.observations: list[str] = []

    def generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatMessage:
        last = messages[-1]
        content = last.content if isinstance(last, ChatMessage) else last["content"]
        if isinstance(content, list):
            self.observations.append("".join(item.get("text", "") for item in content))
        code = self.steps[len(self.observations) - 1]
        return ChatMessage(
            role=MessageRole.ASSISTANT, content=f"Thought: next step.\n<code>\n{code}</code>"
        )


def main() -> None:
    project = Path(tempfile.mkdtemp(prefix="analyst-"))
    try:
        shutil.copytree(DATA, project / "data")
        (project / ".env").write_text("DATABASE_URL=postgres://analyst:not-a-real-password@db\n")
        model = ScriptedModel(project)
        executor = PynoxExecutor(allow_read=[str(project / "data")], timeout="20s")
        agent = CodeAgent(tools=[region_target], model=model, executor=executor, verbosity_level=0)
        try:
            answer = agent.run("Which region sold most, and did it reach its target?")
        finally:
            agent.cleanup()
        for number, observation in enumerate(model.observations[1:], 1):
            print(f"--- observation {number} ---\n{observation.strip()}")
        print(f"answer: {answer}")
    finally:
        shutil.rmtree(project)


if __name__ == "__main__":
    main()
