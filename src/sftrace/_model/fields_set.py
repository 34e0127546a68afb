"""Which fields of a pydantic model result were set, which its JSON does not say.

A model dumps every field, defaults included, so a replay rebuilding it from the
recorded JSON gets a model whose every field counts as set: ``model_fields_set`` and
``model_dump(exclude_unset=True)`` (a common way to build the next request from a
parameters model) then differ from the recorded run's, and an unchanged agent diverges.
The fields left unset are recorded as paths (``sftrace.output.unset``) and unset again
on the rebuilt model.

Only results that are models, or lists, tuples and dicts whose items are, are walked,
through the models' own fields; at most :data:`MAX_MODELS` models a result.
"""

from __future__ import annotations

import sys
from typing import Any, Final

__all__ = ["MAX_MODELS", "unset_again", "unset_paths"]

MAX_MODELS: Final = 10_000

Path = list[str | int]


def _base_model() -> type | None:
    """pydantic's ``BaseModel`` when pydantic is loaded (results can be models only then)."""
    main = sys.modules.get("pydantic.main")
    return getattr(main, "BaseModel", None) if main is not None else None


def unset_paths(value: Any) -> list[Path]:
    """The paths of the fields of ``value``'s models that were not set (each the path of
    its model, then the field's name); empty when there are none, or no model."""
    model = _base_model()
    if model is None or not _holds_models(value, model):
        return []
    found: list[Path] = []
    budget = [MAX_MODELS]
    _walk(value, [], model, found, budget)
    return found


def _holds_models(value: Any, model: type) -> bool:
    if isinstance(value, model):
        return True
    if isinstance(value, list | tuple) and value:
        return isinstance(value[0], model)
    if isinstance(value, dict) and value:
        return isinstance(next(iter(value.values())), model)
    return False


def _walk(value: Any, path: Path, model: type, found: list[Path], budget: list[int]) -> None:
    if budget[0] <= 0:
        return
    if isinstance(value, model):
        budget[0] -= 1
        fields = type(value).model_fields  # type: ignore[attr-defined]
        given = value.model_fields_set  # type: ignore[attr-defined]
        for name in fields:
            if name not in given:
                found.append([*path, name])
            else:
                child = getattr(value, name, None)
                if _holds_models(child, model):
                    _walk(child, [*path, name], model, found, budget)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if isinstance(item, model):
                _walk(item, [*path, index], model, found, budget)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, model) and isinstance(key, str):
                _walk(item, [*path, key], model, found, budget)


def unset_again(value: Any, paths: Any) -> None:
    """Unset the recorded fields ``paths`` on ``value``, a result rebuilt from its JSON
    (the paths that lead to no model of it are skipped: an older or edited bundle)."""
    model = _base_model()
    if model is None or not isinstance(paths, list):
        return
    for path in paths:
        if not isinstance(path, list) or not path or not isinstance(path[-1], str):
            continue
        owner = _at(value, path[:-1])
        if isinstance(owner, model):
            fields_set = getattr(owner, "__pydantic_fields_set__", None)
            if isinstance(fields_set, set):
                fields_set.discard(path[-1])


def _at(value: Any, path: list[Any]) -> Any:
    for step in path:
        if isinstance(step, int) and isinstance(value, list | tuple) and -1 < step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict):
            value = value.get(step)
        elif isinstance(step, str) and step in (getattr(type(value), "model_fields", None) or ()):
            value = getattr(value, step, None)  # a field of the model, nothing else
        else:
            return None
    return value
