"""The mover's copy (``copy_step``) under whatever happens to the current log while
it runs: appends in new leader epochs, truncation (a follower that diverged), DeleteRecords. Whatever the
interleaving, once the copy has caught up the future log holds exactly the current log's records."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.broker.replica_alter_log_dirs import copy_step
from kafkalite.records import build_batch
from kafkalite.storage import Log

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.booleans()),  # batches, new epoch?
        st.tuples(st.just("copy"), st.integers(1, 400)),  # bytes the step may copy
        st.tuples(st.just("truncate"), st.floats(0, 1)),  # where, as a fraction of the log
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
    ),
    max_size=30,
)


def _records(log: Log) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in log.iter_records()]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(OPS)
def test_the_copy_ends_equal_to_the_current_log_whatever_happened_to_it(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("copy")
    cur = Log.open(root / "a" / "t-0")
    fut = Log.open(root / "b" / "t-0.x-future")
    epoch, n = 0, 0
    for op in ops:
        if op[0] == "append":
            if op[2]:
                epoch += 1
            for _ in range(op[1]):
                cur.append(build_batch([(b"k", b"v%d" % n)], timestamp=1000 + n), leader_epoch=epoch)
                n += 1
        elif op[0] == "copy":
            copy_step(cur, fut, op[1])
        elif op[0] == "truncate":
            low = cur.log_start_offset
            cur.truncate_to(low + int(op[1] * (cur.log_end_offset - low)))
            epoch += 1  # a follower truncates when a new leader, in a new epoch, had less
        else:
            low = cur.log_start_offset
            cur.delete_records(low + int(op[1] * (cur.log_end_offset - low)))
    while not copy_step(cur, fut, 300):
        pass
    assert fut.log_end_offset == cur.log_end_offset
    want = [(o, v) for o, v in _records(cur) if o >= cur.log_start_offset]
    got = [(o, v) for o, v in _records(fut) if o >= cur.log_start_offset]
    assert got == want
    cur.close()
    fut.close()
