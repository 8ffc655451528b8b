"""The security admin APIs, answered at the listener from the broker's store link and authorizer:
CreateAcls, DescribeAcls, DeleteAcls, DescribeUserScramCredentials, AlterUserScramCredentials. On a KRaft
broker the describes read its metadata image and the changes go to the active controller (``FORWARDED``).

SCRAM credentials live where Kafka keeps them, ``/config/users/<user>`` as
``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``.
A client sends a salted password, never the password (KIP-554); the broker derives the two keys it keeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kafkalite.coordination.store import NoNode
from kafkalite.protocol.api import Request
from kafkalite.protocol.codec.binding import from_wire
from kafkalite.protocol.security_admin import (
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
)
from kafkalite.security.acl import (
    AccessControlEntry,
    Operation,
    ResourcePattern,
    binding_from_wire,
    binding_to_wire,
    filter_from_wire,
    validate,
)
from kafkalite.security.scram import (
    MECHANISM_TYPES,
    ScramCredential,
    ScramError,
    check_iterations,
)

USERS = "/config/users"
SECURITY_DISABLED, INVALID_REQUEST, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL = 54, 42, 91, 93
CLUSTER_DENIED = 31
ACL_APIS = {29, 30, 31}
SCRAM_APIS = {50, 51}
APIS = ACL_APIS | SCRAM_APIS
FORWARDED: dict[int, type[Request]] = {
    30: CreateAclsRequest,
    31: DeleteAclsRequest,
    51: AlterUserScramCredentialsRequest,
}
"""What a KRaft broker forwards to the active controller instead of answering itself (as Kafka's)."""
_MECH_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}


# ------------------------------------------------------------------------------------- SCRAM users


def _user_config(zk: Any, user: str) -> dict[str, str]:
    try:
        data, _ = zk.get(f"{USERS}/{user}")
    except NoNode:
        return {}
    return dict(json.loads(data or b"{}").get("config", {}))


def _write_user_config(zk: Any, user: str, config: dict[str, str]) -> None:
    path = f"{USERS}/{user}"
    data = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
    try:
        zk.set(path, data)
    except NoNode:
        zk.create(path, data, make_parents=True)


def scram_credential(zk: Any, mechanism: str, user: str) -> ScramCredential | None:
    text = _user_config(zk, user).get(mechanism)
    return ScramCredential.decode(text) if text else None


def set_scram_credential(zk: Any, user: str, mechanism: str, credential: ScramCredential) -> None:
    if not user:
        raise ScramError("the user name is empty")
    check_iterations(credential.iterations)
    config = _user_config(zk, user)
    config[mechanism] = credential.encode()
    _write_user_config(zk, user, config)


def add_scram_user(
    zk: Any, user: str, password: str, mechanism: str = "SCRAM-SHA-256", iterations: int = 4096
) -> None:
    """What ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users`` does."""
    set_scram_credential(zk, user, mechanism, ScramCredential.create(mechanism, password, iterations))


def _alter_scram(zk: Any, body: dict) -> dict:
    results: dict[str, tuple[int, str | None]] = {}
    for d in body.get("deletions") or []:
        mech = _MECH_NAMES.get(d["mechanism"])
        config = _user_config(zk, d["name"])
        if mech is None:
            results[d["name"]] = (UNACCEPTABLE_CREDENTIAL, f"unknown SCRAM mechanism {d['mechanism']}")
        elif mech not in config:
            results[d["name"]] = (RESOURCE_NOT_FOUND, f"no {mech} credential for {d['name']!r}")
        else:
            del config[mech]
            _write_user_config(zk, d["name"], config)
            results.setdefault(d["name"], (0, None))
    for u in body.get("upsertions") or []:
        mech = _MECH_NAMES.get(u["mechanism"])
        try:
            if mech is None:
                raise ScramError(f"unknown SCRAM mechanism {u['mechanism']}")
            check_iterations(u["iterations"])
            cred = ScramCredential.from_salted(mech, u["salted_password"], u["salt"], u["iterations"])
            set_scram_credential(zk, u["name"], mech, cred)
            results.setdefault(u["name"], (0, None))
        except ScramError as e:
            results[u["name"]] = (UNACCEPTABLE_CREDENTIAL, str(e))
    return {"results": [{"user": n, "error_code": c, "error_message": m} for n, (c, m) in results.items()]}


def _zk_users(zk: Any) -> tuple[list[str], Callable[[str], dict[str, int]]]:
    """Every SCRAM user in the store, and a user's iterations by mechanism."""
    try:
        names = sorted(zk.get_children(USERS))
    except NoNode:
        names = []

    def iterations(user: str) -> dict[str, int]:
        config = _user_config(zk, user)
        return {m: ScramCredential.decode(v).iterations for m, v in config.items() if m in MECHANISM_TYPES}

    return names, iterations


def _kraft_users(broker: Any) -> tuple[list[str], Callable[[str], dict[str, int]]]:
    """The same from a KRaft broker's published metadata image."""
    scram = broker.publisher.published.scram if broker.publisher is not None else {}

    def iterations(user: str) -> dict[str, int]:
        return {_MECH_NAMES[m]: c.iterations for (u, m), c in scram.items() if u == user and m in _MECH_NAMES}

    return sorted({u for u, _ in scram}), iterations


