"""Security: SCRAM and the ACL rule as units (with hypothesis against a reference model), then TLS, SASL
and ACLs with real clients (confluent-kafka and kafka-python) against kafkalite's listeners."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import socket
import ssl
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    decide,
)
from kafkalite.security.listeners import parse_listeners
from kafkalite.security.scram import ScramClient, ScramCredential, ScramError, ScramServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# ------------------------------------------------------------------------------------------- SCRAM


def test_scram_rfc7677_vector() -> None:
    """RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil", its nonces, salt and 4096
    iterations give exactly its client-final proof and server signature."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = ScramCredential.create("SCRAM-SHA-256", "pencil", 4096, salt=salt)
    server = ScramServer(
        "SCRAM-SHA-256", lambda u: cred if u == "user" else None, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    first = server.step(client.first())
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = client.final(first)
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")  # fmt: skip
    last = server.step(final)
    assert last == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify(last)


def test_scram_credential_text_and_wrong_password() -> None:
    cred = ScramCredential.create("SCRAM-SHA-512", "s3cret", 8192)
    assert ScramCredential.decode(cred.encode()) == cred
    assert cred.encode().startswith("salt=") and cred.encode().endswith(",iterations=8192")
    server = ScramServer("SCRAM-SHA-512", lambda u: cred)
    client = ScramClient("SCRAM-SHA-512", "alice", "wrong")
    final = client.final(server.step(client.first()))
    with pytest.raises(ScramError, match="invalid credentials"):
        server.step(final)
    with pytest.raises(ScramError, match="iterations"):
        ScramCredential.create("SCRAM-SHA-256", "x", 1000)
    for bad in (b"y,,n=a,r=x", b"n,,n=a", b"\xff\xfe", b"n,,garbage"):
        with pytest.raises(ScramError):
            ScramServer("SCRAM-SHA-256", lambda u: cred).step(bad)


def test_scram_stored_key_is_kafkas_derivation() -> None:
    salt, password = b"0123456789abcdef", "pw"
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
    cred = ScramCredential.create("SCRAM-SHA-256", password, 4096, salt=salt)
    assert cred.stored_key == hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    assert cred.server_key == hmac.digest(salted, b"Server Key", "sha256")


# --------------------------------------------------------------------------------------------- ACLs

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(principal, op, rtype, name, perm=ALLOW, pattern=PatternType.LITERAL, host="*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm))


def test_acl_rules_kafka_cases() -> None:
    acls = [
        acl("User:alice", Operation.READ, T, "orders"),
        acl("User:bob", Operation.WRITE, T, "orders"),
        acl("User:*", Operation.READ, T, "pay", pattern=PatternType.PREFIXED),
        acl("User:mallory", Operation.ALL, T, "pay", DENY, PatternType.PREFIXED),
        acl("User:carol", Operation.ALTER_CONFIGS, T, "*"),
        acl("User:dave", Operation.READ, T, "orders", host="10.0.0.1"),
    ]

    def may(p, op, name, host="127.0.0.1", **kw):
        return decide(acls, p, host, op, T, name, **kw)

    assert may("User:alice", Operation.READ, "orders")
    assert may("User:alice", Operation.DESCRIBE, "orders")  # READ implies DESCRIBE
    assert not may("User:alice", Operation.WRITE, "orders")
    assert may("User:bob", Operation.DESCRIBE, "orders") and not may("User:bob", Operation.READ, "orders")
    assert may("User:anyone", Operation.READ, "payments")  # wildcard principal, prefixed pattern
    assert not may("User:mallory", Operation.READ, "payments")  # DENY wins over the wildcard ALLOW
    assert may("User:carol", Operation.DESCRIBE_CONFIGS, "x")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not may("User:carol", Operation.DESCRIBE, "x")
    assert not may("User:dave", Operation.READ, "orders") and may(
        "User:dave", Operation.READ, "orders", "10.0.0.1"
    )
    assert not may("User:carol", Operation.READ, "anything")  # the wildcard pattern puts ACLs on every topic
    assert not decide(acls, "User:alice", "h", Operation.READ, G, "g")  # no ACL on it: denied by default
    assert decide(acls, "User:alice", "h", Operation.READ, G, "g", allow_if_no_acl=True)
    assert not may("User:zed", Operation.READ, "orders", allow_if_no_acl=True)  # it has ACLs, none for zed
    assert may("User:root", Operation.DELETE, "orders", super_users=["User:root"])


@pytest.mark.parametrize(
    ("value", "allowed"),
    [(None, False), ("false", False), (False, False), ("true", True), ("TRUE", True), (True, True)],
)
def test_allow_everyone_if_no_acl_found_is_read_from_the_broker_props(value, allowed) -> None:
    from kafkalite.security.authorizer import AclDecisions

    props = {} if value is None else {"allow.everyone.if.no.acl.found": value}
    authz = AclDecisions(props)
    authz.bindings = [acl("User:alice", Operation.WRITE, T, "orders")]
    # a topic without any ACL: the setting decides
    assert authz.authorize("User:ANONYMOUS", "h", Operation.WRITE, T, "images") is allowed
    # a topic with an ACL, for someone else: never, whatever the setting
    assert not authz.authorize("User:ANONYMOUS", "h", Operation.WRITE, T, "orders")
    assert authz.authorize("User:alice", "h", Operation.WRITE, T, "orders")


def test_acl_filters() -> None:
    b1 = acl("User:a", Operation.READ, T, "orders")
    b2 = acl("User:a", Operation.READ, T, "ord", pattern=PatternType.PREFIXED)
    b3 = acl("User:b", Operation.WRITE, G, "g")
    every = AclBindingFilter()
    assert all(every.matches(b) for b in (b1, b2, b3))
    match = AclBindingFilter(T, "orders", PatternType.MATCH)
    assert match.matches(b1) and match.matches(b2) and not match.matches(b3)
    assert not AclBindingFilter(T, "orders", PatternType.LITERAL).matches(b2)
    assert AclBindingFilter(principal="User:b").matches(b3) and not AclBindingFilter(
        principal="User:b"
    ).matches(b1)


IMPLIED = {Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
           Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS}}  # fmt: skip
OPS = [Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.ALTER, Operation.DELETE,
       Operation.ALL, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS]  # fmt: skip
NAMES = ["orders", "ord", "o", "payments", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]

acl_st = st.builds(
    lambda p, op, name, perm, prefixed, host: acl(
        p, op, T, name if not prefixed or name != "*" else "o", perm,
        PatternType.PREFIXED if prefixed and name != "*" else PatternType.LITERAL, host),
    st.sampled_from(PRINCIPALS), st.sampled_from(OPS), st.sampled_from(NAMES), st.sampled_from([ALLOW, DENY]),
    st.booleans(), st.sampled_from(["*", "127.0.0.1", "10.0.0.1"]),
)  # fmt: skip


def reference(acls, principal, host, op, name, allow_if_none) -> bool:
    """Kafka's rule, written out the long way round."""

    def on(b):
        if b.pattern.pattern == PatternType.PREFIXED:
            return name.startswith(b.pattern.name)
        return b.pattern.name == name or b.pattern.name == "*"

    mine = [b for b in acls if on(b)]
    if not mine:
        return allow_if_none
    who = [
        b.entry for b in mine if b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")
    ]
    if any(e.permission == DENY and e.operation in (op, Operation.ALL) for e in who):
        return False
    ok = {op, Operation.ALL} | IMPLIED.get(op, set())
    return any(e.permission == ALLOW and e.operation in ok for e in who)


@settings(max_examples=400, deadline=None)
@given(st.lists(acl_st, max_size=8), st.sampled_from(["User:alice", "User:bob"]), st.sampled_from(OPS[:-1]),
       st.sampled_from(["orders", "payments", "other"]), st.sampled_from(["127.0.0.1", "10.0.0.1"]), st.booleans())  # fmt: skip
def test_acl_decisions_match_the_reference_model(acls, principal, op, name, host, allow_if_none) -> None:
    assert decide(acls, principal, host, op, T, name, allow_if_no_acl=allow_if_none) == reference(
        acls, principal, host, op, name, allow_if_none
    )


def test_listener_parsing_errors() -> None:
    ls = parse_listeners("PLAINTEXT://:9092,CLIENTS://127.0.0.1:9093", "CLIENTS:SASL_SSL")
    assert [(x.name, x.host, x.port, x.protocol) for x in ls] == [
        ("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ("CLIENTS", "127.0.0.1", 9093, "SASL_SSL")]  # fmt: skip
    from kafkalite.host.server import WireServer

    with pytest.raises(ValueError, match="inter.broker.listener.name"):
        WireServer(1, config={"listeners": "PLAINTEXT://:0", "inter.broker.listener.name": "REPLICATION"})
    for bad, why in [("FOO://h:1", "protocol.map"), ("PLAINTEXT:h:1", "NAME://HOST:PORT"),
                     ("SSL://h:1,SSL://h:2", "twice"), ("", "empty")]:  # fmt: skip
        with pytest.raises(ValueError, match=why):
            parse_listeners(bad)


# ----------------------------------------------------------------------------- real clients, TLS, SASL

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
QUIET = {"log_level": 0}
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'  # noqa: E501


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    from kafkalite.security.certs import make_certificates

    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure(certs):
    from kafkalite.host.server import BackgroundServer
    from kafkalite.security.admin import add_scram_user

    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.location": str(certs["broker"]), "ssl.truststore.location": str(certs["ca"]),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafkalite.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",  # the PLAINTEXT listener is the brokers' own
        "group.initial.rebalance.delay.ms": 0,
    }  # fmt: skip
    with BackgroundServer(1, config=config) as srv:
        node = srv.server.broker_node(1)
        add_scram_user(node.zk, "alice", "alice-scram", "SCRAM-SHA-256")
        add_scram_user(node.zk, "alice", "alice-scram-512", "SCRAM-SHA-512", iterations=8192)
        yield srv


def sasl_conf(srv, certs, user, password, mechanism="PLAIN", protocol="SASL_SSL") -> dict:
    return {"bootstrap.servers": srv.server.bootstrap(protocol), "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(certs["ca"]), **QUIET}  # fmt: skip


def admin_conf(srv, certs) -> dict:
    return sasl_conf(srv, certs, "admin", "admin-secret")


def produce(conf: dict, topic: str, n: int = 20) -> tuple[int, list[str]]:
    errors: list[str] = []
    p = ck.Producer({**conf, "message.timeout.ms": 5000})
    for i in range(n):
        p.produce(topic, b"%d" % i, on_delivery=lambda e, m: errors.append(e.name()) if e else None)
    p.flush(10)
    return n - len(errors), errors


def test_sasl_mechanisms_succeed_with_the_right_secret_and_fail_with_a_wrong_one(secure, certs) -> None:
    admin = cka.AdminClient(admin_conf(secure, certs))
    for f in admin.create_topics([cka.NewTopic("secured", 1, 1)]).values():
        f.result(20)
    from kafkalite.host.admin_client import AdminClient as _  # noqa: F401 - the import is part of what is tested

    cases = [
        ("PLAIN", "admin", "admin-secret", "SASL_SSL"),
        ("PLAIN", "admin", "admin-secret", "SASL_PLAINTEXT"),
    ]
    for mech, user, pw, proto in cases:
        ok, errors = produce(sasl_conf(secure, certs, user, pw, mech, proto), "secured", 5)
        assert (ok, errors) == (5, []), (mech, proto)
    failures: list[str] = []
    for mech, user, pw in [("PLAIN", "admin", "nope"), ("SCRAM-SHA-256", "alice", "nope"),
                           ("SCRAM-SHA-512", "alice", "alice-scram"), ("SCRAM-SHA-256", "nobody", "x")]:  # fmt: skip
        conf = {**sasl_conf(secure, certs, user, pw, mech), "error_cb": lambda e: failures.append(e.str())}
        p = ck.Producer(conf)
        p.produce("secured", b"x")
        assert p.flush(2) == 1
        assert any("Authentication failed" in f for f in failures), (mech, failures[-3:])
        failures.clear()
    assert secure.server.stats.auth_failures >= 4


def test_scram_authenticates_and_alice_needs_acls(secure, certs) -> None:
    admin = cka.AdminClient(admin_conf(secure, certs))
    for f in admin.create_topics([cka.NewTopic("orders", 2, 1)]).values():
        f.result(20)
    alice = sasl_conf(secure, certs, "alice", "alice-scram", "SCRAM-SHA-256")
    ok, errors = produce(alice, "orders", 3)
    assert ok == 0 and set(errors) == {"TOPIC_AUTHORIZATION_FAILED"}
    bind = cka.AclBinding(cka.ResourceType.TOPIC, "orders", cka.ResourcePatternType.LITERAL, "User:alice", "*",
                          cka.AclOperation.WRITE, cka.AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([bind]).values():
        f.result(10)
    deadline = time.time() + 10
    while produce(alice, "orders", 1)[0] == 0 and time.time() < deadline:
        time.sleep(0.2)
    assert produce(alice, "orders", 10) == (10, [])
    alice512 = sasl_conf(secure, certs, "alice", "alice-scram-512", "SCRAM-SHA-512")
    assert produce(alice512, "orders", 2) == (2, [])
    flt = cka.AclBindingFilter(cka.ResourceType.TOPIC, "orders", cka.ResourcePatternType.ANY, None, None,
                               cka.AclOperation.ANY, cka.AclPermissionType.ANY)  # fmt: skip
    described = admin.describe_acls(flt).result(10)
    assert [(b.principal, b.operation) for b in described] == [("User:alice", cka.AclOperation.WRITE)]
    # a consumer needs READ on the topic and on its group
    c = ck.Consumer({**alice, "group.id": "billing", "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    errs = []
    deadline = time.time() + 10
    while time.time() < deadline and not errs:
        m = c.poll(0.3)
        if m is not None and m.error():
            errs.append(m.error().name())
    c.close()
    assert errs and errs[0] in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED")
    for f in admin.delete_acls([flt]).values():
        assert len(f.result(10)) == 1
    assert admin.describe_acls(flt).result(10) == []


def test_metadata_hides_topics_and_deny_wins(secure, certs) -> None:
    admin = cka.AdminClient(admin_conf(secure, certs))
    for f in admin.create_topics([cka.NewTopic("pay-eu", 1, 1), cka.NewTopic("pay-us", 1, 1),
                                  cka.NewTopic("hidden", 1, 1)]).values():  # fmt: skip
        f.result(20)
    acls = [
        cka.AclBinding(cka.ResourceType.TOPIC, "pay-", cka.ResourcePatternType.PREFIXED, "User:bob", "*",
                       cka.AclOperation.ALL, cka.AclPermissionType.ALLOW),
        cka.AclBinding(cka.ResourceType.TOPIC, "pay-us", cka.ResourcePatternType.LITERAL, "User:bob", "*",
                       cka.AclOperation.WRITE, cka.AclPermissionType.DENY),
    ]  # fmt: skip
    for f in admin.create_acls(acls).values():
        f.result(10)
    bob = sasl_conf(secure, certs, "bob", "bob-secret")
    deadline = time.time() + 10
    topics: set[str] = set()
    while time.time() < deadline and "pay-eu" not in topics:
        topics = set(cka.AdminClient(bob).list_topics(timeout=5).topics)
        time.sleep(0.1)
    assert {"pay-eu", "pay-us"} <= topics and "hidden" not in topics and "orders" not in topics
    assert produce(bob, "pay-eu", 3) == (3, [])
    ok, errors = produce(bob, "pay-us", 3)
    assert ok == 0 and set(errors) == {"TOPIC_AUTHORIZATION_FAILED"}
    bob_admin = cka.AdminClient(bob)
    fut = bob_admin.create_topics([cka.NewTopic("bobs-own", 1, 1)])["bobs-own"]
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(10)
    assert exc.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    # listing ACLs needs DESCRIBE on the cluster (kafka-python raises the broker's error; librdkafka
    # hands back an empty list for a top-level DescribeAcls error)
    kp = pytest.importorskip("kafka")
    from kafka.admin import ACLFilter, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ACLOperation as KOp
    from kafka.admin import ACLPermissionType as KPerm
    from kafka.admin import ResourceType as KType

    kadmin = kp.KafkaAdminClient(bootstrap_servers=secure.server.bootstrap("SASL_PLAINTEXT"),
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                 sasl_plain_username="bob", sasl_plain_password="bob-secret")  # fmt: skip
    everything = ACLFilter(
        None, "*", KOp.ANY, KPerm.ANY, ResourcePatternFilter(KType.ANY, None, ACLResourcePatternType.ANY)
    )
    with pytest.raises(kp.errors.ClusterAuthorizationFailedError):
        kadmin.describe_acls(everything)
    kadmin.close()


def test_tls_client_certificate_is_the_principal(secure, certs) -> None:
    admin = cka.AdminClient(admin_conf(secure, certs))
    for f in admin.create_topics([cka.NewTopic("certified", 1, 1)]).values():
        f.result(20)
    bind = cka.AclBinding(cka.ResourceType.TOPIC, "certified", cka.ResourcePatternType.LITERAL,
                          "User:CN=alice,O=kafkalite", "*", cka.AclOperation.WRITE, cka.AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([bind]).values():
        f.result(10)
    tls = {"bootstrap.servers": secure.server.bootstrap("SSL"), "security.protocol": "SSL",
           "ssl.ca.location": str(certs["ca"]), **QUIET}  # fmt: skip
    as_alice = {
        **tls,
        "ssl.certificate.location": str(certs["alice"]),
        "ssl.key.location": str(certs["alice.key"]),
    }
    as_bob = {**tls, "ssl.certificate.location": str(certs["bob"]), "ssl.key.location": str(certs["bob.key"])}
    assert produce(as_alice, "certified", 3) == (3, [])
    assert set(produce(as_bob, "certified", 2)[1]) == {"TOPIC_AUTHORIZATION_FAILED"}
    # without a client certificate the handshake fails (ssl.client.auth=required): nothing is delivered
    assert produce(tls, "certified", 1)[0] == 0


def api_versions_frame(corr: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, corr, -1)
    return struct.pack(">i", len(body)) + body


def test_plaintext_to_tls_and_requests_before_sasl_are_refused_and_others_still_served(secure) -> None:
    host, port = secure.server.endpoints["SSL"][1]
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(api_versions_frame(1))  # Kafka bytes in clear to a TLS listener
        reply = s.recv(100)
        assert not reply.startswith(struct.pack(">i", 1)[:0] + b"\x00\x00")  # never a Kafka answer
    host, port = secure.server.endpoints["SASL_PLAINTEXT"][1]
    with socket.create_connection((host, port), timeout=5) as s:
        body = struct.pack(">hhih", 3, 1, 7, -1) + struct.pack(">i", -1)  # Metadata v1 before SASL
        s.sendall(struct.pack(">i", len(body)) + body)
        assert s.recv(100) == b""  # closed without an answer
    with socket.create_connection((host, port), timeout=5) as s:
        # SaslHandshake v1 with a mechanism the listener does not enable: the error, the list, then closed
        mech = b"GSSAPI"
        body = struct.pack(">hhih", 17, 1, 8, -1) + struct.pack(">h", len(mech)) + mech
        s.sendall(struct.pack(">i", len(body)) + body)
        size, corr, code = struct.unpack(">iih", s.recv(10))
        assert (corr, code) == (8, 33)  # UNSUPPORTED_SASL_MECHANISM
    host, port = secure.server.endpoints["PLAINTEXT"][1]
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(api_versions_frame(9))
        assert struct.unpack(">ii", s.recv(8))[1] == 9
    context = ssl.create_default_context(cafile=None)
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_a_refused_sasl_mechanism_is_logged_with_the_mechanism_and_the_enabled_ones(secure, caplog) -> None:
    # The handshake's answer carries no message, so the broker's log is where an operator learns what a
    # client asked for; it used to read "SASL error 33: None".
    caplog.set_level(logging.INFO, logger="kafkalite.host")
    host, port = secure.server.endpoints["SASL_PLAINTEXT"][1]
    with socket.create_connection((host, port), timeout=5) as s:
        mech = b"GSSAPI"
        body = struct.pack(">hhih", 17, 1, 8, -1) + struct.pack(">h", len(mech)) + mech
        s.sendall(struct.pack(">i", len(body)) + body)
        assert struct.unpack(">iih", s.recv(10))[1:] == (8, 33)  # UNSUPPORTED_SASL_MECHANISM
    logged = [r.getMessage() for r in caplog.records if "SASL error 33" in r.getMessage()]
    assert logged == [
        "closing connection after SASL error 33: mechanism 'GSSAPI' asked, "
        "the listener enables PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
    ], logged


def test_kafka_python_sasl_ssl_scram(secure, certs) -> None:
    kp = pytest.importorskip("kafka")
    admin = cka.AdminClient(admin_conf(secure, certs))
    for f in admin.create_topics([cka.NewTopic("kp-secure", 1, 1)]).values():
        f.result(20)
    binds = [cka.AclBinding(cka.ResourceType.TOPIC, "kp-secure", cka.ResourcePatternType.LITERAL, "User:alice",
                            "*", cka.AclOperation.ALL, cka.AclPermissionType.ALLOW),
             cka.AclBinding(cka.ResourceType.GROUP, "kp-", cka.ResourcePatternType.PREFIXED, "User:alice",
                            "*", cka.AclOperation.READ, cka.AclPermissionType.ALLOW)]  # fmt: skip
    for f in admin.create_acls(binds).values():
        f.result(10)
    common = dict(bootstrap_servers=secure.server.bootstrap("SASL_SSL").split(","), security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice", sasl_plain_password="alice-scram",
                  ssl_cafile=str(certs["ca"]))  # fmt: skip
    prod = kp.KafkaProducer(**common)
    for i in range(10):
        prod.send("kp-secure", b"v%d" % i).get(10)
    prod.close()
    cons = kp.KafkaConsumer("kp-secure", group_id="kp-readers", auto_offset_reset="earliest",
                            consumer_timeout_ms=6000, **common)  # fmt: skip
    assert {m.value for m in cons} == {b"v%d" % i for i in range(10)}
    cons.close()
    with pytest.raises(kp.errors.KafkaError):
        kp.KafkaProducer(**{**common, "sasl_plain_password": "wrong"}, bootstrap_timeout_ms=3000)


def test_cli_acls_scram_users_and_certs(secure, certs, tmp_path) -> None:
    from click.testing import CliRunner

    from kafkalite.cli import kafkalite

    def cli(*args: str, ok: bool = True) -> str:
        result = CliRunner().invoke(kafkalite, list(args))
        assert (result.exit_code == 0) == ok, result.output
        return result.output

    plain = ("--bootstrap-server", secure.server.bootstrap("PLAINTEXT"))
    out = cli("acls", *plain, "--add", "--allow-principal", "User:carol", "--operation", "Read", "--operation",
              "Describe", "--topic", "ledger", "--group", "ledger-", "--resource-pattern-type", "prefixed")  # fmt: skip
    assert "Adding ACLs" in out and out.count("principal=User:carol") == 4
    listed = cli("acls", *plain, "--list", "--topic", "ledger", "--resource-pattern-type", "prefixed")
    assert "resourceType=TOPIC, name=ledger, patternType=PREFIXED" in listed and "operation=READ" in listed
    assert "Removed 2 ACL(s)." in cli(
        "acls", *plain, "--remove", "--topic", "ledger", "--resource-pattern-type", "prefixed"
    )
    assert "unknown Operation" in cli("acls", *plain, "--add", "--allow-principal", "User:x", "--operation", "Fly",
                                      "--topic", "t", ok=False)  # fmt: skip
    # a SCRAM user made with the CLI, then the CLI itself authenticating as admin over SASL_SSL with it
    assert "Completed" in cli("configs", *plain, "--alter", "--entity-type", "users", "--entity-name", "erin",
                              "--add-config", "SCRAM-SHA-512=[iterations=8192,password=erin-pw]")  # fmt: skip
    assert "SCRAM-SHA-512=iterations=8192" in cli("configs", *plain, "--describe", "--entity-type", "users",
                                                  "--entity-name", "erin")  # fmt: skip
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="erin" password="erin-pw";\n'
        f"ssl.truststore.location={certs['ca']}\n"
    )
    secured = ("--bootstrap-server", secure.server.bootstrap("SASL_SSL"), "--command-config", str(props))
    denied = cli("acls", *secured, "--list", ok=False)
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied or "ClusterAuthorizationFailed" in denied
    cli("acls", *plain, "--add", "--allow-principal", "User:erin", "--operation", "Describe", "--cluster")
    assert "principal=User:erin" in cli("acls", *secured, "--list")
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(props.read_text().replace("erin-pw", "nope"))
    out = cli("acls", "--bootstrap-server", secure.server.bootstrap("SASL_SSL"), "--command-config", str(wrong),
              "--list", ok=False)  # fmt: skip
    assert "Authentication failed" in out
    assert "does not exist" in cli("configs", *plain, "--describe", "--entity-type", "users", "--entity-name",
                                   "nobody", ok=False)  # fmt: skip
    out = cli("certs", "--dir", str(tmp_path / "pki"), "--client", "dana")
    assert "ca\t" in out and (tmp_path / "pki" / "dana.pem").exists()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=80), min_size=1, max_size=3), st.sampled_from(["PLAIN", "SCRAM-SHA-256"]))
def test_malformed_sasl_messages_get_an_error_never_a_crash(tokens, mechanism) -> None:
    from kafkalite.security.listeners import SaslAuthenticator

    cred = ScramCredential.create("SCRAM-SHA-256", "pw", 4096, salt=b"s" * 16)
    auth = SaslAuthenticator(["PLAIN", "SCRAM-SHA-256"], {"alice": "pw"}, lambda m, u: cred)
    assert auth.handshake(mechanism) == 0
    assert auth.handshake(mechanism) == 34  # a second handshake: ILLEGAL_SASL_STATE
    for token in tokens:
        code, message, _out = auth.authenticate(token)
        assert code in (0, 34, 58)
        if code:
            assert message
            break
    assert auth.principal in (None, "User:alice")


def test_acls_live_in_the_store_and_survive_a_broker_restart() -> None:
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.host.server import BackgroundServer
    from kafkalite.security.acl import AclBindingFilter as Flt

    config = {"authorizer.class.name": "kafkalite", "super.users": "User:ANONYMOUS"}
    with BackgroundServer(1, config=config) as srv:
        with AdminClient(srv.bootstrap_servers) as admin:
            admin.create_acls([acl("User:alice", Operation.READ, T, "orders"),
                               acl("User:alice", Operation.WRITE, T, "ord", pattern=PatternType.PREFIXED)])  # fmt: skip
        store = srv.server.cluster.zk.store
        assert b'"principal":"User:alice"' in store.get("/kafka-acl/Topic/orders")[0]
        assert store.get("/kafka-acl-extended/prefixed/Topic/ord")[0]
        assert store.get_children("/kafka-acl-changes") and store.get_children("/kafka-acl-extended-changes")
        srv.crash_broker(1)
        srv.restart_broker(1)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with AdminClient(srv.bootstrap_servers) as admin:
                    found = admin.describe_acls(Flt())
                break
            except Exception:  # noqa: BLE001 - still restarting
                time.sleep(0.2)
        assert [str(b) for b in found] == [
            "ALLOW User:alice from * WRITE on TOPIC PREFIXED:ord",
            "ALLOW User:alice from * READ on TOPIC LITERAL:orders",
        ]
        assert srv.server.authorizer(1).authorize("User:alice", "h", Operation.WRITE, T, "orders-eu")


def test_each_listener_advertises_its_own_addresses_for_every_broker() -> None:
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.host.server import BackgroundServer

    config = {"listeners": "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0", "inter.broker.listener.name": "INTERNAL",
              "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
              "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS}  # fmt: skip
    with BackgroundServer(3, config=config) as srv:
        external = srv.server.endpoints["EXTERNAL"]
        sec = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
               "sasl.jaas.config": 'x required username="alice" password="alice-secret";'}  # fmt: skip
        deadline = time.time() + 20
        while True:
            with AdminClient(srv.server.bootstrap("EXTERNAL"), security=sec) as admin:
                if len(admin.brokers) == 3 or time.time() > deadline:
                    break
            time.sleep(0.1)
        assert admin.brokers == external
        with AdminClient(srv.bootstrap_servers) as admin:
            assert admin.brokers == srv.server.endpoints["INTERNAL"] != external
        assert srv.server.listeners[0].name == "INTERNAL"
        node = srv.server.broker_node(2)
        assert node.cache.live_brokers[3].listeners == srv.server.registered_endpoints(3)


def test_describe_quorum_needs_describe_on_the_cluster() -> None:
    # Kafka's controller authorizes DescribeQuorum as DESCRIBE on the cluster; the listener refuses it
    # with a top-level CLUSTER_AUTHORIZATION_FAILED before forwarding it
    from kafkalite.security import gate
    from kafkalite.security.acl import Operation, ResourceType

    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    asked: list[tuple[Operation, ResourceType]] = []

    def deny(op: Operation, kind: ResourceType, _name: str) -> bool:
        asked.append((op, kind))
        return False

    fwd, _, whole = gate.check(55, body, deny, lambda: False)
    assert fwd is None and whole is not None and whole["error_code"] == 31 and whole["topics"] == []
    assert asked == [(Operation.DESCRIBE, ResourceType.CLUSTER)]
    assert gate.check(55, body, lambda *_: True, lambda: False) == (body, None, None)


def test_behind_an_authorizer_a_consumer_fetch_opens_no_fetch_session() -> None:
    # The listener checks READ on the topics a fetch names; an incremental fetch (KIP-227) names only
    # what moved, so the session a consumer asks for is declined: every fetch stays a full one.
    from kafkalite.security import gate

    topics = [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0}]}]
    body = {"replica_id": -1, "session_id": 0, "session_epoch": 0, "topics": topics}
    fwd, merge, whole = gate.check(1, body, lambda *_: True, lambda: False)
    assert whole is None and merge is None
    assert (fwd["session_id"], fwd["session_epoch"]) == (0, -1), "a session would be opened"
    assert fwd["topics"] == topics
    follower = {**body, "replica_id": 2}
    assert gate.check(1, follower, lambda *_: True, lambda: False) == (follower, None, None), (
        "a follower's fetch (CLUSTER_ACTION on every fetch) keeps its session"
    )
