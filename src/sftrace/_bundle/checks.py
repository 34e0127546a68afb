"""The one span validator: what a valid span line of a bundle is.

:class:`SpanChecker` is the only place that says what a valid span line is. Its callers
decide what a problem costs: loading raises ``BundleError``, recovery drops the journal
line (and says so in the notes), collector import skips the run (and says why).
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import orjson

from sftrace._bundle.manifest import HEX16
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_value
from sftrace._model.text import repr_preview, shorten

_NO_VALUE: dict[str, Any] = {}  # an attribute without a value (never modified)
_NANOS = re.compile(r"[0-9]{1,19}")
_SFTRACE_KINDS = (A.KIND_RUN, A.KIND_TOOL, A.KIND_LLM)
_HEX = "0123456789abcdef"
_INT64_MAX = str((1 << 63) - 1)  # 19 digits: compared as text with 19-digit numbers
_CALL_KINDS = (A.KIND_TOOL, A.KIND_LLM)
_SPAN_KINDS = frozenset(range(6))  # OTLP span kinds 0 to 5 (an int: checked before)
# The fields of a call span line as sftrace writes it (SpanChecker.take_plain), and the
# types and lengths they have there: name, kind, attributes; span id, start time, both times.
_PLAIN_FIELDS = itemgetter(
    "spanId",
    "parentSpanId",
    "traceId",
    "name",
    "kind",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "attributes",
)
_PLAIN_SHAPE = (str, int, list, 16, 19, 38)


def _values_are_json(attributes: dict[str, Any]) -> bool:
    """The call's input and output (those it has) are JSON text, and its path lists (see
    ``_PATH_LISTS``) arrays of paths: else :meth:`SpanChecker._check` says what is wrong."""
    try:
        for key in (A.INPUT, A.OUTPUT):
            if key in attributes:
                orjson.loads(attributes[key])
    except orjson.JSONDecodeError:
        return False
    return all(
        _path_list_problem(attributes[key]) is None for key in _PATH_LISTS if key in attributes
    )


class SpanChecker:
    """Checks the span lines of one run, one at a time, against the format's rules.

    ``parents_first``: a span's parent must come before it (a bundle's spans.jsonl);
    otherwise a parent only needs to be a well-formed span id (a journal, reordered by
    recovery; a collector's spans, in any order). Each span accepted is remembered, so a
    repeated span id or ``sftrace.seq`` is a problem of the later line.
    """

    __slots__ = ("parents", "parents_first", "seqs", "trace_id")

    def __init__(self, trace_id: str, *, parents_first: bool = True) -> None:
        self.trace_id = trace_id
        self.parents_first = parents_first
        self.parents: dict[str, str | None] = {}  # span id -> parent id, in line order
        self.seqs: set[int] = set()

    def check(self, span: Any, *, values: bool = True) -> tuple[list[str], dict[str, Any]]:
        """The problems of one parsed line (empty when it is valid) and its decoded
        attributes. Each problem names the span. Pass a valid span to :meth:`accept`
        when it is kept.

        ``values``: also parse ``sftrace.input`` / ``sftrace.output`` (they must be JSON
        text). A lazy loader passes False and parses them when they are first read
        (``Call.input``); it still checks that they are strings.
        """
        problems: list[str] = []
        try:
            attributes = self._check(span, problems, values)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
            problems.append(f"malformed span ({repr_preview(exc)})")
            attributes = {}
        return problems, attributes

    def take(self, span: Any, *, values: bool = True) -> tuple[list[str], dict[str, Any]]:
        """:meth:`check`, then :meth:`accept` the span when it is valid."""
        problems, attributes = self.check(span, values=values)
        if not problems:
            self.accept(span, attributes)
        return problems, attributes

    def take_plain(self, span: Any, values: bool) -> dict[str, Any] | None:
        """The decoded attributes of a call span in the plain shape sftrace writes,
        checked with the rules of :meth:`check` in fewer steps and accepted as
        :meth:`accept` would; None, and nothing remembered, for any other span (which
        :meth:`take` then checks and explains). ``parents_first`` checkers only.

        Every line of a bundle but the run span comes here, so it is written for speed,
        each test standing for one or more rules of :meth:`_check`: it accepts a subset
        of what ``_check`` accepts (a Hypothesis test pins it); the fields the plain shape
        has are read in one step (a missing one fails the lookup); one tuple compares the
        types and lengths the shape fixes and the run's trace id; the times are two
        19-digit strings (every time from 2001 to 2262), checked as one 38-character
        one; and the ``try`` refuses what has the wrong type where that replaces a
        check (a span id or an attribute value that is not a string or object fails
        its method or lookup)."""
        parents = self.parents
        try:
            span_id, parent, trace_id, name, kind, start, end, items = _PLAIN_FIELDS(span)
            times = start + end
            if (
                (type(name), type(kind), type(items), len(span_id), len(start), len(times))
                != _PLAIN_SHAPE
                or trace_id != self.trace_id
                or span_id.strip(_HEX)
                or span_id in parents
                or parent not in parents
                or kind not in _SPAN_KINDS
                or not times.isdigit()
                or not times.isascii()
                or start > _INT64_MAX
                or end > _INT64_MAX
                # the plain fields only, or those and a status object
                or (len(span) != 8 and (len(span) != 9 or type(span.get("status")) is not dict))
            ):
                return None
            attributes: dict[str, Any] = {}
            for item in items:
                value = item["value"]
                if "stringValue" in value:
                    attributes[item["key"]] = value["stringValue"]
                    continue
                number = value["intValue"]  # other value types: decoded by _check
                if not (number.isdigit() and number.isascii() and len(number) < 19):
                    return None
                attributes[item["key"]] = int(number)
            "".join(attributes)  # every key a string (TypeError otherwise): once per span
        except (KeyError, TypeError, AttributeError):
            return None
        if A.KIND in attributes:
            seq = attributes.get(A.SEQ)
            if (
                attributes[A.KIND] not in _CALL_KINDS  # a run span has no parent: not here
                or type(seq) is not int
                or seq in self.seqs
                or type(attributes.get(A.INPUT, "")) is not str
                or type(attributes.get(A.OUTPUT, "")) is not str
                or (values and not _values_are_json(attributes))
            ):
                return None
            self.seqs.add(seq)
        parents[span_id] = parent
        return attributes

    def accept(self, span: dict[str, Any], attributes: dict[str, Any]) -> None:
        """Remember a valid span kept: later lines may name it as their parent, and may
        not repeat its span id or sequence number."""
        if A.KIND in attributes:
            self.seqs.add(attributes[A.SEQ])
        self.parents[span["spanId"]] = span.get("parentSpanId") or None

    def _check(self, span: Any, problems: list[str], values: bool) -> dict[str, Any]:
        if not isinstance(span, dict):
            problems.append(f"expected a span object, got {type(span).__name__}")
            return {}
        span_id = span.get("spanId")
        if not isinstance(span_id, str) or not HEX16.fullmatch(span_id):
            problems.append(f"spanId must be 16 lowercase hex digits, got {repr_preview(span_id)}")
            return {}
        if span.get("traceId") != self.trace_id:
            problems.append(
                f"span {span_id} has traceId {repr_preview(span.get('traceId'))}, but the run is "
                f"{self.trace_id!r}"
            )
        if span_id in self.parents:
            problems.append(f"duplicate spanId {span_id}")
        parent = span.get("parentSpanId") or None
        if self.parents_first:
            if parent is not None and parent not in self.parents:
                problems.append(
                    f"span {span_id} has parentSpanId {repr_preview(parent)}, which does not come "
                    f"before it in the file (a missing parent, or a cycle)"
                )
        elif parent is not None and not (isinstance(parent, str) and HEX16.fullmatch(parent)):
            problems.append(f"span {span_id}: parentSpanId must be 16 lowercase hex digits")
        if not isinstance(span.get("name"), str):
            problems.append(f"span {span_id} has no name")
        if not _shape_problems(span, span_id, problems):
            return {}
        attributes = _decoded_attributes(span, span_id, problems)
        if attributes is not None and A.KIND in attributes:
            self._check_boundary(attributes, span_id, parent, problems, values)
        return attributes or {}

    def _check_boundary(
        self,
        attributes: dict[str, Any],
        span_id: str,
        parent: Any,
        problems: list[str],
        values: bool,
    ) -> None:
        """The sftrace attributes of a run, tool or LLM span."""
        kind = attributes[A.KIND]
        seq = attributes.get(A.SEQ)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            problems.append(f"span {span_id}: {A.SEQ} must be a non-negative integer")
        elif seq in self.seqs:
            problems.append(f"span {span_id}: duplicate {A.SEQ} {seq}")
        if kind not in _SFTRACE_KINDS:
            problems.append(f"span {span_id}: unknown {A.KIND} {kind!r}")
        for key in (A.INPUT, A.OUTPUT):
            if key in attributes:
                value = attributes[key]
                if not isinstance(value, str):
                    problems.append(f"span {span_id}: {key} must be a JSON string")
                    continue
                if values:
                    try:
                        orjson.loads(value)
                    except orjson.JSONDecodeError as exc:
                        problems.append(f"span {span_id}: {key} is not valid JSON ({exc})")
        if values:  # what a replay reads beside the output: checked up front too
            for key in _PATH_LISTS:
                if key in attributes:
                    problem = _path_list_problem(attributes[key])
                    if problem is not None:
                        problems.append(f"span {span_id}: {key} {problem}")
        if kind == A.KIND_RUN and parent is not None:
            problems.append(f"span {span_id}: the run span must have no parent")


# Attributes holding a JSON array of paths a replay applies to the rebuilt output.
_PATH_LISTS = (A.OUTPUT_NONFINITE, A.OUTPUT_UNSET)


def _path_list_problem(value: Any) -> str | None:
    """Why ``value`` is not the JSON text of an array of paths (arrays of strings and
    integers), None when it is."""
    if not isinstance(value, str):
        return "must be a JSON string"
    try:
        paths = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return f"is not valid JSON ({exc})"
    if not isinstance(paths, list) or not all(
        isinstance(path, list)
        and all(isinstance(step, str | int) and not isinstance(step, bool) for step in path)
        for path in paths
    ):
        return "must be an array of paths (arrays of object keys and array indexes)"
    return None


def _decoded_attributes(
    span: dict[str, Any], span_id: str, problems: list[str]
) -> dict[str, Any] | None:
    """The span's attributes decoded (the common case, a string value, inlined)."""
    attributes: dict[str, Any] = {}
    for item in span.get("attributes", []):
        value = item.get("value", _NO_VALUE)
        if type(value) is not dict:
            problems.append(
                f"span {span_id}: attribute {repr_preview(item.get('key'))} has no value"
            )
            return None
        if "stringValue" in value:
            attributes[item["key"]] = value["stringValue"]
        else:
            try:
                decoded = decode_value(value)
                if not fits_int64(decoded):
                    raise ValueError("an integer outside the 64-bit range OTLP allows")
            except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as exc:
                problems.append(
                    f"span {span_id}: attribute {repr_preview(item['key'])} has a malformed value "
                    f"({shorten(str(exc), 60)})"
                )
                return None
            attributes[item["key"]] = decoded
    return attributes


def fits_int64(value: Any) -> bool:
    """Every integer in ``value`` (an attribute value: scalars, lists, dicts) is a signed
    64-bit one, as OTLP's ``intValue`` is and as JSON output can write."""
    if isinstance(value, int):
        return -(1 << 63) <= value < 1 << 63
    if isinstance(value, list):
        return all(fits_int64(item) for item in value)
    if isinstance(value, dict):
        return all(fits_int64(item) for item in value.values())
    return True


def is_nanos(value: Any) -> bool:
    """A time in nanoseconds as OTLP/JSON writes it: a decimal string (or an integer)."""
    if type(value) is str:
        # Checked on every line of a bundle: string methods rather than the regex
        # (same rule: 1 to 19 ASCII digits, below 2**63; 18 digits or fewer always are).
        return (
            0 < len(value) <= 19
            and value.isascii()
            and value.isdigit()
            and (len(value) < 19 or int(value) < 1 << 63)
        )
    if isinstance(value, str):
        return _NANOS.fullmatch(value) is not None and int(value) < 1 << 63
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _shape_problems(span: dict[str, Any], span_id: str, problems: list[str]) -> bool:
    """The OTLP/JSON fields readers rely on have the types the format says; False when
    the attributes cannot even be read."""
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        if key in span and not is_nanos(span[key]):
            problems.append(f"span {span_id}: {key} must be a time in nanoseconds")
    kind = span.get("kind", 1)
    if not isinstance(kind, int) or isinstance(kind, bool) or not 0 <= kind <= 5:
        problems.append(f"span {span_id}: kind must be an integer from 0 to 5")
    if not isinstance(span.get("status", {}), dict):
        problems.append(f"span {span_id}: status must be an object")
    readable = _attribute_list_problems(span.get("attributes", []), f"span {span_id}", problems)
    events = span.get("events", [])
    if not isinstance(events, list):
        problems.append(f"span {span_id}: events must be a list")
        events = []
    for index, event in enumerate(events):
        where = f"span {span_id}: event {index}"
        if not isinstance(event, dict) or not isinstance(event.get("name"), str):
            problems.append(f"{where} must be an object with a name")
            continue
        if "timeUnixNano" in event and not is_nanos(event["timeUnixNano"]):
            problems.append(f"{where}: timeUnixNano must be a time in nanoseconds")
        _attribute_list_problems(event.get("attributes", []), where, problems)
    links = span.get("links", [])
    if not isinstance(links, list) or (links and not all(isinstance(link, dict) for link in links)):
        problems.append(f"span {span_id}: links must be a list of objects")
    return readable


def _attribute_list_problems(items: Any, where: str, problems: list[str]) -> bool:
    if not isinstance(items, list):
        problems.append(f"{where}: attributes must be a list")
        return False
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            problems.append(f"{where}: each attribute must be an object with a string key")
            return False
        if not isinstance(item.get("value", {}), dict):
            problems.append(f"{where}: attribute {repr_preview(item['key'])} has no value object")
            return False
    return True
