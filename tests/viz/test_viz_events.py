"""Event-log lines become a table a chapter can show whole."""

from kafkalite.net.sim import Event
from kafkalite.viz.events import events_table


def test_one_row_per_event_one_column_per_field():
    events = [
        Event(5, 1, "leader_elected", {"tp": "t-0", "leader": 1, "isr": (1, 2, 3)}),
        Event(45, 1, "hw", {"tp": "t-0", "hw": 1, "old": 0}),
        Event(50, None, "heal_all", {}),
    ]
    table = events_table(events)
    assert list(table.columns) == ["time (ms)", "node", "event", "tp", "leader", "isr", "hw", "old"]
    assert table["time (ms)"].tolist() == [5, 45, 50]
    assert table["node"].tolist() == ["1", "1", "-"]
    assert table["isr"].tolist() == ["1, 2, 3", "", ""]
    assert table["hw"].tolist() == ["", 1, ""]


def test_fields_pick_and_order_the_columns():
    events = [Event(1, "zk", "expire_session", {"session": 7, "broker": 2})]
    table = events_table(events, fields=["broker", "missing"])
    assert list(table.columns) == ["time (ms)", "node", "event", "broker", "missing"]
    assert table.iloc[0].tolist() == [1, "zk", "expire_session", 2, ""]


def test_no_events_still_has_the_columns():
    assert list(events_table([], fields=["tp"]).columns) == ["time (ms)", "node", "event", "tp"]
