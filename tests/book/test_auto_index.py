"""tools/auto_index.py: config keys and Kafka APIs reach the index (genindex) at their first use per chapter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import auto_index  # noqa: E402

CHAPTER = """\
# Storage: where the records go

Set `segment.bytes` and `acks=all`, then send a `Fetch` request; JoinGroup comes later, and so does a
Metadata request. Another `segment.bytes`, another JoinGroup, `log`, fetch and a plain Fetch stay out.

```python
config = {"retention.ms": 1000}  # code blocks stay out
```

## `retention.ms` in a heading stays out

:::{glossary}
high watermark (HW)
HW
   The offset below which records are committed.
:::
"""


@pytest.mark.parametrize(
    ("literal", "found"),
    [
        ("acks", ("configuration keys", "acks")),
        ("acks=all", ("configuration keys", "acks")),
        ("min.insync.replicas = 2", ("configuration keys", "min.insync.replicas")),
        ('"enable.idempotence": true', ("configuration keys", "enable.idempotence")),
        ("Fetch", ("Kafka APIs", "Fetch")),
        ("FetchRequest", ("Kafka APIs", "Fetch")),
        ("ListOffsets v7", ("Kafka APIs", "ListOffsets")),
        ("OffsetForLeaderEpoch request", ("Kafka APIs", "OffsetForLeaderEpoch")),
        ("log", None),
        ("kafka-topics.sh", None),
        ("Fetcher", None),
    ],
)
def test_literal_entry(literal: str, found: tuple[str, str] | None) -> None:
    assert auto_index.literal_entry(literal) == found


def test_keys_come_from_kafkalite_and_the_glossary() -> None:
    keys = auto_index.config_keys()
    # broker, topic (log), producer, consumer, a broker synonym, a key only the glossary names
    for key in ("min.insync.replicas", "segment.bytes", "linger.ms", "isolation.level", "log.retention.ms"):
        assert key in keys
    assert "sasl.mechanism" in keys
    assert not any(key.startswith("kafkalite.") for key in keys)
    assert {"Produce", "Fetch", "ListOffsets", "LeaderAndIsr", "AddPartitionsToTxn"} <= auto_index.api_names()


def test_the_index_lists_each_name_once_per_chapter_at_its_first_use(tmp_path: Path) -> None:
    from sphinx.application import Sphinx

    (tmp_path / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
        "extensions = ['myst_parser', 'auto_index']\nmyst_enable_extensions = ['colon_fence']\n"
    )
    (tmp_path / "index.md").write_text(CHAPTER, encoding="utf-8")
    app = Sphinx(tmp_path, tmp_path, tmp_path / "_build", tmp_path / "_build" / ".doctrees", "html",
                 status=None, warning=None, freshenv=True)  # fmt: skip
    app.build()
    entries = [entry[1] for entry in app.env.domains["index"].entries["index"]]
    assert entries.count("segment.bytes (configuration key); Storage") == 1
    assert entries.count("configuration keys; segment.bytes") == 1
    assert "acks (configuration key); Storage" in entries
    assert "Fetch (Kafka API); Storage" in entries
    assert entries.count("JoinGroup (Kafka API); Storage") == 1
    assert "Metadata (Kafka API); Storage" in entries
    assert "Kafka APIs; Fetch" in entries
    assert not [e for e in entries if e.startswith("retention.ms")], "code blocks and headings stay out"
    assert "high watermark (HW)" in entries and "HW" in entries  # the glossary's own entries
    genindex = (tmp_path / "_build" / "genindex.html").read_text(encoding="utf-8")
    for shown in ("segment.bytes (configuration key)", "JoinGroup (Kafka API)", "high watermark (HW)"):
        assert shown in genindex
    page = (tmp_path / "_build" / "index.html").read_text(encoding="utf-8")
    assert page.count("Metadata request") == 1 and "JoinGroup comes later" in page, "the text is unchanged"
