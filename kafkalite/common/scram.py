"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials as Kafka stores them, and both ends
of the exchange.

A broker never keeps a password. It keeps, per user and mechanism, a random salt, an iteration count, and
two keys derived from the salted password: ``stored_key = H(HMAC(salted, "Client Key"))`` checks the
client's proof, ``server_key = HMAC(salted, "Server Key")`` signs the server's answer so that the client
knows it talks to a broker that holds the credential. Kafka writes them under ``/config/users/<user>`` as
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.

The exchange is four messages: client-first (user name and a client nonce), server-first (the nonce
extended by the server, the salt, the iterations), client-final (a proof that needs the salted password,
never the password itself), server-final (the server's signature). An eavesdropper sees the salt and a
proof good for this one nonce only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # AlterUserScramCredentials' mechanism codes
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds
GS2_HEADER = "n,,"


class ScramError(ValueError):
    """A SCRAM message that is malformed or does not verify; the text says which."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as e:
        raise ScramError(f"{what} is not base64") from e


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r} (use one of {sorted(MECHANISMS)})") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode(), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted(cls, mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
        h = _hash(mechanism)
        client_key = hmac.digest(salted, b"Client Key", h)
        return cls(
            salt=salt,
            stored_key=hashlib.new(h, client_key).digest(),
            server_key=hmac.digest(salted, b"Server Key", h),
            iterations=iterations,
        )

    @classmethod
    def create(
        cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
    ) -> ScramCredential:
        check_iterations(iterations)
        salt = salt if salt is not None else os.urandom(32)
        return cls.from_salted(
            mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
        )

    def encode(self) -> str:
        """Kafka's text form, as kept in ``/config/users/<user>``."""
        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        parts = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
        try:
            return cls(
                unb64(parts["salt"], "salt"),
                unb64(parts["stored_key"], "stored_key"),
                unb64(parts["server_key"], "server_key"),
                int(parts["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ScramError(f"not a SCRAM credential: {text!r}") from e


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}"
        )


def _attrs(message: str, what: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed {what}: {message!r}")
        out[key] = value
    return out


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def escape_user(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_user(name: str) -> str:
    if "=" in name.replace("=3D", "").replace("=2C", ""):
        raise ScramError(f"invalid escape in user name {name!r}")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """The broker's side of one exchange. ``lookup(user)`` returns the user's credential or None."""

    def __init__(self, mechanism: str, lookup, nonce: str | None = None) -> None:  # noqa: ANN001
        self.mechanism = mechanism
        self.h = _hash(mechanism)
        self.lookup = lookup
        self.server_nonce = nonce or b64(os.urandom(18))
        self.user: str | None = None
        self.state = "first"
        self._credential: ScramCredential | None = None

    def step(self, message: bytes) -> bytes:
        """Answer the client's next message; raises ``ScramError`` when it is malformed or the proof fails."""
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("a SCRAM message is not UTF-8") from None
        if self.state == "first":
            return self._first(text)
        if self.state == "final":
            return self._final(text)
        raise ScramError("the SCRAM exchange is already over")

    def _first(self, text: str) -> bytes:
        if not text.startswith(GS2_HEADER):
            raise ScramError("client-first must start with 'n,,' (no channel binding, no authzid)")
        self.client_first_bare = text[len(GS2_HEADER) :]
        attrs = _attrs(self.client_first_bare, "client-first")
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("client-first needs n= (user) and r= (nonce)")
        self.user = unescape_user(attrs["n"])
        cred = self.lookup(self.user)
        # An unknown user still gets a server-first (with a made-up salt), so that the answer does not
        # tell a prober which users exist; the proof fails later either way.
        self._credential = cred
        salt = cred.salt if cred else hashlib.sha256(self.user.encode()).digest()
        iterations = cred.iterations if cred else MIN_ITERATIONS
        self.nonce = attrs["r"] + self.server_nonce
        self.server_first = f"r={self.nonce},s={b64(salt)},i={iterations}"
        self.state = "final"
        return self.server_first.encode()

    def _final(self, text: str) -> bytes:
        self.state = "done"
        attrs = _attrs(text, "client-final")
        if attrs.get("c") != b64(GS2_HEADER.encode()):
            raise ScramError("client-final carries the wrong channel binding")
        if attrs.get("r") != self.nonce:
            raise ScramError("client-final carries the wrong nonce")
        if "p" not in attrs:
            raise ScramError("client-final has no proof")
        proof = unb64(attrs["p"], "the proof")
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        cred = self._credential
        if cred is None:
            raise ScramError("invalid credentials")
        signature = hmac.digest(cred.stored_key, auth_message, self.h)
        if len(proof) != len(signature):
            raise ScramError("invalid credentials")
        client_key = _xor(proof, signature)
        if not hmac.compare_digest(hashlib.new(self.h, client_key).digest(), cred.stored_key):
            raise ScramError("invalid credentials")
        return f"v={b64(hmac.digest(cred.server_key, auth_message, self.h))}".encode()


class ScramClient:
    """The client's side, for kafkalite's own tools and for showing the exchange in the book."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self.mechanism, self.h = mechanism, _hash(mechanism)
        self.user, self.password = user, password
        self.client_nonce = nonce or b64(os.urandom(18))
        self.client_first_bare = f"n={escape_user(user)},r={self.client_nonce}"

    def first(self) -> bytes:
        return (GS2_HEADER + self.client_first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attrs(text, "server-first")
        if not attrs.get("r", "").startswith(self.client_nonce):
            raise ScramError("server-first does not extend our nonce")
        salt, iterations = unb64(attrs["s"], "salt"), int(attrs["i"])
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c={b64(GS2_HEADER.encode())},r={attrs['r']}"
        auth_message = f"{self.client_first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self.h)
        signature = hmac.digest(hashlib.new(self.h, client_key).digest(), auth_message, self.h)
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self.h), auth_message, self.h)
        return f"{without_proof},p={b64(_xor(client_key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attrs(server_final.decode(), "server-final")
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        if not hmac.compare_digest(unb64(attrs.get("v", ""), "the server signature"), self._server_signature):
            raise ScramError("the server's signature does not verify: it does not hold our credential")


__all__ = [
    "MAX_ITERATIONS", "MECHANISMS", "MECHANISM_TYPES", "MIN_ITERATIONS", "ScramClient", "ScramCredential",
    "ScramError", "ScramServer", "check_iterations", "salted_password",
]  # fmt: skip
