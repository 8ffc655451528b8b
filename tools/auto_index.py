"""Sphinx extension: index Kafka's configuration keys and APIs where each chapter first uses them.

Authors write a key or an API as inline code (`min.insync.replicas`, `acks=all`, `ListOffsets`,
`Fetch` request) and this puts it in the book's index (genindex), pointing at its first use in each
chapter, so nobody writes ``{index}`` by hand. Multi-word API names (JoinGroup, OffsetForLeaderEpoch)
are also found in running text; a one-word one (Fetch, Produce, Metadata) only as code or right before
"request", "response" or "API", since the plain word means something else.

The keys are the ones kafkalite declares (broker, topic, producer and consumer configurations) plus the
keys data/glossary.csv names; the APIs are kafkalite's ``ApiKey`` enum under Kafka's names (FETCH ->
Fetch, LIST_OFFSETS -> ListOffsets). Each use gets two entries: under the name itself, with the chapter
as sub-entry, and under "configuration keys" or "Kafka APIs", so the index also lists them all together.
Code blocks, headings and captions are left alone. Glossary terms need nothing from here: Sphinx's
glossary directive indexes its terms itself.
"""

from __future__ import annotations

import csv
import re
from functools import cache
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "data" / "glossary.csv"

# `key`, `key=value`, `key = value`, `"key"`: the key part of an inline literal.
LITERAL_KEY = re.compile(r'"?([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)*)"?\s*(?:[=:].*)?')
DOTTED_KEY = re.compile(r"\b[a-z][a-z0-9]*(?:\.[a-z0-9]+)+\b")
# `Fetch`, `FetchRequest`, `Fetch request`, `ListOffsets v7`: the API part of an inline literal.
LITERAL_API = re.compile(r"([A-Z][A-Za-z]+?)(?:Request|Response)?(?: (?:request|response|API)s?)?(?: v\d+)?")
# Headings, captions, code blocks, links and cross-references (a {term} role's text) keep their text.
SKIP = (
    nodes.title,
    nodes.caption,
    nodes.FixedTextElement,
    nodes.reference,
    nodes.term,
    addnodes.pending_xref,
    addnodes.toctree,
)


def api_name(member: str) -> str:
    """Kafka's name of an ``ApiKey`` member: LIST_OFFSETS -> ListOffsets."""
    return "".join(word.capitalize() for word in member.split("_"))


@cache
def config_keys() -> frozenset[str]:
    """Every configuration key kafkalite declares, and the keys the glossary names."""
    from kafkalite.config.broker import TOPIC_KEY_SYNONYMS, BrokerConfig
    from kafkalite.config.consumer import ConsumerConfig
    from kafkalite.config.producer import ProducerConfig
    from kafkalite.config.topic import TOPIC_KEYS

    # The declarations (kafkalite.config): broker, topic, producer and consumer keys, and broker synonyms.
    keys = set(BrokerConfig.config_keys()) | set(TOPIC_KEYS)
    keys |= set(TOPIC_KEY_SYNONYMS) | set(TOPIC_KEY_SYNONYMS.values())
    keys |= set(ProducerConfig.config_keys()) | set(ConsumerConfig.config_keys())
    if GLOSSARY.is_file():
        with GLOSSARY.open(encoding="utf-8") as f:
            for row in csv.DictReader(f):
                for literal in re.findall(r"`([^`]+)`", row["kafka_config_or_api"]):
                    keys.update(DOTTED_KEY.findall(literal.split("=")[0].split(" ")[0]))
    return frozenset(k for k in keys if not k.startswith("kafkalite."))


@cache
def api_names() -> frozenset[str]:
    """Kafka's names of every API kafkalite knows."""
    from kafkalite.protocol.api import ApiKey

    return frozenset(api_name(member.name) for member in ApiKey)


def literal_entry(text: str) -> tuple[str, str] | None:
    """("configuration keys" or "Kafka APIs", name) for an inline literal that names one, else None."""
    text = text.strip()
    key = LITERAL_KEY.fullmatch(text)
    if key and key.group(1) in config_keys():
        return "configuration keys", key.group(1)
    api = LITERAL_API.fullmatch(text)
    if api and api.group(1) in api_names():
        return "Kafka APIs", api.group(1)
    return None


@cache
def text_pattern() -> re.Pattern[str]:
    """API names in running text: multi-word names anywhere, one-word names before request/response/API."""
    multi = sorted((n for n in api_names() if sum(c.isupper() for c in n) > 1), key=len, reverse=True)
    single = sorted(n for n in api_names() if sum(c.isupper() for c in n) == 1)
    return re.compile(
        rf"\b(?:{'|'.join(multi)})\b|\b(?:{'|'.join(single)})(?= (?:requests?|responses?|APIs?)\b)"
    )


def chapter_title(document: nodes.document) -> str:
    """The chapter's title up to its colon: 'Partitioning: which partition ...' -> 'Partitioning'."""
    title = next(iter(document.findall(nodes.title)), None)
    # A semicolon would split the index entry into one more level.
    return title.astext().split(":")[0].replace(";", ",").strip() if title is not None else ""


class IndexFirstUse(SphinxTransform):
    """Insert an index entry (and its target) before the first use of each key and API in a document."""

    default_priority = 800  # before SphinxDomains (850) hands the index entries to the index domain

    def apply(self, **kwargs: Any) -> None:
        chapter = chapter_title(self.document) or self.env.docname
        seen: set[str] = set()
        for node in list(self.document.findall(nodes.Text)):
            if any(isinstance(a, SKIP) for a in _ancestors(node)):
                continue
            parent = node.parent
            if isinstance(parent, nodes.literal):
                found = literal_entry(parent.astext())
                if found and found[1] not in seen:
                    seen.add(found[1])
                    self._insert_before(parent, found, chapter)
            else:
                self._index_text(node, seen, chapter)

    def _entry(self, group: str, name: str, chapter: str) -> tuple[addnodes.index, nodes.target]:
        target_id = f"index-{self.env.new_serialno('index')}"
        kind = "configuration key" if group == "configuration keys" else "Kafka API"
        entries = [
            ("single", f"{name} ({kind}); {chapter}", target_id, "", None),
            ("single", f"{group}; {name}", target_id, "", None),
        ]
        index = addnodes.index(entries=entries)
        target = nodes.target("", "", ids=[target_id])
        self.document.note_explicit_target(target)
        return index, target

    def _insert_before(self, node: nodes.Node, found: tuple[str, str], chapter: str) -> None:
        index, target = self._entry(*found, chapter)
        position = node.parent.index(node)
        node.parent.insert(position, [index, target])

    def _index_text(self, node: nodes.Text, seen: set[str], chapter: str) -> None:
        """Split a text node around the first use of each API it names, with an entry before each."""
        text = str(node)
        pieces: list[nodes.Node] = []
        last = 0
        for match in text_pattern().finditer(text):
            name = match.group(0)
            if name in seen:
                continue
            seen.add(name)
            pieces.append(nodes.Text(text[last : match.start()]))
            pieces.extend(self._entry("Kafka APIs", name, chapter))
            last = match.start()
        if pieces:
            pieces.append(nodes.Text(text[last:]))
            node.parent.replace(node, [p for p in pieces if not (isinstance(p, nodes.Text) and not str(p))])


def _ancestors(node: nodes.Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def setup(app: Any) -> dict[str, Any]:
    app.add_transform(IndexFirstUse)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
