"""SASL_SSL and ACLs on a KRaft cluster of processes (``kafkalite cluster start --kraft --listener SASL_SSL
--add-scram ...``), with separate controllers and in combined mode (``--combined``): the SCRAM users
formatted into the controllers' bootstrap file authenticate on every broker; ACLs and new SCRAM users made through the admin API are records the active controller writes and
every broker applies; transactions commit over SASL_SSL; a wrong password fails authentication."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from kafkalite.cli import kafkalite
from kafkalite.errors import KafkaError
from kafkalite.host.admin_client import AdminClient
from kafkalite.security.acl import AclBindingFilter as Flt
from kafkalite.security.acl import ResourceType
from tests.host.process_helpers import leaders, wait_for

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
QUIET = {"log_level": 0}


@pytest.fixture(scope="module", params=["isolated", "combined"])
def secure(request, tmp_path_factory):
    from kafkalite.security.certs import make_certificates

    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    d = tmp_path_factory.mktemp("kraft-secure")
    overrides = {
        "ssl.keystore.location": certs["broker"], "ssl.truststore.location": certs["ca"],
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "kafkalite", "super.users": "User:admin;User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": "0",
    }  # fmt: skip
    args = ["cluster", "start", "--kraft", "--controllers", "3", "--brokers", "3", "--dir", str(d),
            "--listener", "SASL_SSL",
            "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
            "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]"]  # fmt: skip
    if request.param == "combined":  # the bootstrap users go into each combined node's metadata.log.dir
        args.append("--combined")
    for k, v in overrides.items():
        args += ["--override", f"{k}={v}"]
    res = CliRunner().invoke(kafkalite, args)
    assert res.exit_code == 0, res.output
    state = json.loads((d / "cluster.json").read_text())
    yield state, str(certs["ca"])
    stop = CliRunner().invoke(kafkalite, ["cluster", "stop", "--dir", str(d)])
    assert stop.exit_code == 0, stop.output


def conf(secure, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    state, ca = secure
    return {"bootstrap.servers": state["bootstrap"]["SASL_SSL"], "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": ca, **QUIET}  # fmt: skip


def admin(secure) -> dict:
    return conf(secure, "admin", "admin-secret")


def alice(secure) -> dict:
    return conf(secure, "alice", "alice-secret", "SCRAM-SHA-512")


def create_topic(secure, name: str, parts: int = 2) -> None:
    a = cka.AdminClient(admin(secure))  # kept: the futures fail once their client is collected
    for f in a.create_topics([cka.NewTopic(name, parts, 3)]).values():
        f.result(30)
    wait_for(
        lambda: len(leaders(secure[0]["bootstrap_servers"], name)) == parts, 30, f"{name} to have leaders"
    )


def on_every_broker(secure, ask, want, what: str) -> None:
    """Wait until ``ask(admin client of one broker)`` is ``want`` on each broker: each applies a record
    when it replays it, a moment after the controller answered."""
    state = secure[0]
    addresses = [f"{state['host']}:{b['port']}" for b in state["brokers"].values()]

    def everywhere() -> bool:
        for address in addresses:
            with AdminClient(address) as a:  # PLAINTEXT: ANONYMOUS is a super user here
                try:
                    if ask(a) != want:
                        return False
                except KafkaError:
                    return False
        return True

    wait_for(everywhere, 20, what)


def produce(c: dict, topic: str, n: int) -> tuple[int, list[str]]:
    errors: list[str] = []
    p = ck.Producer({**c, "message.timeout.ms": 8000})
    for i in range(n):
        p.produce(topic, b"%d" % i, on_delivery=lambda e, m: errors.append(e.name()) if e else None)
    p.flush(15)
    return n - len(errors), errors


def test_bootstrap_users_authenticate_and_a_wrong_password_fails(secure) -> None:
    state, _ = secure
    assert sorted(state["bootstrap"]) == ["PLAINTEXT", "SASL_SSL"]
    md = cka.AdminClient(admin(secure)).list_topics(timeout=20)
    assert sorted(md.brokers) == [1, 2, 3] and md.controller_id in (1, 2, 3)
    for user, password, mech in (("admin", "nope", "SCRAM-SHA-256"), ("alice", "alice-secret", "SCRAM-SHA-256"),
                                 ("nobody", "x", "SCRAM-SHA-512")):  # fmt: skip
        failures: list[str] = []
        p = ck.Producer(
            {**conf(secure, user, password, mech), "error_cb": lambda e, out=failures: out.append(e.str())}
        )
        p.produce("anything", b"x")
        assert p.flush(3) == 1
        assert any("SASL authentication error: Authentication failed" in f for f in failures), (
            user,
            failures[-3:],
        )


def test_an_acl_made_through_the_admin_api_denies_then_allows(secure) -> None:
    create_topic(secure, "orders")
    ok, errors = produce(alice(secure), "orders", 3)
    assert ok == 0 and set(errors) == {"TOPIC_AUTHORIZATION_FAILED"}
    a = cka.AdminClient(admin(secure))
    bind = cka.AclBinding(cka.ResourceType.TOPIC, "orders", cka.ResourcePatternType.LITERAL, "User:alice", "*",
                          cka.AclOperation.WRITE, cka.AclPermissionType.ALLOW)  # fmt: skip
    for f in a.create_acls([bind]).values():
        f.result(20)
    on_orders = Flt(ResourceType.TOPIC, "orders")
    on_every_broker(secure, lambda c: len(c.describe_acls(on_orders)), 1, "every broker to apply the ACL")
    assert produce(alice(secure), "orders", 10) == (10, [])
    flt = cka.AclBindingFilter(cka.ResourceType.TOPIC, "orders", cka.ResourcePatternType.ANY, None, None,
                               cka.AclOperation.ANY, cka.AclPermissionType.ANY)  # fmt: skip
    assert [(b.principal, b.operation) for b in a.describe_acls(flt).result(10)] == [
        ("User:alice", cka.AclOperation.WRITE)
    ]
    # alice may not change ACLs herself: ALTER on the cluster, checked before anything is forwarded
    with pytest.raises(ck.KafkaException) as exc:
        as_alice = cka.AdminClient(alice(secure))
        for f in as_alice.create_acls([bind]).values():
            f.result(10)
    assert exc.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    for f in a.delete_acls([flt]).values():
        assert len(f.result(20)) == 1
    on_every_broker(secure, lambda c: len(c.describe_acls(on_orders)), 0, "every broker to drop the ACL")
    ok, errors = produce(alice(secure), "orders", 4)
    assert ok == 0 and set(errors) == {"TOPIC_AUTHORIZATION_FAILED"}


def test_transactional_commit_and_read_committed_over_sasl_ssl(secure) -> None:
    create_topic(secure, "payments")
    p = ck.Producer({**admin(secure), "transactional.id": "pay-1", "acks": "all"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("payments", f"committed-{i}".encode(), key=str(i).encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("payments", f"aborted-{i}".encode(), key=str(i).encode())
    p.flush(30)
    p.abort_transaction(30)
    c = ck.Consumer({**admin(secure), "group.id": "ledger", "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    c.subscribe(["payments"])
    got: set[bytes] = set()
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(got) < 5:
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.add(m.value())
    for _ in range(5):  # nothing aborted arrives after the committed ones either
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    assert got == {f"committed-{i}".encode() for i in range(5)}


def test_kafka_python_with_a_user_added_through_alter_user_scram_credentials(secure) -> None:
    kp = pytest.importorskip("kafka")
    create_topic(secure, "kp-secure", 1)
    a = cka.AdminClient(admin(secure))
    info = cka.ScramCredentialInfo(cka.ScramMechanism.SCRAM_SHA_256, 4096)
    for f in a.alter_user_scram_credentials(
        [cka.UserScramCredentialUpsertion("bob", info, b"bob-secret")]
    ).values():
        f.result(20)
    binds = [cka.AclBinding(cka.ResourceType.TOPIC, "kp-secure", cka.ResourcePatternType.LITERAL, "User:bob",
                            "*", cka.AclOperation.ALL, cka.AclPermissionType.ALLOW),
             cka.AclBinding(cka.ResourceType.GROUP, "kp-", cka.ResourcePatternType.PREFIXED, "User:bob",
                            "*", cka.AclOperation.READ, cka.AclPermissionType.ALLOW)]  # fmt: skip
    for f in a.create_acls(binds).values():
        f.result(20)
    described = a.describe_user_scram_credentials(["bob"])["bob"].result(20)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (cka.ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    on_every_broker(secure, lambda c: (c.describe_scram(["bob"]), len(c.describe_acls(Flt(principal="User:bob")))),
                    ({"bob": [("SCRAM-SHA-256", 4096)]}, 2), "every broker to replay bob's credential and ACLs")  # fmt: skip
    state, ca = secure
    common = dict(bootstrap_servers=state["bootstrap"]["SASL_SSL"].split(","), security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob", sasl_plain_password="bob-secret",
                  ssl_cafile=ca)  # fmt: skip
    prod = kp.KafkaProducer(**common, acks="all")
    for i in range(10):
        prod.send("kp-secure", b"v%d" % i).get(10)
    prod.close()
    cons = kp.KafkaConsumer("kp-secure", group_id="kp-readers", auto_offset_reset="earliest",
                            consumer_timeout_ms=8000, **common)  # fmt: skip
    assert {m.value for m in cons} == {b"v%d" % i for i in range(10)}
    cons.close()
    with pytest.raises(kp.errors.KafkaError):
        kp.KafkaProducer(**{**common, "sasl_plain_password": "wrong"}, bootstrap_timeout_ms=3000)


def test_the_cli_tools_add_a_scram_user_and_acls_on_kraft(secure, tmp_path) -> None:
    state, ca = secure

    def cli(*args: str) -> str:
        result = CliRunner().invoke(kafkalite, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    plain = ("--bootstrap-server", state["bootstrap_servers"])  # ANONYMOUS on PLAINTEXT is a super user here
    assert "Completed" in cli("configs", *plain, "--alter", "--entity-type", "users", "--entity-name", "erin",
                              "--add-config", "SCRAM-SHA-512=[iterations=8192,password=erin-pw]")  # fmt: skip
    out = cli("acls", *plain, "--add", "--allow-principal", "User:erin", "--operation", "Describe",
              "--cluster")  # fmt: skip
    assert "Adding ACLs" in out
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="erin" password="erin-pw";\n'
        f"ssl.truststore.location={ca}\n"
    )
    secured = ("--bootstrap-server", state["bootstrap"]["SASL_SSL"], "--command-config", str(props))
    # erin logs in with the credential the controller wrote, and may list ACLs with DESCRIBE on the cluster
    deadline = time.monotonic() + 20
    while True:
        result = CliRunner().invoke(kafkalite, ["acls", *secured, "--list", "--cluster"])
        if result.exit_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.exit_code == 0, result.output
    assert "principal=User:erin" in result.output and "operation=DESCRIBE" in result.output
    assert "SCRAM-SHA-512=iterations=8192" in cli("configs", *plain, "--describe", "--entity-type", "users",
                                                  "--entity-name", "erin")  # fmt: skip
