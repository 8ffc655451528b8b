"""MetadataImage and MetadataDelta: replaying records gives the state Kafka's image module would."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.metadata.delta import MetadataDelta, MetadataReplayError, replay_all
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UserScramCredentialRecord,
)
from kafkalite.metadata.serde import deserialize, serialize

T1 = uuid.UUID(int=1)


def _register(b: int, epoch: int) -> RegisterBrokerRecord:
    ep = BrokerEndpoint(name="PLAINTEXT", host=f"b{b}", port=9092, security_protocol=0)
    return RegisterBrokerRecord(broker_id=b, broker_epoch=epoch, end_points=(ep,))


def test_a_topic_its_partitions_and_a_leader_change() -> None:
    img = replay_all(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=20),
            _register(1, 10),
            _register(2, 11),
            UnfenceBrokerRecord(id=1, epoch=10),
            TopicRecord(name="orders", topic_id=T1),
            PartitionRecord(
                partition_id=0,
                topic_id=T1,
                replicas=(1, 2),
                isr=(1, 2),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            ),
            PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(2,), leader=2),
            PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(2, 1)),
            ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
            ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000),
        ],
        offset=9,
        epoch=1,
    )
    p = img.partition("orders", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (2, 1, 2, (2, 1))
    assert img.unfenced_brokers() == [1] and img.brokers[2].fenced
    assert img.configs[(2, "orders")] == {"retention.ms": "1000"}
    assert img.next_producer_id == 1000 and img.features == {"metadata.version": 20}
    assert (img.offset, img.epoch) == (9, 1)


def test_an_image_never_changes_under_a_delta() -> None:
    base = replay_all([_register(1, 5), TopicRecord(name="t", topic_id=T1)])
    delta = MetadataDelta(base)
    delta.replay(FenceBrokerRecord(id=1, epoch=5))
    delta.replay(PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1))
    after = delta.apply(2, 1)
    assert base.brokers[1].fenced and after.brokers[1].fenced, "a broker registers fenced"
    assert base.topic("t").partitions == {} and after.topic("t").partitions[0].leader == 1
    assert delta.changed == {(T1, 0): after.topic("t").partitions[0]}


def test_removing_a_topic_drops_its_partitions_and_configs() -> None:
    base = replay_all(
        [
            TopicRecord(name="t", topic_id=T1),
            PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1),
            ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy", value="compact"),
        ]
    )
    delta = MetadataDelta(base)
    delta.replay(RemoveTopicRecord(topic_id=T1))
    img = delta.apply(3, 1)
    assert img.topic("t") is None and img.topics == {} and img.configs == {}
    assert set(delta.deleted_topics) == {T1}


def test_acls_and_scram_credentials() -> None:
    acl = AccessControlEntryRecord(
        id=T1,
        resource_type=2,
        resource_name="t",
        pattern_type=3,
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    )
    img = replay_all(
        [
            acl,
            UserScramCredentialRecord(
                name="a", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096
            ),
        ]
    )
    assert img.acls[T1] == acl and img.scram[("a", 1)].iterations == 4096
    assert replay_all([RemoveAccessControlEntryRecord(id=T1)], img).acls == {}


@pytest.mark.parametrize(
    "record",
    [
        FenceBrokerRecord(id=1, epoch=99),
        UnfenceBrokerRecord(id=7, epoch=5),
        PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=77), replicas=(1,), isr=(1,), leader=1),
        PartitionChangeRecord(partition_id=3, topic_id=T1, leader=1),
        RemoveTopicRecord(topic_id=uuid.UUID(int=77)),
    ],
)
def test_a_record_that_does_not_fit_the_image_is_refused(record) -> None:
    base = replay_all([_register(1, 5), TopicRecord(name="t", topic_id=T1)])
    with pytest.raises(MetadataReplayError):
        MetadataDelta(base).replay(record)


def _script(seed: int, n: int) -> list:
    """A valid record sequence drawn at random (each record fits the state before it)."""
    rng = random.Random(seed)
    out, brokers, topics, parts = [], {}, {}, {}
    for i in range(n):
        op = rng.randrange(8)
        if op == 0 or not brokers:
            b = rng.randint(1, 4)
            brokers[b] = i
            out.append(_register(b, i))
        elif op == 1:
            b = rng.choice(sorted(brokers))
            out.append(
                (FenceBrokerRecord if rng.random() < 0.5 else UnfenceBrokerRecord)(id=b, epoch=brokers[b])
            )
        elif op == 2:
            tid = uuid.UUID(int=rng.getrandbits(64) + 1)
            name = f"t{rng.randrange(4)}"
            if name in topics:
                continue
            topics[name] = tid
            out.append(TopicRecord(name=name, topic_id=tid))
            for p in range(rng.randint(1, 3)):
                reps = tuple(rng.sample(range(1, 5), 2))
                parts[(tid, p)] = True
                out.append(
                    PartitionRecord(partition_id=p, topic_id=tid, replicas=reps, isr=reps, leader=reps[0])
                )
        elif op == 3 and parts:
            tid, p = rng.choice(sorted(parts))
            out.append(
                PartitionChangeRecord(
                    partition_id=p, topic_id=tid, isr=(rng.randint(1, 4),), leader=rng.choice((-2, -1, 1, 2))
                )
            )
        elif op == 4 and topics:
            name = rng.choice(sorted(topics))
            tid = topics.pop(name)
            parts = {k: v for k, v in parts.items() if k[0] != tid}
            out.append(RemoveTopicRecord(topic_id=tid))
        elif op == 5:
            out.append(
                ConfigRecord(
                    resource_type=2,
                    resource_name=f"t{rng.randrange(4)}",
                    name="k",
                    value=rng.choice((None, "1", "2")),
                )
            )
        elif op == 6:
            out.append(ProducerIdsRecord(broker_id=1, next_producer_id=1000 * i))
        else:
            out.append(NoOpRecord())
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), cuts=st.lists(st.integers(0, 60), max_size=6))
def test_replaying_in_any_number_of_deltas_gives_the_same_image(seed: int, cuts: list[int]) -> None:
    records = [deserialize(serialize(r))[0] for r in _script(seed, 60)]
    whole = replay_all(records, offset=len(records) - 1, epoch=1)
    img, start = MetadataImage(), 0
    for end in [*sorted(set(cuts)), len(records)]:
        img = replay_all(records[start:end], img, offset=end - 1, epoch=1)
        start = max(start, end)
    assert img == whole
    assert img.summary() == whole.summary()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_an_image_written_as_records_replays_to_itself(seed: int) -> None:
    from kafkalite.metadata.image_writer import image_records

    records = [*_script(seed, 80), FeatureLevelRecord(name="metadata.version", feature_level=20)]
    records.append(
        AccessControlEntryRecord(
            id=uuid.UUID(int=seed + 5), resource_type=2, resource_name="t", pattern_type=3,
            principal="User:a", host="*", operation=3, permission_type=3,
        )
    )  # fmt: skip
    records.append(
        UserScramCredentialRecord(
            name="a", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096
        )
    )
    img = replay_all(records, offset=len(records) - 1, epoch=3)
    written = image_records(img)
    assert type(written[0]).__name__ == "FeatureLevelRecord" and written[0].name == "metadata.version"
    again = replay_all([deserialize(serialize(r))[0] for r in written], offset=img.offset, epoch=img.epoch)
    assert again == img
