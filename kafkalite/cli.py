"""The ``kafkalite`` command: thin click wrappers around ``kafkalite.tools`` and ``kafkalite.bench``."""

from __future__ import annotations

import sys

import click

from kafkalite import __version__


@click.group()
@click.version_option(__version__, prog_name="kafkalite", message="%(prog)s %(version)s")
def kafkalite() -> None:
    """kafkalite: a small but real Apache Kafka in Python."""


@kafkalite.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--print-data-log", is_flag=True, help="Print each record's key and payload (implies --deep-iteration)."
)
@click.option("--deep-iteration", is_flag=True, help="Print a line per record, not only per batch.")
def dump_log(files: tuple[str, ...], print_data_log: bool, deep_iteration: bool) -> None:
    """Print the batches of .log segments, or the entries of .index / .timeindex files.

    Exits with status 1 if any damage (bad CRC, torn tail, bad index entry) was found.
    """
    from kafkalite.tools.dump_log import dump

    problems = 0
    for f in files:
        problems += dump(f, print_data_log=print_data_log, deep_iteration=deep_iteration, write=click.echo)
    if problems:
        click.echo(f"{problems} problem(s) found", err=True)
        sys.exit(1)


@kafkalite.group()
def bench() -> None:
    """Benchmarks against the raw file system."""


@bench.command("storage")
@click.option("--mb", default=256.0, show_default=True, help="MiB of batches to write.")
@click.option("--record-size", default=100, show_default=True, help="Value bytes per record.")
@click.option("--batch-bytes", default=16384, show_default=True, help="Target size of each batch.")
@click.option(
    "--dir", "directory", type=click.Path(file_okay=False), help="Where to write (default: a temp dir)."
)
@click.option("--repeats", default=3, show_default=True, help="Keep the best of this many runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_storage(
    mb: float,
    record_size: int,
    batch_bytes: int,
    directory: str | None,
    repeats: int,
    as_json: bool,
) -> None:
    """Log.append / Log.read against raw sequential write / read of the same bytes."""
    from kafkalite.bench.storage import run_storage_bench

    result = run_storage_bench(mb, record_size, batch_bytes, directory, repeats=repeats)
    click.echo(result.to_json() if as_json else result.table())


def main() -> None:
    """Console-script entry point."""
    kafkalite(prog_name="kafkalite")


if __name__ == "__main__":
    main()
