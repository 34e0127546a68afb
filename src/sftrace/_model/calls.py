"""How a call is identified and named, in one place: its label and its reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sftrace._model import attributes as A


class Identified(Protocol):
    """Anything that names a call: a recorded ``Call`` or what a replay reached."""

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> str | None: ...


def call_label(kind: str, name: str, provider: str | None) -> str:
    """``tool search_flights`` or ``llm openai/gpt-4o``: how messages name a call."""
    if kind == A.KIND_LLM and provider:
        return f"llm {provider}/{name}"
    return f"{kind} {name}"


@dataclass(frozen=True, slots=True)
class CallRef:
    """A call as findings name it: its number (``sftrace.seq``), 1-based position in its
    run, kind, name and (for LLM calls) provider."""

    number: int
    position: int
    kind: str
    name: str
    provider: str | None = None

    @classmethod
    def of(cls, call: Identified, position: int) -> CallRef:
        return cls(call.seq, position, call.kind, call.name, call.provider)

    @property
    def label(self) -> str:
        return call_label(self.kind, self.name, self.provider)

    def __str__(self) -> str:
        return f"call {self.number} ({self.label})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "position": self.position,
            "kind": self.kind,
            "name": self.name,
            "provider": self.provider,
        }
