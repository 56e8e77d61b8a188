"""Knowledge-graph memory shared with the MCP memory server, with no API key.

What it shows, in its printed output:
1. a `memory.jsonl` as Claude Desktop's MCP memory server writes it is the agent's graph;
2. the run's session key (`entity:acme_corp:support`) and the people named in the user's
   message put those entities, their facts and relations into the system prompt; the rest of
   the graph stays out (the prompt says how to look it up);
3. the agent records a new fact with the server's own `add_observations` tool, and its very
   next model call already sees it;
4. the file is still in the server's exact format, so the MCP server reads it as before.

Run:  python examples/knowledge_graph.py                      (scripted model, no key needed)
      python examples/knowledge_graph.py --model anthropic:claude-sonnet-4-5   (a real model)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware, build_thread_config
from layered_memory.cli.demo import model_failure
from layered_memory.graph import KnowledgeGraphMiddleware
from layered_memory.testing import PromptRecorder, ScriptedChatModel, system_text, tool_call

# As the MCP memory server writes it: one compact JSON object per line, no final newline.
MEMORY_JSONL = "\n".join(
    json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    for item in (
        {
            "type": "entity",
            "name": "acme_corp",
            "entityType": "organization",
            "observations": ["Customer since 2021", "Plan: Enterprise"],
        },
        {
            "type": "entity",
            "name": "Jane_Doe",
            "entityType": "person",
            "observations": ["Head of IT at Acme", "Prefers email over calls"],
        },
        {
            "type": "entity",
            "name": "Globex",
            "entityType": "organization",
            "observations": ["Competitor of Acme"],
        },
        {"type": "relation", "from": "Jane_Doe", "to": "acme_corp", "relationType": "works_at"},
    )
)
AGENTS_MD = "# Support desk\n\n- Answer in two sentences at most.\n"
NEW_FACT = "Asked to move the renewal call to Friday"


def _answer(messages: list[BaseMessage]) -> str:
    prompt = system_text(messages)
    contact = "by email" if "Prefers email over calls" in prompt else "by phone"
    noted = "I noted the Friday request." if NEW_FACT in prompt else "Nothing noted."
    return f"Jane Doe heads IT at Acme; reach her {contact}. {noted}"


def scripted_model() -> ScriptedChatModel:
    """What a good model would do, written down: the answer is read from the prompt."""
    return ScriptedChatModel(
        script=[
            tool_call(
                "add_observations",
                observations=[{"entityName": "Jane_Doe", "contents": [NEW_FACT]}],
            ),
            _answer,
        ]
    )


def build_agent(model: Any, root: Path) -> Any:
    """A LangChain agent with instruction memory (AGENTS.md) and the knowledge graph."""
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    return create_agent(
        model,
        middleware=[
            MemoryMiddleware(backend=backend, layers=[Layer("project", "/AGENTS.md")]),
            KnowledgeGraphMiddleware(backend=backend, path="/memory.jsonl"),
        ],
        checkpointer=InMemorySaver(),
        system_prompt="You are Acme's support assistant.",
    )


def run(model: Any, root: Path) -> dict[str, Any]:
    """Run one invocation; return what a test needs to check."""
    (root / "memory.jsonl").write_text(MEMORY_JSONL, encoding="utf-8")
    (root / "AGENTS.md").write_text(AGENTS_MD, encoding="utf-8")
    agent = build_agent(model, root)
    recorder = PromptRecorder()
    config = {**build_thread_config("acme_corp", "support"), "callbacks": [recorder]}
    print(f"Graph file {root / 'memory.jsonl'}: 3 entities, 1 relation (MCP memory format)")
    print(f"Thread id (session key): {config['configurable']['thread_id']}\n")

    question = "Jane Doe wants the renewal call moved to Friday. How should I contact her?"
    print(f"user: {question}")
    result = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
    for message in result["messages"]:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                print(f"  agent called {call['name']}({json.dumps(call['args'])})")
    print(f"  agent: {result['messages'][-1].text}\n")

    first = recorder.system_prompts[0]
    block = first[first.index("<knowledge_graph>") : first.index("</knowledge_graph>")]
    in_focus = [name for name in ("acme_corp", "Jane_Doe", "Globex") if f'"{name}"' in block]
    print(f"model call 1: entities in the prompt: {', '.join(in_focus)} (Globex stays out)")
    seen = [NEW_FACT in prompt for prompt in recorder.system_prompts]
    for index, flag in enumerate(seen, start=1):
        print(f"model call {index}: the new fact in its system prompt: {'yes' if flag else 'no'}")

    text = (root / "memory.jsonl").read_text(encoding="utf-8")
    lines = text.split("\n")
    same_format = all(
        line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))
        for line in lines
    ) and not text.endswith("\n")
    print(f"\nmemory.jsonl now ({len(lines)} lines, still the server's format: {same_format}):")
    print(next(line for line in lines if '"Jane_Doe"' in line and '"entity"' in line))
    return {
        "in_focus": in_focus,
        "fact_seen_per_call": seen,
        "answer": result["messages"][-1].text,
        "file": text,
        "same_format": same_format,
        "block_chars": len(block),
    }


def main(argv: list[str] | None = None, *, root: Path | None = None) -> dict[str, Any]:
    """Parse the command line and run the example in a fresh temporary folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real model as provider:name (needs its API key)")
    args = parser.parse_args(argv)
    if args.model:
        from langchain.chat_models import init_chat_model

        model: Any = init_chat_model(args.model)
    else:
        model = scripted_model()
    if root is not None:
        return run(model, root)
    with tempfile.TemporaryDirectory(prefix="layered-memory-graph-") as folder:
        return run(model, Path(folder))


if __name__ == "__main__":
    try:
        outcome = main()
    except Exception as exc:
        line = model_failure("knowledge_graph.py", sys.argv[1:], exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(2)
    sys.exit(0 if outcome["same_format"] else 1)