def _describe_scram(users_of: tuple[list[str], Callable[[str], dict[str, int]]], body: dict) -> dict:
    users = body.get("users")
    everyone, iterations = users_of
    names = everyone if users is None else [u["name"] for u in users]
    out = []
    for name in names:
        infos = [{"mechanism": MECHANISM_TYPES[m], "iterations": n}
                 for m, n in sorted(iterations(name).items())]  # fmt: skip
        if not infos:
            if users is not None:
                out.append({"user": name, "error_code": RESOURCE_NOT_FOUND,
                            "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                            "credential_infos": []})  # fmt: skip
            continue
        out.append({"user": name, "error_code": 0, "credential_infos": infos})
    return {"error_code": 0, "results": out}


# -------------------------------------------------------------------------------------------- ACLs


def _create_acls(authz: Any, body: dict) -> dict:
    results, good = [], []
    for c in body["creations"]:
        try:
            b = binding_from_wire(c)
            why = validate(b)
        except ValueError as e:
            b, why = None, f"invalid ACL: {e}"
        results.append({"error_code": INVALID_REQUEST if why else 0, "error_message": why})
        if not why:
            good.append(b)
    if good:
        authz.create_acls(good)
    return {"results": results}


def _describe_acls(authz: Any, body: dict) -> dict:
    try:
        found = authz.describe_acls(filter_from_wire(body))
    except ValueError as e:
        return {"error_code": INVALID_REQUEST, "error_message": str(e), "resources": []}
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in found:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    return {"error_code": 0, "resources": [
        {"resource_type": int(p.type), "resource_name": p.name, "pattern_type": int(p.pattern),
         "acls": [{"principal": e.principal, "host": e.host, "operation": int(e.operation),
                   "permission_type": int(e.permission)} for e in entries]}
        for p, entries in by_pattern.items()]}  # fmt: skip


def _delete_acls(authz: Any, body: dict) -> dict:
    try:
        filters = [filter_from_wire(f) for f in body["filters"]]
    except ValueError as e:
        return {"filter_results": [{"error_code": INVALID_REQUEST, "error_message": str(e), "matching_acls": []}
                                   for _ in body["filters"]]}  # fmt: skip
    matched = authz.delete_acls(filters)
    return {"filter_results": [
        {"error_code": 0, "matching_acls": [{"error_code": 0, **binding_to_wire(b)} for b in group]}
        for group in matched]}  # fmt: skip


def refusal(api_key: int, body: dict, code: int, msg: str | None) -> dict:
    """The whole request refused with ``code``, in the shape of ``api_key``'s answer."""
    err = {"error_code": code, "error_message": msg}
    if api_key == 29:
        return {**err, "resources": []}
    if api_key == 30:
        return {"results": [err for _ in body["creations"]]}
    if api_key == 31:
        return {"filter_results": [{**err, "matching_acls": []} for _ in body["filters"]]}
    if api_key == 50:
        return {**err, "results": []}
    users = {x["name"] for k in ("deletions", "upsertions") for x in body.get(k) or []}
    return {"results": [{"user": u, **err} for u in sorted(users)]}


def handle(api_key: int, body: dict, broker: Any, allowed: bool) -> dict | None:
    """The answer to one security admin request; ``allowed``: the caller passed the cluster ACL check.

    None on a KRaft broker for a change (CreateAcls, DeleteAcls, AlterUserScramCredentials): the active
    controller writes it, so the listener sends ``forwarded_request`` to the broker, which forwards it."""
    if api_key in ACL_APIS and broker.authorizer is None:
        return refusal(api_key, body, SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not allowed:
        return refusal(api_key, body, CLUSTER_DENIED, "Cluster authorization failed.")
    kraft = getattr(broker, "kraft", False)
    if kraft and api_key in FORWARDED:
        return None
    if api_key == 29:
        return _describe_acls(broker.authorizer, body)
    if api_key == 30:
        return _create_acls(broker.authorizer, body)
    if api_key == 31:
        return _delete_acls(broker.authorizer, body)
    if api_key == 50:
        return _describe_scram(_kraft_users(broker) if kraft else _zk_users(broker.zk), body)
    return _alter_scram(broker.zk, body)


def forwarded_request(api_key: int, version: int, body: dict) -> Request:
    """The request a KRaft broker forwards to the controller for a decoded CreateAcls, DeleteAcls or
    AlterUserScramCredentials body."""
    return from_wire(FORWARDED[api_key], body, version)


def broker_scram_credential(broker: Any, mechanism: str, user: str) -> Any:
    """``user``'s credential for ``mechanism`` on ``broker``: from its metadata image in KRaft mode, else
    from the store; None when there is none (or no store link yet)."""
    if getattr(broker, "kraft", False):
        return broker.scram_credential(mechanism, user)
    return None if broker.zk is None else scram_credential(broker.zk, mechanism, user)


def required_operation(api_key: int) -> Operation:
    return Operation.DESCRIBE if api_key in (29, 50) else Operation.ALTER


__all__ = [
    "APIS",
    "FORWARDED",
    "add_scram_user",
    "broker_scram_credential",
    "forwarded_request",
    "handle",
    "refusal",
    "required_operation",
    "scram_credential",
    "set_scram_credential",
]
