"""Matching reached calls to recorded ones, and deciding what each call does.

A boundary asks :meth:`ReplayController.decide` before its span starts (the replay
``SpanProcessor`` asks for call spans no boundary started) and then acts on the
:class:`Decision`: return the recorded result, run the body, ask the manual handler, or
raise.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from sftrace._errors import (
    BundleError,
    RecordingEndedError,
    ReplayError,
    ReplayExhaustedError,
    ReplayMismatchError,
)
from sftrace._model import attributes as A
from sftrace._model.calls import Call, inner_calls
from sftrace._model.jsondiff import differences
from sftrace._model.jsonpath import strip
from sftrace._model.markers import (
    KNOWN_SECRET_MARKER,
    masked,
    secrets_at_markers,
    secrets_near_markers,
    unmarked,
)
from sftrace._model.normalize import content_key
from sftrace._model.policy import MatchMode, ReplayMode, ReplayPolicy
from sftrace._model.serialize import loads
from sftrace._record.intercept import ANSWERED, RAISE, Action, Decision, Reached
from sftrace._record.threads import current_delivery
from sftrace._replay.completion import completion_order
from sftrace._replay.concurrency import concurrency_of
from sftrace._replay.mismatch import (
    exhausted_error,
    mismatch_error,
    nearest_of,
    recording_ended_error,
)
from sftrace._replay.options import MatchTier, ReplayOptions
from sftrace._replay.policy import policy_decision

# Looked up once (see ANSWERED in _record/intercept.py): tested for every reached call.
_HYBRID, _UNORDERED = ReplayMode.HYBRID, MatchMode.UNORDERED


@dataclass(frozen=True, slots=True)
class MatchedCall:
    """A recorded call the replay reached, and what it did with it."""

    number: int  # 1-based position among reached calls
    recorded: Call
    # "substituted", "executed", "derived", "manual", "refused", "overridden" (a fork's
    # call answered with the fork's override), or "live" (on_miss="live", or a call after
    # a fork point: no recorded call answered it and it ran for real; ``recorded`` then
    # describes the reached call, with seq 0)
    action: str
    # How the reached input matched the recorded one ("exact", "normalized", "relaxed");
    # None for a call paired by position only (a live LLM call in hybrid mode).
    tier: MatchTier | None = None
    # For a non-exact tier: where the inputs differ, as (path, recorded, reached).
    differences: tuple[tuple[str, Any, Any], ...] = ()


Identity = tuple[str, str, str | None]


def _redacted_known_secret(call: Call) -> bool:
    """Whether the recording says it redacted a known secret in ``call``'s input (its
    ``sftrace.redactions``): only then does its marker stand for a value to learn (a
    marker typed into a bundle by hand would otherwise match anything there)."""
    if not call.may_have(A.REDACTIONS):
        return False
    text = call.attributes.get(A.REDACTIONS)
    try:
        records = loads(text) if isinstance(text, str) else None
    except Exception:  # a damaged bundle: no such record
        return False
    return isinstance(records, list) and any(
        isinstance(record, dict)
        and record.get("rule") == "known_secret"
        and record.get("field") == "input"
        for record in records
    )


def call_identity(call: Call | Reached) -> Identity:
    return (call.kind, call.name, call.provider)


class ReplayController:
    """The matching state of one replay. Thread-safe."""

    def __init__(
        self,
        calls: list[Call],
        options: ReplayOptions,
        *,
        recorded_run_id: str = "",
        span_parents: dict[str, str | None] | None = None,
    ) -> None:
        self.calls = calls
        self.options = options
        self.mode = options.mode
        self.match = options.match
        self.live_llms = frozenset(options.live_llms)
        self.allow_live_tools = frozenset(options.allow_live_tools)
        self.manual = options.manual
        self.recorded_run_id = recorded_run_id
        # What the replay did with each call reached, as the fields of a ``MatchedCall``:
        # the records themselves are built when ``matched`` is read (once, mostly).
        self._matched: list[tuple[Any, ...]] = []
        self._matched_built: list[MatchedCall] = []
        self.divergence: ReplayError | None = None
        self.reached_count = 0
        self._used = [False] * len(calls)
        self._next = 0
        self.lock = threading.Lock()
        self.spans: list[Any] = []  # the replay's own finished spans (ReadableSpan)
        self.tiers = options.tiers
        # Unordered, per tier: (kind, name, provider, key of the input) -> recorded
        # indexes; built when a tier is first needed (past "exact", building one parses
        # every recorded input, which a replay whose inputs all match exactly never needs).
        self._by_key: dict[MatchTier, dict[tuple[Identity, str], deque[int]]] = {}
        self.covered: list[Call] = []  # recorded calls inside a substituted call
        # (kind, name) -> seq of recorded calls still running when the recorded run ended
        # (the bundle lacks them): named where a replay reaches such a call
        self.unfinished: dict[tuple[str, str], int] = {}
        # For an ``interrupted`` recording (its process died), see end_at_interruption:
        # where the agent went past the recording's end (the first such call's error), and
        # the recorded calls made inside the span the process died in.
        self.interrupted = False
        self.recording_end: RecordingEndedError | None = None
        self._inside_unfinished: frozenset[int] = frozenset()
        # Secrets the call being decided holds where its recorded input has a known-secret
        # marker (see secrets_at_markers): the boundary redacts them from then on.
        self._learned: tuple[str, ...] = ()
        self._inner = inner_calls(calls, span_parents or {})
        # For a recording whose calls overlapped (a thread pool, asyncio tasks): which of
        # them a strict replay may take out of the recorded order (None: none may; an
        # unordered replay, which takes any order, does not look).
        self.concurrency = (
            concurrency_of(calls, span_parents or {}, self._inner)
            if self.match is MatchMode.STRICT
            else None
        )
        # For a recording whose calls overlapped: answers go out in the recorded end order
        # (a strict replay knows already whether any did: concurrency_of).
        self.completion = (
            completion_order(calls, self._inner)
            if self.concurrency is not None or self.match is MatchMode.UNORDERED
            else None
        )
        self.reordered = 0  # calls a strict replay took before earlier concurrent ones
        # The reached number -> the replayed call's seq, where the two differ.
        self.replayed_seqs: dict[int, int] = {}

    def end_at_interruption(self, inside_unfinished: frozenset[int]) -> None:
        """The recording is ``interrupted``: its process died, so the agent may go past
        its end, and that is no divergence. The replay stops the agent there (raising
        ``RecordingEndedError``) when every recorded call has been used, or when the only
        calls left were made inside a span the process died in (``inside_unfinished``,
        their seqs: the call the agent reaches instead is taken to be that span's call,
        and they are covered by it)."""
        self.interrupted = True
        self._inside_unfinished = inside_unfinished

    def _at_recording_end(self, exc: ReplayError, reached: Reached) -> list[int] | None:
        """Whether ``exc``, raised by ``_find``, means the agent went past the end of an
        interrupted recording (see ``end_at_interruption``): None if not, else the seqs of
        the calls left, made inside the span the process died in, now covered (or, for a
        call lost while concurrent ones went on, ``[-1]``)."""
        if not self.interrupted:
            return None
        if isinstance(exc, ReplayExhaustedError):
            return []
        if not isinstance(exc, ReplayMismatchError):
            return None
        if not self._inside_unfinished:
            return [-1] if self._lost_while_concurrent(reached) else None
        left = [index for index, used in enumerate(self._used) if not used]
        inside = {i for i in left if self.calls[i].seq in self._inside_unfinished}
        pending = list(inside)
        while pending:  # and the calls made inside those
            for inner in self._inner.get(pending.pop(), ()):
                if inner not in inside:
                    inside.add(inner)
                    pending.append(inner)
        if not inside or any(index not in inside for index in left):
            return None
        for index in sorted(inside):
            self._use(index)
            self.covered.append(self.calls[index])
        self._next = len(self.calls)
        return [self.calls[index].seq for index in sorted(inside)]

    def _lost_while_concurrent(self, reached: Reached) -> bool:
        """Whether ``reached``, matching no unused recorded call of an interrupted
        recording whose calls ran concurrently, is taken to be a call still running when
        the process died (lost with it): its thread or task is stopped there and the
        others go on. The recorded calls never reached still show a changed agent."""
        if self.concurrency is None and self.match is not MatchMode.UNORDERED:
            return False  # a sequential recording: the divergence says what differs
        reached_input = _Parsed(reached.input_json)
        return not any(
            not used and self._tier_of(call, reached, reached_input) is not None
            for call, used in zip(self.calls, self._used, strict=True)
        )

    def _index(self, tier: MatchTier) -> dict[tuple[Identity, str], deque[int]]:
        """The recorded calls by their key at ``tier`` (used ones are skipped on lookup)."""
        index_of = self._by_key.get(tier)
        if index_of is None:
            index_of = defaultdict(deque)
            for index, call in enumerate(self.calls):
                identity = call_identity(call)
                if tier == "exact":  # the text: no input is parsed
                    key = unmarked(call.input_json)
                else:
                    key = self._key(tier, identity, call.input, call.input_json)
                index_of[(identity, key)].append(index)
            self._by_key[tier] = index_of
        return index_of

    def note_matched(
        self,
        number: int,
        recorded: Call,
        action: str,
        tier: MatchTier | None = None,
        differences: tuple[tuple[str, Any, Any], ...] = (),
    ) -> None:
        """Note what the replay did with reached call ``number`` (see ``MatchedCall``)."""
        self._matched.append((number, recorded, action, tier, differences))

    @property
    def matched(self) -> list[MatchedCall]:
        """A ``MatchedCall`` for each call reached so far, in the order reached."""
        with self.lock:
            built = self._matched_built
            built.extend(MatchedCall(*row) for row in self._matched[len(built) :])
            return list(built)

    @property
    def unused(self) -> list[Call]:
        with self.lock:
            return [call for call, used in zip(self.calls, self._used, strict=True) if not used]

    # -- deciding ------------------------------------------------------------------------
    def provenance(self) -> dict[str, Any]:
        """How a run replayed by this controller derives from the recorded one (the
        manifest's ``derived_from`` without the ``run_id``): what the options say
        (``minimize``), else ``on_miss`` or ``replay``."""
        if self.options.derived_from is not None:
            return dict(self.options.derived_from)
        how = {"how": "on_miss" if self.options.on_miss == "live" else "replay"}
        if self.match is MatchMode.UNORDERED:
            how["match"] = MatchMode.UNORDERED.value  # the order of its calls is not compared
        return how

    def decide(
        self,
        reached: Reached,
        *,
        policy_hint: ReplayPolicy | None = None,
        parent_span_id: int | None = None,
        seq: int | None = None,
    ) -> Decision:
        """What to do with ``reached``, a call whose span is about to start under the span
        ``parent_span_id`` (by default the current span: a boundary decides before it
        starts its span). ``seq``: the replayed call's own sequence number, when it is
        not the number this decision gives it (threads reaching calls between taking
        their number and being decided): see ``replayed_seqs``."""
        if self.concurrency is not None and parent_span_id is None:
            context = trace.get_current_span().get_span_context()
            parent_span_id = context.span_id if context.is_valid else None
        try:
            with self.lock:
                if self.concurrency is not None:
                    self.concurrency.taken.index = None
                decision = self._decide(reached, parent_span_id)
                if seq is not None and seq != self.reached_count:
                    self.replayed_seqs[self.reached_count] = seq
                return decision
        except BundleError as exc:
            # A recorded value read for the first time here is malformed (a damaged
            # bundle): the call reached raises it, naming the file, line and span.
            return Decision(Action.RAISE, error=exc)

    def note_span(self, span_id: int, parent_span_id: int | None, *, decided: bool) -> None:
        """Note a span of the replay as it starts (for a concurrent recording only, see
        ``concurrency``): ``decided``, it is the span of the call this thread was just
        decided, so the calls made inside it are matched among the recorded call's."""
        if self.concurrency is not None:
            with self.lock:
                self.concurrency.note_span(span_id, parent_span_id, decided=decided)

    def _decide(self, reached: Reached, parent_span_id: int | None = None) -> Decision:
        """:meth:`decide`, with the lock held."""
        self.reached_count += 1
        number = self.reached_count
        self._learned = ()
        if self.mode is _HYBRID and self._is_live_llm(reached):
            return self._live_llm(number, reached)
        try:
            index, tier = self._find(number, reached, parent_span_id)
        except ReplayError as exc:
            if self.options.on_miss == "live" and self.options.may_run_live(
                *call_identity(reached)
            ):
                self.note_matched(number, unrecorded_call(reached), "live")
                return Decision(Action.EXECUTE)
            inside = self._at_recording_end(exc, reached)
            if inside is not None:
                ended = recording_ended_error(number, reached, len(self.calls), inside)
                if self.recording_end is None:
                    self.recording_end = ended
                return Decision(Action.RAISE, error=ended)
            self._diverge(exc)
            return Decision(Action.RAISE, error=exc, learned=self._learned)
        self._use(index)
        if self.concurrency is not None:
            self.concurrency.taken.index = index
        recorded = self.calls[index]
        decision = self._apply_policy(number, recorded, reached)
        # A recorded failure raised again is answered from the recording, whatever
        # class it comes back as (RecordedDependencyError is a ReplayError too).
        answered = decision.action in ANSWERED
        if (answered or decision.recorded_failure) and index in self._inner:
            self._cover(index)
        decision.learned = self._learned
        label = decision.action._value_  # (Enum.value is a Python call)
        if decision.recorded_failure:
            label = Action.RETURN.value
        diffs: tuple[tuple[str, Any, Any], ...] = ()
        if tier != "exact":
            diffs = tuple(differences(recorded.input, loads(reached.input_json)))
        self.note_matched(number, recorded, label, tier, diffs)
        if decision.action is RAISE and not decision.recorded_failure:
            assert isinstance(decision.error, ReplayError)
            self._diverge(decision.error)
        return decision

    def _cover(self, index: int) -> None:
        """Mark the calls recorded inside a call whose body will not run as used."""
        pending = list(self._inner.get(index, ()))
        while pending:
            inner = pending.pop()
            if not self._used[inner]:
                self._use(inner)
                self.covered.append(self.calls[inner])
                if self.completion is not None:
                    self.completion.end(self.calls[inner])
            pending.extend(self._inner.get(inner, ()))

    # -- answering in the recorded end order (see _replay/completion.py) ---------------
    def hold_answer(self, recorded: Call) -> None:
        if self.completion is not None:
            self.completion.wait(recorded)

    async def ahold_answer(self, recorded: Call) -> None:
        if self.completion is not None:
            await self.completion.await_(recorded)

    def answered(self, recorded: Call) -> None:
        if self.completion is not None:
            self.completion.end(recorded, current_delivery())

    def diverge(self, error: ReplayError) -> None:
        with self.lock:
            self._diverge(error)

    def _diverge(self, error: ReplayError) -> None:
        if self.divergence is None:
            self.divergence = error

    def _is_live_llm(self, reached: Reached) -> bool:
        return (
            self.mode is ReplayMode.HYBRID
            and reached.kind == A.KIND_LLM
            and f"{reached.provider}/{reached.name}" in self.live_llms
        )

    def _live_llm(self, number: int, reached: Reached) -> Decision:
        # A live LLM's input may change: pair it with the recorded call at the same
        # position if that is the same provider and model, to keep later calls aligned.
        candidates = [self._next] if self.match is MatchMode.STRICT else range(len(self.calls))
        for index in candidates:
            if index < len(self.calls) and not self._used[index]:
                recorded = self.calls[index]
                if call_identity(recorded) == call_identity(reached):
                    self._use(index)
                    if self.match is MatchMode.STRICT:
                        self._next += 1
                    self.note_matched(number, recorded, Action.EXECUTE.value)
                    break
        return Decision(Action.EXECUTE)

    def _key(self, tier: MatchTier, identity: Identity, value: Any, text: str) -> str:
        """What must be equal for two inputs of calls with this identity to match at ``tier``."""
        if tier == "exact":
            return unmarked(text)
        if tier == "relaxed":
            value = strip(value, self.options.ignored_paths(*identity))
        return content_key(value)

    def _tier_of(
        self, recorded: Call, reached: Reached, reached_input: _Parsed
    ) -> MatchTier | None:
        """The first tier at which ``reached`` matches ``recorded``, if any."""
        # Every reached call comes here: the identities compared field by field and the
        # exact tier's texts compared in place, without tuples or a call per tier.
        if (
            recorded.name != reached.name
            or recorded.kind != reached.kind
            or recorded.provider != reached.provider
        ):
            return None
        for tier in self.tiers:
            if tier == "exact":
                if recorded.input_json == reached.input_json or unmarked(
                    recorded.input_json
                ) == unmarked(reached.input_json):
                    return tier
            elif self._matches_at(tier, recorded, reached, reached_input):
                return tier
        if KNOWN_SECRET_MARKER in recorded.input_json and _redacted_known_secret(recorded):
            learned = secrets_at_markers(recorded.input_json, reached.input_json)
            if learned is not None:  # the same text, with the secret the replay never saw
                self._learned = learned
                return "exact"
        return None

    def _matches_at(
        self, tier: MatchTier, recorded: Call, reached: Reached, reached_input: _Parsed
    ) -> bool:
        """Whether the inputs of two calls of the same identity match at ``tier``."""
        if tier == "exact":  # the texts: neither input needs parsing
            return unmarked(recorded.input_json) == unmarked(reached.input_json)
        identity = call_identity(reached)
        want = self._key(tier, identity, recorded.input, recorded.input_json)
        return want == self._key(tier, identity, reached_input.value, reached.input_json)

    def input_match(
        self, recorded: Call, reached: Reached
    ) -> tuple[MatchTier | None, tuple[tuple[str, Any, Any], ...]]:
        """How ``reached``'s input matches ``recorded``'s: the first tier it matches at
        (None: none) and, past ``exact``, where they differ as (path, recorded, reached)."""
        tier = self._tier_of(recorded, reached, _Parsed(reached.input_json))
        if tier == "exact":
            return tier, ()
        return tier, tuple(differences(recorded.input, loads(reached.input_json)))

    def _take_concurrent(
        self, reached: Reached, reached_input: _Parsed, parent_span_id: int | None
    ) -> tuple[tuple[int, MatchTier] | None, list[int]]:
        """Strict matching for a recording with concurrent calls (see ``concurrency``), at
        each tier in turn: the call taken and its tier (None: none), and, when none, the
        calls of ``reached``'s identity it could have been. The calls whose input matches
        are looked up by their key, as unordered matching does, so a replay reaching
        thousands of concurrent calls in another order stays linear."""
        concurrency = self.concurrency
        assert concurrency is not None
        enclosing = concurrency.enclosing(parent_span_id)
        identity = call_identity(reached)
        for tier in self.tiers:
            if tier == "exact":
                key = unmarked(reached.input_json)
            else:
                key = self._key(tier, identity, reached_input.value, reached.input_json)
            queue = self._index(tier).get((identity, key))
            if not queue:
                continue
            while queue and self._used[queue[0]]:
                queue.popleft()  # (used: never a candidate again)
            index = concurrency.take(self._next, self._used, enclosing, queue)
            if index is not None:
                if index != self._next:
                    self.reordered += 1
                return (index, tier), []

        def same(call: Call) -> bool:
            return call_identity(call) == identity

        return None, concurrency.could_be(self._next, self._used, enclosing, same)

    def _use(self, index: int) -> None:
        """Mark recorded call ``index`` as used."""
        self._used[index] = True
        if self.concurrency is not None:
            self.concurrency.use(index)

    def _find(
        self, number: int, reached: Reached, parent_span_id: int | None = None
    ) -> tuple[int, MatchTier]:
        """The recorded call ``reached`` matches and the tier it matched at, or raise."""
        reached_input = _Parsed(reached.input_json)
        if self.match is _UNORDERED:
            identity = call_identity(reached)
            for tier in self.tiers:  # the tier decides before the position
                if tier == "exact":
                    key = unmarked(reached.input_json)
                else:
                    key = self._key(tier, identity, reached_input.value, reached.input_json)
                queue = self._index(tier).get((identity, key))
                while queue:
                    index = queue.popleft()
                    if not self._used[index]:
                        return index, tier
            for index, call in enumerate(self.calls):  # a secret the replay never saw
                if (
                    not self._used[index]
                    and KNOWN_SECRET_MARKER in call.input_json
                    and self._tier_of(call, reached, reached_input) is not None
                ):
                    return index, "exact"
            if all(self._used):
                raise self._exhausted(number, reached)
            raise self._mismatch(number, reached, self._nearest(reached), unordered=True)
        while self._next < len(self.calls) and self._used[self._next]:
            self._next += 1
        if self._next >= len(self.calls):
            raise self._exhausted(number, reached)
        recorded = self.calls[self._next]
        could: list[int] = []
        if self.concurrency is not None:
            taken, could = self._take_concurrent(reached, reached_input, parent_span_id)
            if taken is not None:
                return taken
        found = self._tier_of(recorded, reached, reached_input)
        if found is None and self.options.on_miss == "live":
            # A miss uses up no recorded call; a later one that matches skips those before
            # it (they stay unused).
            for ahead in range(self._next + 1, len(self.calls)):
                if not self._used[ahead]:
                    found = self._tier_of(self.calls[ahead], reached, reached_input)
                    if found is not None:
                        self._next = ahead
                        break
        if found is None:
            if could:  # show the nearest of the calls the agent could have been making
                recorded = nearest_of([self.calls[i] for i in could], reached)
            raise self._mismatch(number, reached, recorded, unordered=False)
        self._next += 1
        return self._next - 1, found

    def _later_match(self, reached: Reached) -> Call | None:
        """The first unused recorded call after the strict position that ``reached``
        matches: a call the agent made in another order."""
        reached_input = _Parsed(reached.input_json)
        for index in range(self._next + 1, len(self.calls)):
            if not self._used[index]:
                call = self.calls[index]
                if self._tier_of(call, reached, reached_input) is not None:
                    return call
        return None

    def _nearest(self, reached: Reached) -> Call | None:
        unused = [c for c, used in zip(self.calls, self._used, strict=True) if not used]
        same = [c for c in unused if call_identity(c) == call_identity(reached)]
        if same:
            return nearest_of(same, reached)
        same_kind = [c for c in unused if c.kind == reached.kind]
        candidates = same_kind or unused
        return candidates[0] if candidates else None

    def _exhausted(self, number: int, reached: Reached) -> ReplayExhaustedError:
        return exhausted_error(
            number,
            reached,
            len(self.calls),
            self.unfinished.get((reached.kind, reached.name)),
            covered=len(self.covered),
        )

    def _mismatch(
        self, number: int, reached: Reached, recorded: Call | None, *, unordered: bool
    ) -> ReplayMismatchError:
        if recorded is not None and KNOWN_SECRET_MARKER in recorded.input_json:
            # a secret the replay never learned (it was taught inside a covered call):
            # kept out of the report, and redacted from the call's span by the boundary
            self._learned = secrets_near_markers(recorded.input_json, reached.input_json)
            if self._learned:
                reached = Reached(
                    reached.kind,
                    reached.name,
                    reached.provider,
                    masked(reached.input_json, self._learned),
                )
        return mismatch_error(
            number,
            reached,
            recorded,
            unordered=unordered,
            same_identity=recorded is not None
            and call_identity(recorded) == call_identity(reached),
            later=None if unordered else self._later_match(reached),
            concurrent=self.concurrency is not None,
            unfinished=self.unfinished.get((reached.kind, reached.name)),
            not_live=self.options.on_miss == "live"
            and not self.options.may_run_live(*call_identity(reached)),
        )

    def _apply_policy(self, number: int, recorded: Call, reached: Reached) -> Decision:
        return policy_decision(
            number,
            recorded,
            mode=self.mode,
            has_manual=self.manual is not None,
            allow_live_tools=self.allow_live_tools,
        )


class _Parsed:
    """A reached input, parsed when a tier first needs the value (exact needs the text)."""

    __slots__ = ("_value", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._value: Any = _Parsed

    @property
    def value(self) -> Any:
        if self._value is _Parsed:
            self._value = loads(self.text)
        return self._value


def unrecorded_call(reached: Reached) -> Call:
    """A reached call the recording has no counterpart for, as a ``Call`` (seq 0)."""
    return Call(
        seq=0,
        kind=reached.kind,
        name=reached.name,
        provider=reached.provider,
        input_json=reached.input_json,
        output_json=None,
        error=None,
        policy=ReplayPolicy.LIVE.value,
        span_id="",
        parent_span_id=None,
    )
