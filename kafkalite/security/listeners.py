"""Listeners and the authentication that happens on them: TLS and SASL (PLAIN, SCRAM-SHA-256/512).

Kafka's settings, Kafka's names:

- ``listeners``: ``NAME://HOST:PORT`` entries (``PLAINTEXT://127.0.0.1:9092,CLIENTS://127.0.0.1:9093``);
  ``listener.security.protocol.map`` says which of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL each name
  speaks (the four names map to themselves); ``inter.broker.listener.name`` is the one brokers use.
- TLS: ``ssl.keystore.location`` (a PEM file with the key and the certificate chain, as with Kafka's
  ``ssl.keystore.type=PEM``), ``ssl.key.password``, ``ssl.truststore.location`` (PEM CA certificates) and
  ``ssl.client.auth`` = required / requested / none. A client certificate makes the principal
  ``User:<subject DN>`` (``CN=alice,O=kafkalite``), as Kafka's default principal builder does.
- SASL: ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); PLAIN's users come from a JAAS
  line (``sasl.jaas.config`` or ``listener.name.<name>.plain.sasl.jaas.config``) with ``user_alice="..."``
  entries, as Kafka's PlainLoginModule reads them; SCRAM users from the store (``/config/users``).

Any key may be given per listener with the ``listener.name.<name>.`` prefix, which wins.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.common.security_protocol import protocol_map
from kafkalite.security.acl import ANONYMOUS
from kafkalite.security.scram import MECHANISMS, ScramCredential, ScramError, ScramServer

SASL_MECHANISMS = ("PLAIN", *MECHANISMS)
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str, mapping: str | None = None, default_host: str = "127.0.0.1") -> list[Listener]:
    """``"PLAINTEXT://h:9092,SASL_SSL://h:9093"`` -> listeners; a clear error for a bad entry, an unknown
    name, or a name given twice."""
    protos = protocol_map(mapping)
    out: list[Listener] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_]+)://([^:/]*):(\d+)", entry)
        if m is None:
            raise ValueError(f"listeners entries look like NAME://HOST:PORT, got {entry!r}")
        name = m.group(1).upper()
        if name not in protos:
            raise ValueError(f"listener {name} is not in listener.security.protocol.map")
        if any(x.name == name for x in out):
            raise ValueError(f"listener {name} is given twice")
        out.append(Listener(name, m.group(2) or default_host, int(m.group(3)), protos[name]))
    if not out:
        raise ValueError("listeners is empty")
    return out


def setting(props: Mapping[str, Any], listener: str, key: str, default: Any = None) -> Any:
    """``listener.name.<listener>.<key>`` if set, else ``<key>``, else ``default``."""
    v = props.get(f"listener.name.{listener.lower()}.{key}")
    return v if v is not None else props.get(key, default)


# ----------------------------------------------------------------------------------------------- TLS


def server_ssl_context(props: Mapping[str, Any], listener: str) -> ssl.SSLContext:
    keystore = setting(props, listener, "ssl.keystore.location")
    if not keystore:
        raise ValueError(
            f"listener {listener} speaks TLS: set ssl.keystore.location (a PEM key + certificate)"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(keystore, password=setting(props, listener, "ssl.key.password"))
    auth = str(setting(props, listener, "ssl.client.auth", "none")).lower()
    if auth not in ("none", "requested", "required"):
        raise ValueError(f"ssl.client.auth is required, requested or none, got {auth!r}")
    if auth != "none":
        trust = setting(props, listener, "ssl.truststore.location")
        if not trust:
            raise ValueError(f"ssl.client.auth={auth} needs ssl.truststore.location (PEM CA certificates)")
        ctx.load_verify_locations(trust)
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def principal_from_certificate(der: bytes | None) -> str:
    """``User:`` + the subject's distinguished name, most specific part first (RFC 2253), as Kafka's
    default SSL principal builder names it; ANONYMOUS without a certificate."""
    if not der:
        return ANONYMOUS
    from cryptography import x509  # deferred: only a TLS client certificate needs it

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()


# ---------------------------------------------------------------------------------------------- SASL


def plain_users(props: Mapping[str, Any], listener: str) -> dict[str, str]:
    """The ``user_NAME="password"`` entries of the listener's PLAIN JAAS line."""
    jaas = (
        setting(props, listener, "plain.sasl.jaas.config")
        or setting(props, listener, "sasl.jaas.config")
        or ""
    )
    return dict(re.findall(r'user_([^=\s]+)\s*=\s*"([^"]*)"', str(jaas)))


def enabled_mechanisms(props: Mapping[str, Any], listener: str) -> list[str]:
    raw = setting(props, listener, "sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    mechs = [m.strip().upper() for m in str(raw).split(",") if m.strip()]
    bad = [m for m in mechs if m not in SASL_MECHANISMS]
    if bad:
        raise ValueError(f"sasl.enabled.mechanisms: kafkalite serves {', '.join(SASL_MECHANISMS)}, not {bad}")
    return mechs


class SaslAuthenticator:
    """The SASL state of one connection: SaslHandshake picks a mechanism, SaslAuthenticate carries its
    messages. ``scram_lookup(mechanism, user)`` returns the stored ``ScramCredential`` or None."""

    def __init__(
        self,
        mechanisms: list[str],
        plain: Mapping[str, str],
        scram_lookup: Callable[[str, str], ScramCredential | None],
    ) -> None:
        self.mechanisms = mechanisms
        self.plain = dict(plain)
        self.scram_lookup = scram_lookup
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None

    @property
    def done(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> int:
        if self.mechanism is not None:
            return ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            return UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        if mechanism in MECHANISMS:
            self._scram = ScramServer(mechanism, lambda user: self.scram_lookup(mechanism, user))
        return 0

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes]:
        """``(error_code, error_message, bytes for the client)``; after an error the connection closes."""
        if self.mechanism is None or self.done:
            return ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake, or after authentication", b""
        failed = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"  # noqa: E501
        if self.mechanism == "PLAIN":
            parts = token.split(b"\x00")
            if len(parts) != 3:
                return SASL_AUTHENTICATION_FAILED, "Authentication failed: invalid SASL/PLAIN response", b""
            authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
            if authzid and authzid != user:
                return (
                    SASL_AUTHENTICATION_FAILED,
                    "Authentication failed: Client requested an authorization id that is different from username",
                    b"",
                )  # noqa: E501
            expected = self.plain.get(user)
            if expected is None or expected != password:
                return SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password", b""
            self.principal = f"User:{user}"
            return 0, None, b""
        assert self._scram is not None
        try:
            out = self._scram.step(token)
        except ScramError as e:
            return SASL_AUTHENTICATION_FAILED, failed if "credentials" in str(e) else f"{failed}: {e}", b""
        if self._scram.state == "done":
            self.principal = f"User:{self._scram.user}"
        return 0, None, out


__all__ = [
    "Listener", "SaslAuthenticator", "enabled_mechanisms", "parse_listeners", "plain_users",
    "principal_from_certificate", "protocol_map", "server_ssl_context", "setting",
]  # fmt: skip
