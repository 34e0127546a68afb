"""``configure(fsync=...)`` / ``$SFTRACE_FSYNC``: whether finished bundles are forced to
disk. Without fsync a bundle is written and placed the same way (atomically, whole), only
nothing waits for the disk; a killed process loses nothing either way (the SIGKILL test in
``test_recover.py`` runs both)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

import sftrace
from sftrace import ConfigError, configure, load_bundle, record, trace_tool, validate_bundle
from sftrace._record import config as _config


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city, "weather": "sunny"}


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def _record_one(path: Path) -> Path:
    with record("fsync", output=path):
        lookup("Faro")
    return path


def _assert_whole(path: Path) -> None:
    assert validate_bundle(path, verify_integrity=True) == []
    bundle = load_bundle(path, verify_integrity=True)
    assert [call.output for call in bundle.calls] == [{"city": "Faro", "weather": "sunny"}]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no journal left behind


def test_bundles_are_fsynced_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SFTRACE_FSYNC", raising=False)
    synced = _count_fsyncs(monkeypatch)
    path = _record_one(tmp_path / "out" / "default.sftrace")
    names = {Path(name).name for name in synced}
    assert {"spans.jsonl", "manifest.json", "checksums.sha256", "out"} <= names
    _assert_whole(path)


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_without_fsync_nothing_is_forced_to_disk_and_the_bundle_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "argument":
        configure(tracer_provider=_config.get_state().provider, fsync=False)
    else:
        monkeypatch.setenv("SFTRACE_FSYNC", "off")
        configure(tracer_provider=_config.get_state().provider)
    synced = _count_fsyncs(monkeypatch)
    path = _record_one(tmp_path / "out" / "quick.sftrace")
    assert synced == []
    _assert_whole(path)
    # Replacing a bundle (overwrite=True) works the same way without fsync.
    with record("fsync", output=path, overwrite=True):
        lookup("Faro")
    assert synced == []
    _assert_whole(path)


def test_the_setting_applies_to_runs_started_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """configure() again on the same provider switches fsync back on for the next run."""
    provider = _config.get_state().provider
    configure(tracer_provider=provider, fsync=False)
    synced = _count_fsyncs(monkeypatch)
    _record_one(tmp_path / "a.sftrace")
    assert synced == []
    configure(tracer_provider=provider, fsync=True)
    _record_one(tmp_path / "b.sftrace")
    assert synced


def test_an_application_exporter_takes_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BundleSpanExporter on an application's provider (not through record()) too."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = sftrace.BundleSpanExporter(tmp_path / "bundles", fsync=False)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure(tracer_provider=provider, bundle_dir=tmp_path / "unused")
    synced = _count_fsyncs(monkeypatch)
    with record("fsync"):
        lookup("Faro")
    provider.shutdown()
    written = list((tmp_path / "bundles").iterdir())
    assert len(written) == 1
    assert validate_bundle(written[0], verify_integrity=True) == []
    # record()'s own exporter fsynced its bundle; the application's exporter did not.
    assert not any(str(tmp_path / "bundles") in name for name in synced)
    assert any(str(tmp_path / "unused") in name for name in synced)


@pytest.mark.parametrize("value", ["yes please", "2"])
def test_a_bad_environment_value_is_a_clear_error_for_configure(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SFTRACE_FSYNC", value)
    with pytest.raises(ConfigError, match=rf"SFTRACE_FSYNC: '{value}' is neither true") as info:
        configure(tracer_provider=_config.get_state().provider)
    assert "unset it" in str(info.value)


def test_a_bad_argument_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _config.get_state()
    with pytest.raises(ConfigError, match="fsync must be True or False, got 'no'"):
        configure(tracer_provider=state.provider, fsync="no")  # type: ignore[arg-type]
    assert _config.get_state() is state  # a ConfigError changes nothing


def test_a_bad_environment_value_never_breaks_a_run_that_configured_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """record() with no configure() first: the run is recorded, fsynced (the safe
    default), and the log says why the variable was ignored."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    application = TracerProvider()  # the global provider record() attaches to by itself
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: application)
    _config.reset()
    monkeypatch.setenv("SFTRACE_FSYNC", "sometimes")
    synced = _count_fsyncs(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        path = _record_one(tmp_path / "self.sftrace")
    assert synced
    _assert_whole(path)
    assert "SFTRACE_FSYNC: 'sometimes' is neither true" in caplog.text
    assert _config.get_state().provider is application
