"""Throw-away certificates for the book and the tests: a CA, a broker certificate for ``localhost`` /
``127.0.0.1``, and client certificates whose subject becomes the client's principal.

Made with the ``cryptography`` package (EC P-256 keys, SHA-256 signatures). The PEM files are what the
listener settings point at: ``ca.pem`` is the truststore of both sides, ``broker.pem`` (key and
certificate in one file) the broker's keystore, ``<client>.pem`` / ``<client>.key`` a client's.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAYS = 30


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkalite"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])  # fmt: skip


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool, server: bool = False):  # noqa: ANN001, ANN202
    now = dt.datetime.now(dt.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=DAYS))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        b = b.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_certificates(directory: str | Path, clients: tuple[str, ...] = ("alice", "bob")) -> dict[str, Path]:
    """Write ``ca.pem``, ``broker.pem`` and one ``<client>.pem`` + ``<client>.key`` per client name into
    ``directory``; returns their paths by name (``ca``, ``broker``, ``alice``, ``alice.key``, ...)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kafkalite test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    out = {"ca": d / "ca.pem", "broker": d / "broker.pem"}
    out["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    bkey = ec.generate_private_key(ec.SECP256R1())
    broker = _cert(_name("localhost"), bkey, ca_name, ca_key, ca=False, server=True)
    out["broker"].write_bytes(_key_pem(bkey) + broker.public_bytes(serialization.Encoding.PEM))
    for c in clients:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(_name(c), key, ca_name, ca_key, ca=False)
        out[c], out[f"{c}.key"] = d / f"{c}.pem", d / f"{c}.key"
        out[c].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        out[f"{c}.key"].write_bytes(_key_pem(key))
    return out


__all__ = ["make_certificates"]
