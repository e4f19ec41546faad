"""The use-case agents in smolagents, driven by a scripted model with no network.

The function from `pynox.tool()` goes in through `smolagents.tool(...)`, which reads its
signature and docstring. The agent is a `ToolCallingAgent`: a `CodeAgent` would run the
model's own code in smolagents' executor, in this process and outside the sandbox, with
only what it passes to run_python sandboxed. The model is a `Model` subclass that answers
each turn with the next call, so the run needs no key and no network.

A tool's return value reaches the model as text, so the figures the code draws come back
as lines that name them ("[image 1: 640x480 PNG]"), and a step callback hands their PNGs to
the model as the step's observation images, as smolagents does for screenshots
(`run_python.run(code)` gives the whole Result, images included).

    pip install smolagents            # then, with pynox installed:
    python examples/agents/smolagents_agents.py
"""

from __future__ import annotations

import functools
import io
from typing import Any

from scenarios import Scenario, Script, play_all
from smolagents import ActionStep, ToolCallingAgent, tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)


class ScriptedModel(Model):
    """Answers with the script's next call, then with a call of `final_answer`."""

    def __init__(self, scenario: Scenario, script: Script) -> None:
        super().__init__(model_id="scripted")
        self.scenario = scenario
        self.script = script
        self.seen: set[int] = set()  # the images of earlier steps come with every turn

    def new_images(self, messages: list[ChatMessage | dict[str, Any]]) -> list[tuple[str, int]]:
        images = []
        for message in messages:
            content = message.content if isinstance(message, ChatMessage) else message["content"]
            for item in content if isinstance(content, list) else []:
                image = item.get("image") if item.get("type") == "image" else None
                if image is not None and id(image) not in self.seen:
                    self.seen.add(id(image))
                    images.append(("image/png", image.info["png_bytes"]))
        return images

    def generate(
        self,
        messages: list[ChatMessage | dict[str, Any]],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        self.script.sees_tools({t.name: t.description for t in tools_to_call_from or []})
        self.script.sees_images(self.new_images(messages))
        last = (
            ChatMessage.from_dict(messages[-1]) if isinstance(messages[-1], dict) else messages[-1]
        )
        reply = None
        if last.role == MessageRole.TOOL_RESPONSE and isinstance(last.content, list):
            reply = "".join(item.get("text", "") for item in last.content)
        code = self.script.next_call(reply)
        if code is None:
            name, arguments = "final_answer", {"answer": self.scenario.answer}
        else:
            name, arguments = "run_python", {"code": code}
        call = ChatMessageToolCall(
            id=f"call-{self.script.turns}",
            type="function",
            function=ChatMessageToolCallFunction(name=name, arguments=arguments),
        )
        return ChatMessage(role=MessageRole.ASSISTANT, content=None, tool_calls=[call])


def play(scenario: Scenario, script: Script) -> str:
    drawn: list[bytes] = []  # the PNGs of the last call, for the step callback

    @functools.wraps(scenario.run_python)
    def run_python(code: str) -> str:
        result = scenario.run_python.run(code)  # the whole Result, images included
        drawn[:] = [image.data for image in result.images]
        return result.text

    def show_images(step: ActionStep) -> None:
        from PIL import Image

        images = []
        for png in drawn:
            image = Image.open(io.BytesIO(png))
            image.info["png_bytes"] = len(png)
            images.append(image)
        step.observations_images = images or None
        drawn.clear()

    agent = ToolCallingAgent(
        tools=[tool(run_python)],
        model=ScriptedModel(scenario, script),
        step_callbacks=[show_images],
        verbosity_level=0,  # the transcript is printed by the script
    )
    return str(agent.run(scenario.request))


if __name__ == "__main__":
    play_all(play, "smolagents")
