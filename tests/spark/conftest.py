"""The Spark tests' shared cluster: three broker processes (``kafkalite cluster start``), reachable over
PLAINTEXT and over SASL_SSL (PLAIN users in the brokers' JAAS config, a test CA), started once a session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_reader="reader-secret";'
)


@dataclass(frozen=True)
class WireCluster:
    dir: Path
    bootstrap: str  # PLAINTEXT
    sasl_bootstrap: str  # SASL_SSL
    ca: str  # the CA that signed the brokers' certificate (PEM)

    def sasl_options(self, user: str = "reader", password: str = "reader-secret") -> dict[str, str]:
        """Spark source options for SASL_SSL with PLAIN, in Spark's ``kafka.*`` names."""
        return {
            "kafka.bootstrap.servers": self.sasl_bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}";',
            "kafka.ssl.truststore.location": self.ca,
        }


@pytest.fixture(scope="session")
def wire_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireCluster]:
    from kafkalite.host.processes import start_cluster, stop_cluster
    from kafkalite.security.certs import make_certificates

    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    d = tmp_path_factory.mktemp("wire-cluster")
    config = {
        "group.initial.rebalance.delay.ms": "0",
        "ssl.keystore.location": str(certs["broker"]),
        "ssl.truststore.location": str(certs["ca"]),
        "sasl.jaas.config": JAAS,
    }
    state = start_cluster(d, 3, config=config, extra_listeners=("SASL_SSL",))
    try:
        yield WireCluster(d, state["bootstrap_servers"], state["bootstrap"]["SASL_SSL"], str(certs["ca"]))
    finally:
        stop_cluster(d)
