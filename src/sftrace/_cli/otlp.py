"""``sftrace push`` and ``sftrace import``: bundles to and from OpenTelemetry collectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sftrace._cli.main import EXIT_BAD_INPUT, EXIT_CHANGED, bad_input_policy
from sftrace._cli.migrate import PEER_SOURCES, import_peers
from sftrace._cli.output import echo
from sftrace._cli.phoenix import (
    import_phoenix,
    phoenix_options,
    reject_phoenix_options,
    report_imported,
)
from sftrace._export.collector_import import import_otlp_files
from sftrace._export.otlp_settings import ENCODERS, PROTOCOLS
from sftrace._export.push import exporter_logs_silenced, push_bundles
from sftrace._model.text import pluralize


def register(group: click.Group) -> None:
    group.add_command(push_command)
    group.add_command(import_command)


def _header(value: str) -> tuple[str, str]:
    key, sep, rest = value.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"expected KEY=VALUE, got {value!r}")
    return key.strip(), rest


@click.command("push")
@click.argument("bundles", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--endpoint",
    metavar="URL",
    help="Collector URL, e.g. http://127.0.0.1:4318 (HTTP) or http://127.0.0.1:4317 (gRPC). "
    "Default: $SFTRACE_OTLP_ENDPOINT, $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
    "$OTEL_EXPORTER_OTLP_ENDPOINT, else OpenTelemetry's local default.",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    help="OTLP protocol. Default: $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="A header for every request (repeatable). Default: $OTEL_EXPORTER_OTLP_HEADERS.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds per request. Default: $OTEL_EXPORTER_OTLP_TIMEOUT, else 10.",
)
@click.option(
    "--encoder",
    type=click.Choice(ENCODERS),
    help="sftrace (OTLP/JSON over HTTP), official (the OpenTelemetry protobuf exporters) or "
    "auto (sftrace's for HTTP, protobuf if the collector refuses JSON; official for gRPC). "
    "Default: $SFTRACE_OTLP_ENCODER, else auto.",
)
def push_command(
    bundles: tuple[Path, ...],
    endpoint: str | None,
    protocol: str | None,
    headers: tuple[str, ...],
    timeout: float | None,
    encoder: str | None,
) -> None:
    """Send recorded bundles to an OTLP collector, with their original ids and timestamps.

    A bundle with a note of the spans live export could not send
    (BUNDLE.otlp-unsent.json) sends only those, then removes the note."""
    parsed: dict[str, str] | None = None
    if headers:
        try:
            parsed = dict(_header(value) for value in headers)
        except click.BadParameter as exc:
            exc.param_hint = "'--header'"
            raise
    with bad_input_policy(), exporter_logs_silenced():
        results = push_bundles(
            bundles,
            endpoint=endpoint,
            protocol=protocol,
            headers=parsed,
            timeout=timeout,
            encoder=encoder,
        )
    failed = 0
    for result in results:
        if result.ok:
            echo(f"pushed {result.bundle} (run {result.run_id}, {pluralize(result.spans, 'span')})")
        else:
            failed += 1
            echo(f"sftrace: error: {result.error}", err=True)
    if failed:
        raise click.exceptions.Exit(EXIT_CHANGED)


@click.command("import")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write the bundles to (created if missing).",
)
@click.option("--overwrite", is_flag=True, help="Replace bundles that already exist.")
@click.option(
    "--from",
    "source",
    type=click.Choice(("otlp", *PEER_SOURCES, "phoenix")),
    default="otlp",
    show_default=True,
    help="What to read: FILES of the collector's OTLP/JSON output, stepfork .sftrace "
    "bundles or agenttrace-vcr recordings (JSON); or, with no FILES, a Phoenix server "
    "(--url, --project).",
)
@phoenix_options
def import_command(
    files: tuple[Path, ...], output: Path, overwrite: bool, source: str, **phoenix: Any
) -> None:
    """Turn the collector's file-exporter output (OTLP/JSON lines), another tool's
    recordings (--from stepfork|agenttrace), or runs stored in Phoenix (--from phoenix)
    into bundles, one per run.

    Exit status: 0 when every run found was written, 1 when some were skipped (the reason
    is printed), 2 when a file or the backend cannot be read or holds no run (nothing is
    written then).
    """
    if source == "phoenix":
        import_phoenix(files, output, overwrite, **phoenix)
        return
    if not files:
        echo(f"sftrace: error: sftrace import --from {source} needs FILES to read", err=True)
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    reject_phoenix_options(source, phoenix)
    if source != "otlp":
        import_peers(source, files, output, overwrite)
        return
    with bad_input_policy():
        result = import_otlp_files(files, output=output, overwrite=overwrite)
    report_imported(result, f"{len(files)} file(s)")
