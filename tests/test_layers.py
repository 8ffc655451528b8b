"""The package's layers: every module imports only from its own package or from packages in lower layers.

Read with the standard library's ``ast`` from the source files, so an import inside a function counts as
much as one at the top (hiding an upward import in a function would only hide the cycle, not break it).
The order, lowest first; packages on one line are siblings and may not import each other:

    errors, clock, common      the ground floor: errors, clocks, algorithms both sides share
    config                     settings with Kafka's names (parse helpers, broker, topic, producer, consumer)
    protocol                   the messages, their wire codec and the internal topics' record formats
    records                    record batches
    storage                    the log on disk
    net                        the simulator's network, and that network stretched over TCP (bridge)
    coordination | raft        the ZooKeeper-like store; KRaft's quorum (Raft over the storage log, run on net)
    metadata                   KRaft's metadata records, the image replayed from them, the quorum controller
    security                   ACLs, SASL, TLS
    client | broker            the producer and consumer; the broker (neither imports the other)
    host                       the real driver and the facade: TCP server, processes, admin client, Cluster
    datasets | spark | viz     what the chapters build on a running kafkalite
    harness                    the checker, fault schedules and benches (the Spark bench drives spark/)
    tools                      the command-line tools' logic
    cli                        click wiring
    __main__                   `python -m kafkalite`: the cli, run as a module

Decided where the code forced it: ``net/bridge.py`` stays in ``net`` (not ``host``) because the
coordination store's RPC server (``coordination/remote.py``) speaks the bridge's frames and serves its
links, and the bridge needs nothing above ``net``; ``harness`` sits one layer above ``spark`` because the
Spark bench drives the Spark source. ``kafkalite/__init__.py`` (the public face) may import anything;
names imported from the package root itself (``from kafkalite import __version__``) are only for ``cli``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kafkalite

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(line.split())
    for line in (
        "errors clock common",
        "config",
        "protocol",
        "records",
        "storage",
        "net",
        "coordination raft",
        "metadata",
        "security",
        "client broker",
        "host",
        "datasets spark viz",
        "harness",
        "tools",
        "cli",
        "__main__",
    )
)
LAYER_OF = {pkg: i for i, names in enumerate(LAYERS) for pkg in names}
ROOT = Path(kafkalite.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top(dotted: str) -> str:
    """``kafkalite.storage.log`` -> ``storage``; ``kafkalite`` -> ``""`` (the package root)."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every kafkalite module ``path`` imports, at any depth, as (line, dotted name)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == "kafkalite":  # from kafkalite import x: x is a subpackage or a root name
                for a in node.names:
                    sub = ROOT / a.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").is_file()
                    found.append((node.lineno, f"kafkalite.{a.name}" if is_module else "kafkalite"))
            else:
                found.append((node.lineno, target))
    return [(line, t) for line, t in found if t == "kafkalite" or t.startswith("kafkalite.")]


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_package_has_a_layer() -> None:
    unplaced = sorted(
        {_top(_module_name(p)) for p in _modules()} - set(LAYER_OF) - {""}
    )  # "" is kafkalite/__init__.py
    assert not unplaced, f"modules outside every layer (give them a room in LAYERS): {unplaced}"


def test_imports_only_go_down() -> None:
    wrong = []
    for path in _modules():
        module = _module_name(path)
        own = _top(module)
        if own == "":  # kafkalite/__init__.py: the public face may import anything
            continue
        for line, target in _imports(path):
            other = _top(target)
            if other == own:
                continue
            if other == "":
                if own != "cli":
                    wrong.append(f"{module}:{line} imports the package root (only cli may)")
                continue
            mine, theirs = LAYER_OF.get(own), LAYER_OF.get(other)
            if mine is None or theirs is None or theirs >= mine:
                how = "a sibling" if mine is not None and mine == theirs else "upward"
                if mine is None or theirs is None:
                    how = "outside the layers"
                wrong.append(f"{module}:{line} -> {target} ({own} -> {other}: {how})")
    assert not wrong, f"{len(wrong)} imports break the layer order:\n" + "\n".join(wrong)


def test_the_layer_table_names_each_package_once() -> None:
    names = [pkg for layer in LAYERS for pkg in layer]
    assert len(names) == len(set(names)), f"a package sits in two layers: {names}"
