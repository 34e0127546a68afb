"""A notification agent using a module-level thread pool shared by concurrent requests,
and pydantic models with sets (hash-ordered in Python), as services often are.

``BODIES`` counts tool bodies that really ran.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from sftrace import trace_tool

POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="notify")
BODIES: list[str] = []
_lock = threading.Lock()


class Preferences(BaseModel):
    user: str
    channels: set[str]
    topics: frozenset[str]


class Delivery(BaseModel):
    user: str
    sent: set[str]


@trace_tool
def load_preferences(user: str) -> Preferences:
    with _lock:
        BODIES.append(f"load_preferences:{user}")
    return Preferences(
        user=user,
        channels={"sms", "email", "fax", "push", "pager"},
        topics=frozenset({"billing", "outage", "security"}),
    )


@trace_tool
def send(user: str, channel: str, topic: str) -> dict[str, Any]:
    with _lock:
        BODIES.append(f"send:{user}:{channel}")
    return {"user": user, "channel": channel, "topic": topic, "ok": True}


def notify(request: dict[str, Any]) -> dict[str, Any]:
    """Load the preferences in the pool, then send on every channel in the pool."""
    user, topic = request["user"], request["topic"]
    preferences = POOL.submit(load_preferences, user).result()
    channels = sorted(preferences.channels - {"fax"})
    futures = [POOL.submit(send, user, channel, topic) for channel in channels]
    sent = {future.result()["channel"] for future in futures}
    return Delivery(user=user, sent=sent).model_dump(mode="json") | {"sent": sorted(sent)}
