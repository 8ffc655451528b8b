"""The seeds' running examples as synthetic event streams, at any scale: a website's user-behaviour log
and an order system's change records.

Keys follow a Zipf law: the key of rank r (1 = most popular) is drawn with probability proportional to
1 / r**s. ``s = 0`` is uniform; around 1 a few keys carry a large share of the traffic, which is what
makes one partition (and one Spark task) hot. Everything is drawn from ``random.Random(seed)``, so the
same arguments give the same bytes on every run and every machine. Timestamps advance by exponentially
distributed gaps (a Poisson arrival process) from ``start_ms``, never from the wall clock.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator

from kafkalite.datasets.load import DatasetError, Event, _progress

__all__ = ["ORDER_STATUSES", "order_changes", "user_behaviour", "zipf_cum_weights", "zipf_shares"]

START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z, the project's usual virtual epoch
CHUNK = 10_000  # events drawn per round: amortises the random draws and the progress-bar updates

PAGES = ("/", "/search", "/item", "/cart", "/checkout", "/account")
# What a visitor does next, with weights: mostly views and clicks, few purchases.
ACTIONS = (("view", 60), ("click", 25), ("add_to_cart", 10), ("purchase", 5))
# An order's life: created, then paid, shipped, delivered; created or paid orders may be cancelled.
ORDER_STATUSES = ("created", "paid", "shipped", "delivered", "cancelled")
CANCEL_PROBABILITY = 0.1
OPEN_TARGET = 1_000  # orders open at the same time, roughly


def _check(n: int, keys: int, zipf_s: float, mean_gap_ms: float) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise DatasetError(f"n must be an integer >= 0, got {n!r}")
    if not isinstance(keys, int) or isinstance(keys, bool) or keys < 1:
        raise DatasetError(f"the number of keys must be an integer >= 1, got {keys!r}")
    if not (isinstance(zipf_s, int | float) and math.isfinite(zipf_s) and zipf_s >= 0):
        raise DatasetError(f"zipf_s must be a finite number >= 0, got {zipf_s!r}")
    if not (isinstance(mean_gap_ms, int | float) and math.isfinite(mean_gap_ms) and mean_gap_ms > 0):
        raise DatasetError(f"mean_gap_ms must be a number > 0, got {mean_gap_ms!r}")


def zipf_cum_weights(keys: int, s: float) -> list[float]:
    """Cumulative Zipf weights for ranks 1..keys (for ``random.Random.choices(cum_weights=...)``)."""
    return list(itertools.accumulate(1.0 / (rank**s) for rank in range(1, keys + 1)))


def zipf_shares(keys: int, s: float) -> list[float]:
    """The probability of each rank, most popular first: what a long run's key counts converge to."""
    weights = [1.0 / (rank**s) for rank in range(1, keys + 1)]
    total = sum(weights)
    return [w / total for w in weights]


def _times(rng: random.Random, start_ms: int, mean_gap_ms: float, n: int) -> list[int]:
    rate = 1.0 / mean_gap_ms
    t = float(start_ms)
    out = []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(int(t))
    return out


