"""The use-case agents in Strands Agents, driven by a scripted model with no network.

Strands only takes decorated tools, so the function from `pynox.tool()` goes in through
`strands.tool(...)`, which reads its signature and docstring. The model is a small
`strands.models.Model` subclass that streams the next tool call for each turn, so the run
needs no key and no network; pass a real model (Bedrock, Anthropic, ...) for a real agent.

Figures the code draws come back as images: the tool's text names them, and
`with_images` returns their PNG bytes as image blocks of the tool result, beside that
text, which a multimodal model sees as images.

    pip install strands-agents        # then, with pynox installed:
    python examples/agents/strands_agents.py
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Any

from scenarios import Scenario, Script, play_all
from strands import Agent, tool
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec


class ScriptedModel(Model):
    """Streams the script's next call as a tool use, or its answer once the calls are done."""

    def __init__(self, scenario: Scenario, script: Script) -> None:
        self.scenario = scenario
        self.script = script
        self.config: dict[str, Any] = {"model_id": "scripted"}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        return self.config

    async def structured_output(  # type: ignore[override]
        self, output_model: Any, prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError("the scripted model only makes tool calls")
        yield {}  # pragma: no cover (makes this an async generator, as Model declares)

    async def stream(  # type: ignore[override]
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.script.sees_tools({spec["name"]: spec["description"] for spec in tool_specs or []})
        replies = [
            "".join(item.get("text", "") for item in block["toolResult"]["content"])
            for block in messages[-1]["content"]
            if "toolResult" in block
        ]
        code = self.script.next_call(replies[0] if replies else None)
        self.script.sees_images(
            [
                ("image/" + item["image"]["format"], len(item["image"]["source"]["bytes"]))
                for block in messages[-1]["content"]
                if "toolResult" in block
                for item in block["toolResult"]["content"]
                if "image" in item
            ]
        )
        yield {"messageStart": {"role": "assistant"}}
        if code is None:
            yield {"contentBlockDelta": {"delta": {"text": self.scenario.answer}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        call = {"name": "run_python", "toolUseId": f"call-{self.script.turns}"}
        yield {"contentBlockStart": {"start": {"toolUse": call}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"code": code})}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def with_images(run_python: Callable[[str], str]) -> Callable[[str], dict[str, Any]]:
    """The pynox tool, returning a tool result: its text, then an image block per image."""
    run = run_python.run  # type: ignore[attr-defined]

    @functools.wraps(run_python)
    def images_too(code: str) -> dict[str, Any]:
        result = run(code)
        content: list[dict[str, Any]] = [{"text": result.text}]
        for image in result.images:
            content.append({"image": {"format": "png", "source": {"bytes": image.data}}})
        return {"status": "success", "content": content}

    return images_too


def play(scenario: Scenario, script: Script) -> str:
    agent = Agent(
        model=ScriptedModel(scenario, script),
        tools=[tool(with_images(scenario.run_python))],
        callback_handler=None,  # the transcript is printed by the script
    )
    return str(agent(scenario.request)).strip()


if __name__ == "__main__":
    play_all(play, "Strands Agents")
