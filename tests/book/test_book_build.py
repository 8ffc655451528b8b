"""The book build reads (executes) chapters in parallel: every Sphinx extension it loads must allow it."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import parallel_read  # noqa: E402


def _start_order(chunks: list[list[str]], nproc: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The order in which Sphinx's ParallelTasks starts ``chunks`` when each runs long.

    Its processes are stand-ins that record their start and report done only once every task is queued,
    as a chapter's kernel is still running when Sphinx has queued the others.
    """
    from sphinx.util import parallel

    started: list[str] = []
    queued = False

    class Pipe:
        def __init__(self) -> None:
            self.running = False

        def poll(self) -> bool:
            return queued and self.running

        def recv(self) -> tuple[bool, list[object], None]:
            return False, [], None

    class Process:
        def __init__(self, target: object, args: tuple[Pipe, object, list[str]]) -> None:
            self.pipe, _, self.chunk = args

        def start(self) -> None:
            started.extend(self.chunk)
            self.pipe.running = True

        def join(self) -> None:
            pass

    def pipe(duplex: bool) -> tuple[Pipe, Pipe]:
        end = Pipe()
        return end, end

    monkeypatch.setattr(
        parallel.multiprocessing, "get_context", lambda method: SimpleNamespace(Process=Process)
    )
    monkeypatch.setattr(parallel.multiprocessing, "Pipe", pipe)
    tasks = parallel.ParallelTasks(nproc)
    for chunk in chunks:
        tasks.add_task(lambda docs: None, chunk)
    queued = True
    tasks.join()
    return started


@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_chapters_start_in_the_order_given(nproc: int, monkeypatch: pytest.MonkeyPatch) -> None:
    docnames = ["a", "b", "c", "d", "e"]
    chunks = parallel_read.one_per_task(docnames, nproc)
    assert sorted(chunks) == [[name] for name in docnames], "one chapter per task, each once"
    assert _start_order(chunks, nproc, monkeypatch) == docnames


def test_listed_chapters_longest_first_then_the_others() -> None:
    class App:
        class config:
            parallel_read_first = ["book/spark", "book/missing", "book/transactions", "book/acks"]

    docnames = ["book/acks", "book/new", "book/spark", "book/transactions", "book/wire"]
    parallel_read.longest_first(App, None, docnames)
    assert docnames == ["book/spark", "book/transactions", "book/acks", "book/new", "book/wire"]


def test_every_extension_allows_parallel_reading(tmp_path: Path) -> None:
    """With _config.yml as it is, Sphinx would read in parallel rather than fall back to one chapter at a time."""
    from jupyter_book.config import get_final_config
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    config, _ = get_final_config(
        user_yaml=ROOT / "_config.yml",
        cli_config={"latex_individualpages": False, "external_toc_path": str(ROOT / "_toc.yml")},
        sourcedir=ROOT,
        use_external_toc=True,
    )
    for name in config["parallel_read_first"]:
        assert (ROOT / f"{name}.md").is_file(), f"parallel_read_first names {name}, which is not a chapter"
    with patch_docutils(None), docutils_namespace():
        app = Sphinx(ROOT, None, tmp_path / "html", tmp_path / "doctrees", "html", confoverrides=config,
                     status=None, parallel=2)  # fmt: skip
        unsafe = [
            n for n, e in app.extensions.items() if not (e.parallel_read_safe and e.parallel_write_safe)
        ]
        assert unsafe == []
        assert app.is_parallel_allowed("read") and app.is_parallel_allowed("write")


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_build_book_refuses_no_jobs(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    import build_book

    with pytest.raises(SystemExit):
        build_book.main(["--jobs", jobs])
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_chapter_runtimes_longest_first(tmp_path: Path) -> None:
    import pickle

    import build_book

    assert build_book.chapter_runtimes(tmp_path) == {}, "no environment, no times"
    env = SimpleNamespace(
        nb_metadata={
            "book/acks": {"exec_data": {"runtime": 40.5}},
            "book/spark": {"exec_data": {"runtime": 120.0}},
            "book/glossary": {"exec_data": None},  # read from a cache: nothing executed
            "book/intro": {},
        }
    )
    (tmp_path / "environment.pickle").write_bytes(pickle.dumps(env))
    runtimes = build_book.chapter_runtimes(tmp_path)
    assert list(runtimes.items()) == [("book/spark", 120.0), ("book/acks", 40.5)], runtimes
