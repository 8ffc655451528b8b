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
    """Benchmarks: storage against the raw file system, the produce path, fault runs."""


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


@bench.command("produce")
@click.option("--records", default=1_000_000, show_default=True, help="Records to produce in each case.")
@click.option("--record-size", default=100, show_default=True, help="Value bytes per record.")
@click.option("--seed", default=0, show_default=True, help="Simulation seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_produce(records: int, record_size: int, seed: int, as_json: bool) -> None:
    """One producer against a simulated cluster: 1 broker acks=1, and 3 brokers RF=3 acks=all."""
    from kafkalite.bench.produce import run_produce_bench

    result = run_produce_bench(records, record_size, seed=seed)
    click.echo(result.to_json() if as_json else result.table())


@bench.command("faults")
@click.option("--seeds", default=20, show_default=True, help="How many seeds to run.")
@click.option("--start", default=0, show_default=True, help="First seed.")
def bench_faults(seeds: int, start: int) -> None:
    """Random fault schedules against the cluster, checked by the history checker."""
    # Imported here: the CLI must work whatever state the faults module is in.
    from kafkalite.bench.faults import format_summary, run_faults

    click.echo(format_summary(run_faults(seeds, start)))


def main() -> None:
    """Console-script entry point."""
    kafkalite(prog_name="kafkalite")


if __name__ == "__main__":
    main()