def user_behaviour(
    n: int,
    *,
    seed: int = 0,
    users: int = 10_000,
    zipf_s: float = 1.1,
    items: int = 1_000,
    start_ms: int = START_MS,
    mean_gap_ms: float = 1.0,
    progress: bool | None = None,
) -> Iterator[Event]:
    """``n`` website events keyed by user id (``user-000042``): who did what on which page and item.

    Users are Zipf-distributed with exponent ``zipf_s`` (user-000000 is the busiest); items too, with the
    same exponent. Values are JSON: ``{"user", "action", "page", "item", "ts"}``.
    """
    _check(n, users, zipf_s, mean_gap_ms)
    if not isinstance(items, int) or items < 1:
        raise DatasetError(f"items must be an integer >= 1, got {items!r}")
    rng = random.Random(seed)
    user_cw = zipf_cum_weights(users, zipf_s)
    item_cw = zipf_cum_weights(items, zipf_s)
    user_ids = range(users)
    item_ids = range(items)
    actions = [a for a, _ in ACTIONS]
    action_w = [w for _, w in ACTIONS]
    width = len(str(users - 1))
    clock = start_ms
    with _progress(n, progress, "user_behaviour") as bar:
        for done in range(0, n, CHUNK):
            k = min(CHUNK, n - done)
            # Always a full chunk of draws, so that a longer run begins with exactly the shorter run.
            who = rng.choices(user_ids, cum_weights=user_cw, k=CHUNK)
            what = rng.choices(actions, weights=action_w, k=CHUNK)
            where = rng.choices(PAGES, k=CHUNK)
            item = rng.choices(item_ids, cum_weights=item_cw, k=CHUNK)
            stamps = _times(rng, clock, mean_gap_ms, CHUNK)
            clock = stamps[-1]
            for u, a, p, i, t in itertools.islice(zip(who, what, where, item, stamps, strict=True), k):
                user = f"user-{u:0{width}d}"
                value = f'{{"user":"{user}","action":"{a}","page":"{p}","item":{i},"ts":{t}}}'
                yield Event(user.encode(), value.encode(), t)
            bar.update(k)


def order_changes(
    n: int,
    *,
    seed: int = 0,
    customers: int = 10_000,
    zipf_s: float = 1.1,
    key_by: str = "customer",
    start_ms: int = START_MS,
    mean_gap_ms: float = 1.0,
    progress: bool | None = None,
) -> Iterator[Event]:
    """``n`` change records of an order table, as change data capture would emit them.

    Each record is an order's new state: ``{"order", "customer", "status", "amount_cents", "version",
    "ts"}``. A new order comes from a Zipf-distributed customer; an open order advances created -> paid
    -> shipped -> delivered (or is cancelled while created or paid). ``key_by="customer"`` (default)
    keys by customer, so skew shows and each customer's orders stay in order; ``key_by="order"`` keys
    by order id, as a table's primary key would (the topic can then be compacted).
    """
    _check(n, customers, zipf_s, mean_gap_ms)
    if key_by not in ("customer", "order"):
        raise DatasetError(f"key_by must be 'customer' or 'order', got {key_by!r}")
    rng = random.Random(seed)
    cust_cw = zipf_cum_weights(customers, zipf_s)
    cust_ids = range(customers)
    width = len(str(customers - 1))
    open_orders: list[list] = []  # [order id, customer, status index, amount, version]
    next_order = 0
    clock = start_ms
    with _progress(n, progress, "order_changes") as bar:
        for done in range(0, n, CHUNK):
            k = min(CHUNK, n - done)
            stamps = _times(rng, clock, mean_gap_ms, CHUNK)  # a full chunk: see user_behaviour
            clock = stamps[-1]
            new_customers = iter(rng.choices(cust_ids, cum_weights=cust_cw, k=CHUNK))
            for t in stamps[:k]:
                # Open a new order, or advance a random open one. An order lives for about four records,
                # so opening at 0.5 below the target and 0.2 above keeps about OPEN_TARGET orders open.
                if not open_orders or rng.random() < (0.5 if len(open_orders) < OPEN_TARGET else 0.2):
                    order = [next_order, next(new_customers), 0, rng.randrange(500, 50_000), 1]
                    next_order += 1
                    open_orders.append(order)
                else:
                    i = rng.randrange(len(open_orders))
                    order = open_orders[i]
                    if order[2] <= 1 and rng.random() < CANCEL_PROBABILITY:
                        order[2] = 4  # cancelled
                    else:
                        order[2] += 1
                    order[4] += 1
                    if order[2] >= 3:  # delivered or cancelled: the order is closed
                        open_orders[i] = open_orders[-1]
                        open_orders.pop()
                oid = f"order-{order[0]:08d}"
                cust = f"customer-{order[1]:0{width}d}"
                value = (
                    f'{{"order":"{oid}","customer":"{cust}","status":"{ORDER_STATUSES[order[2]]}",'
                    f'"amount_cents":{order[3]},"version":{order[4]},"ts":{t}}}'
                )
                yield Event((cust if key_by == "customer" else oid).encode(), value.encode(), t)
            bar.update(k)
