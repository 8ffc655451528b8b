"""ACLs and SCRAM credentials in KRaft mode: CreateAcls, DeleteAcls and AlterUserScramCredentials become
metadata records written by the active controller, with Kafka's answers and error codes; a broker forwards
them there, and every broker's authorizer and SCRAM credentials follow the replayed log."""

from __future__ import annotations

import hashlib
import os
import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.metadata.controller.acl_control import _filter, acl_binding, create_acls, delete_acls
from kafkalite.metadata.controller.scram_control import alter_credentials
from kafkalite.metadata.delta import replay_all
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import AccessControlEntryRecord
from kafkalite.protocol.security_admin import (
    AclCreation,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsFilter,
    DeleteAclsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.scram import ScramClient, ScramCredential, ScramServer, salted_password
from tests.metadata.kraft_harness import KRaftQuorum

TOPIC, GROUP, LITERAL, PREFIXED, READ, WRITE, ALLOW, DENY = 2, 3, 3, 4, 3, 4, 3, 2
INVALID_REQUEST, UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND = 42, 33, 91
DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 92, 93


@pytest.fixture
def quorum():
    q = KRaftQuorum(seed=11)
    yield q
    q.close()


def acl(name: str, principal: str = "User:alice", op: int = READ, perm: int = ALLOW, **kw) -> AclCreation:
    return AclCreation(resource_type=kw.pop("rtype", TOPIC), resource_name=name, principal=principal, host="*",
                       operation=op, permission_type=perm, **kw)  # fmt: skip


def acl_binding_of(x) -> AclBinding:
    """A creation or a matched ACL as the binding it names."""
    pattern = getattr(x, "resource_pattern_type", None) or x.pattern_type
    return AclBinding(
        ResourcePattern(ResourceType(x.resource_type), x.resource_name, PatternType(pattern)),
        AccessControlEntry(x.principal, x.host, Operation(x.operation), Permission(x.permission_type)),
    )


def any_filter(**kw) -> DeleteAclsFilter:
    return DeleteAclsFilter(**{"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                               "permission_type": 1, **kw})  # fmt: skip


def upsert(user: str, password: str, mechanism: int = 1, iterations: int = 4096) -> ScramCredentialUpsertion:
    salt = os.urandom(16)
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return ScramCredentialUpsertion(name=user, mechanism=mechanism, iterations=iterations, salt=salt,
                                    salted_password=salted_password(name, password, salt, max(iterations, 1)))  # fmt: skip


def test_create_acls_writes_one_record_per_new_acl(quorum) -> None:
    q = quorum
    resp = q.request(
        CreateAclsRequest(
            creations=(acl("orders"), acl("orders"), acl("pay-", resource_pattern_type=PREFIXED))
        )
    )
    assert [r.error_code for r in resp.results] == [0, 0, 0]
    img = q.image()
    assert sorted((a.resource_name, a.pattern_type) for a in img.acls.values()) == [
        ("orders", LITERAL),
        ("pay-", PREFIXED),
    ]
    assert all(i == a.id and a.id.version == 4 for i, a in img.acls.items())
    again = q.request(CreateAclsRequest(creations=(acl("orders"),)))
    assert again.results[0].error_code == 0 and q.image().acls == img.acls, (
        "an existing ACL: success, no record"
    )
    # every node replays the same ACLs
    assert q.net.run_until(lambda: all(b.loader.image.acls == img.acls for b in q.brokers.values()), 2000)


@pytest.mark.parametrize(
    "creation, reason",
    [
        (acl("t", rtype=1), "resource type"),  # ANY
        (acl("t", resource_pattern_type=2), "pattern type"),  # MATCH
        (acl("t", op=1), "operation"),  # ANY
        (acl("t", perm=1), "permission"),  # ANY
        (acl("", op=READ), "empty"),
        (acl("t", principal="alice"), "principal"),
        (acl("other", rtype=4), "kafka-cluster"),
        (acl("t", rtype=99), "invalid ACL"),
    ],
)
def test_a_refused_acl_is_invalid_request_and_the_others_go_ahead(quorum, creation, reason) -> None:
    resp = quorum.request(CreateAclsRequest(creations=(creation, acl("good"))))
    bad, good = resp.results
    assert bad.error_code == INVALID_REQUEST and reason in bad.error_message
    assert good.error_code == 0 and [a.resource_name for a in quorum.image().acls.values()] == ["good"]


def test_delete_acls_removes_what_each_filter_matches(quorum) -> None:
    q = quorum
    q.request(CreateAclsRequest(creations=(acl("a"), acl("a", op=WRITE), acl("b", principal="User:bob"),
                                           acl("g", rtype=GROUP))))  # fmt: skip
    resp = q.request(
        DeleteAclsRequest(filters=(
            any_filter(resource_type_filter=TOPIC, resource_name_filter="a", operation=READ),
            any_filter(resource_type_filter=TOPIC, resource_name_filter="a"),  # overlaps the first
            any_filter(principal_filter="User:nobody"),
            any_filter(pattern_type_filter=0),
        ))
    )  # fmt: skip
    first, second, none, bad = resp.filter_results
    assert [(m.resource_name, m.operation) for m in first.matching_acls] == [("a", READ)]
    assert sorted((m.resource_name, m.operation) for m in second.matching_acls) == [("a", READ), ("a", WRITE)]
    assert none.error_code == 0 and none.matching_acls == ()
    assert bad.error_code == INVALID_REQUEST
    assert sorted(a.resource_name for a in q.image().acls.values()) == ["b", "g"]


def test_scram_upsertions_store_kafkas_keys_and_deletions_remove_them(quorum) -> None:
    q = quorum
    up = upsert("alice", "alice-secret")
    resp = q.request(AlterUserScramCredentialsRequest(upsertions=(up, upsert("bob", "bob-secret", 2, 8192))))
    assert [(r.user, r.error_code) for r in resp.results] == [("alice", 0), ("bob", 0)]
    cred = q.image().scram[("alice", 1)]
    want = ScramCredential.from_salted("SCRAM-SHA-256", up.salted_password, up.salt, 4096)
    assert (cred.salt, cred.stored_key, cred.server_key, cred.iterations) == (
        want.salt, want.stored_key, want.server_key, 4096)  # fmt: skip
    assert cred.stored_key != hashlib.sha256(up.salted_password).digest(), "never the salted password itself"
    gone = q.request(
        AlterUserScramCredentialsRequest(deletions=(ScramCredentialDeletion(name="bob", mechanism=2),))
    )
    assert gone.results[0].error_code == 0 and set(q.image().scram) == {("alice", 1)}


def test_scram_refusals_are_kafkas(quorum) -> None:
    q = quorum
    resp = q.request(
        AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion(name="ghost", mechanism=1),
                       ScramCredentialDeletion(name="twice", mechanism=1)),
            upsertions=(upsert("", "x"), upsert("few", "x", iterations=1000), upsert("many", "x", iterations=20000),
                        upsert("mech", "x", mechanism=3), upsert("twice", "x"), upsert("ok", "x")),
        )
    )  # fmt: skip
    got = {r.user: r.error_code for r in resp.results}
    assert got == {"ghost": RESOURCE_NOT_FOUND, "": UNACCEPTABLE_CREDENTIAL, "few": UNACCEPTABLE_CREDENTIAL,
                   "many": UNACCEPTABLE_CREDENTIAL, "mech": UNSUPPORTED_SASL_MECHANISM, "twice": RESOURCE_NOT_FOUND,
                   "ok": 0}  # fmt: skip
    dup = q.request(AlterUserScramCredentialsRequest(upsertions=(upsert("d", "x"), upsert("d", "y"))))
    assert [(r.user, r.error_code) for r in dup.results] == [("d", DUPLICATE_RESOURCE)]
    assert set(q.image().scram) == {("ok", 1)}, "the users that passed are written, no others"


# ------------------------------------------------------------------------------ through the brokers


@pytest.fixture
def secured():
    c = KRaftCluster(brokers=3, controllers=3, seed=3,
                     config={"authorizer.class.name": "kafkalite", "super.users": "User:admin"})  # fmt: skip
    yield c
    c.close()


def test_brokers_forward_acls_and_every_authorizer_follows_the_log(secured) -> None:
    c = secured

    def may(b, name):
        return c.brokers[b].authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, name)

    assert not any(may(b, "orders") for b in c.brokers), "no ACL: denied"
    assert all(c.brokers[b].authorizer.authorize("User:admin", "h", Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
               for b in c.brokers)  # fmt: skip
    resp = c.request(2, CreateAclsRequest(creations=(acl("orders"),)))
    assert resp.results[0].error_code == 0
    assert c.run_until(lambda: all(may(b, "orders") for b in c.brokers), 5000), "every broker applies the ACL"
    assert all(isinstance(r, AccessControlEntryRecord) for r in c.image().acls.values())
    c.net.crash(c.controller())  # the new active controller has the ACL from the log, and takes deletions
    resp = c.request(3, DeleteAclsRequest(filters=(any_filter(resource_name_filter="orders"),)))
    assert [m.resource_name for m in resp.filter_results[0].matching_acls] == ["orders"]
    # an observer finds the new leader only once its fetch to the old one times out
    assert c.run_until(lambda: not any(may(b, "orders") for b in c.brokers), 30_000)


def test_a_scram_credential_set_through_a_broker_authenticates_on_every_broker(secured) -> None:
    c = secured
    resp = c.request(
        1, AlterUserScramCredentialsRequest(upsertions=(upsert("alice", "alice-secret", 2, 8192),))
    )
    assert resp.results[0].error_code == 0
    assert c.run_until(
        lambda: all(b.scram_credential("SCRAM-SHA-512", "alice") for b in c.brokers.values()), 5000
    )
    for b in c.brokers.values():
        for password, ok in (("alice-secret", True), ("wrong", False)):
            server = ScramServer("SCRAM-SHA-512", lambda u, b=b: b.scram_credential("SCRAM-SHA-512", u))
            client = ScramClient("SCRAM-SHA-512", "alice", password)
            try:
                client.verify(server.step(client.final(server.step(client.first()))))
                passed = True
            except ValueError:
                passed = False
            assert passed == ok, (b.broker_id, password)
    assert c.brokers[1].scram_credential("SCRAM-SHA-256", "alice") is None


# ------------------------------------------------------------------------------ property: against a model

_ACL = st.builds(
    acl,
    st.sampled_from(["a", "b", "pay-"]),
    principal=st.sampled_from(["User:alice", "User:bob"]),
    op=st.sampled_from([READ, WRITE]),
    perm=st.sampled_from([ALLOW, DENY]),
    resource_pattern_type=st.sampled_from([LITERAL, PREFIXED]),
)
_FILTER = st.builds(
    any_filter,
    resource_name_filter=st.sampled_from([None, "a", "pay-"]),
    pattern_type_filter=st.sampled_from([1, 2, LITERAL, PREFIXED]),  # ANY, MATCH, LITERAL, PREFIXED
    principal_filter=st.sampled_from([None, "User:alice"]),
    operation=st.sampled_from([1, READ]),
)


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.one_of(st.lists(_ACL, max_size=4), st.lists(_FILTER, min_size=1, max_size=2)), max_size=12
    )
)
def test_acl_records_keep_the_image_equal_to_a_set_of_bindings(ops) -> None:
    """Replaying what the controller writes for any run of CreateAcls and DeleteAcls leaves exactly the
    bindings a plain set says, each under one unique id, and DeleteAcls reports what it removed."""
    rng = random.Random(0)
    img, model = MetadataImage(), set()
    for op in ops:
        if op and isinstance(op[0], AclCreation):
            records, resp = create_acls(
                img, CreateAclsRequest(creations=tuple(op)), lambda: uuid.UUID(int=rng.getrandbits(128))
            )
            assert all(r.error_code == 0 for r in resp.results)
            model |= {acl_binding_of(c) for c in op}
        else:
            records, resp = delete_acls(img, DeleteAclsRequest(filters=tuple(op)))
            gone = {b for b in model if any(_filter(f).matches(b) for f in op)}
            reported = {acl_binding_of(m) for r in resp.filter_results for m in r.matching_acls}
            assert reported == gone and len(records) == len(gone)
            model -= gone
        img = replay_all(records, img)
        assert sorted(acl_binding(r) for r in img.acls.values()) == sorted(model)


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["up", "del"]), st.sampled_from(["alice", "bob", ""]), st.sampled_from([1, 2, 5])
        ),
        max_size=12,
    )
)
def test_scram_records_keep_the_image_equal_to_a_map_of_credentials(ops) -> None:
    """One alteration per step: the image holds what a dict of (user, mechanism) says, and every refusal
    is Kafka's code for the reason."""
    img, model = MetadataImage(), {}
    for kind, user, mech in ops:
        if kind == "up":
            u = upsert(user, "pw", mech if mech in (1, 2) else 1)
            u = ScramCredentialUpsertion(name=u.name, mechanism=mech, iterations=u.iterations, salt=u.salt,
                                         salted_password=u.salted_password)  # fmt: skip
            req = AlterUserScramCredentialsRequest(upsertions=(u,))
        else:
            req = AlterUserScramCredentialsRequest(
                deletions=(ScramCredentialDeletion(name=user, mechanism=mech),)
            )
        records, resp = alter_credentials(img, req)
        (result,) = resp.results
        want = 0
        if not user:
            want = UNACCEPTABLE_CREDENTIAL
        elif mech not in (1, 2):
            want = UNSUPPORTED_SASL_MECHANISM
        elif kind == "del" and (user, mech) not in model:
            want = RESOURCE_NOT_FOUND
        assert result.error_code == want, (kind, user, mech, result)
        if want == 0:
            if kind == "up":
                model[(user, mech)] = u.salt
            else:
                del model[(user, mech)]
        img = replay_all(records, img)
        assert {k: c.salt for k, c in img.scram.items()} == model
