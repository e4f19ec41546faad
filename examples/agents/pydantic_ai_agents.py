"""The use-case agents in Pydantic AI, driven by a scripted model with no network.

`pynox.tool()` goes into `Agent(tools=[...])` as it is: Pydantic AI reads its signature
and docstring. The model is Pydantic AI's `FunctionModel`, a function that sees the
conversation and answers with the next tool call, so the run needs no key and no network;
swap in "anthropic:claude-sonnet-4-5" or any other model for a real agent.

Pydantic AI does not show a tool's exception to the model; the tool therefore never raises
on a denial but returns the error as text, which the transcript shows the model reading.

Figures the code draws come back as images: the tool's text names them, and
`with_images` hands their PNG bytes to the model as `BinaryContent` beside that text (a
`ToolReturn`), which a multimodal model sees as images.

    pip install pydantic-ai-slim      # then, with pynox installed:
    python examples/agents/pydantic_ai_agents.py
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scenarios import Scenario, Script, play_all


def scripted_model(scenario: Scenario, script: Script) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        script.sees_tools({tool.name: tool.description or "" for tool in info.function_tools})
        last = messages[-1]
        replies = [
            part.model_response_str()
            for part in (last.parts if isinstance(last, ModelRequest) else [])
            if isinstance(part, ToolReturnPart)
        ]
        code = script.next_call(replies[0] if replies else None)
        script.sees_images(
            [
                (item.media_type, len(item.data))
                for part in (last.parts if isinstance(last, ModelRequest) else [])
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
                for item in part.content
                if isinstance(item, BinaryContent)
            ]
        )
        if code is None:
            return ModelResponse(parts=[TextPart(scenario.answer)])
        return ModelResponse(parts=[ToolCallPart("run_python", {"code": code})])

    return FunctionModel(respond)


def with_images(run_python: Callable[[str], str]) -> Callable[[str], ToolReturn]:
    """The pynox tool, returning its text and, as binary content, the images it drew."""
    run = run_python.run  # type: ignore[attr-defined]

    def tool(code: str) -> ToolReturn:
        result = run(code)
        images = [BinaryContent(data=image.data, media_type=image.mime) for image in result.images]
        return ToolReturn(return_value=result.text, content=images or None)

    tool.__name__ = run_python.__name__
    tool.__doc__ = run_python.__doc__
    return tool


def play(scenario: Scenario, script: Script) -> str:
    agent = Agent(scripted_model(scenario, script), tools=[with_images(scenario.run_python)])
    return agent.run_sync(scenario.request).output


if __name__ == "__main__":
    play_all(play, "Pydantic AI")
