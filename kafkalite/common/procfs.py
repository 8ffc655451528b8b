"""What Linux's ``/proc`` says of a process: its state, parent and process group.

A child whose parent died belongs to init, which in a container may reap it a second or more after it
exited; until then it is a zombie that ``kill(pid, 0)`` still finds. Whoever waits for a process to be
gone asks ``exited`` instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

__all__ = ["ProcStat", "exited", "live_group_members", "proc_stat"]


class ProcStat(NamedTuple):
    state: str  # R, S, D, Z (zombie), ...
    ppid: int
    pgrp: int


def proc_stat(pid: int | str) -> ProcStat | None:
    """``/proc/<pid>/stat``'s state, parent and group; None when there is no such process (or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name sits in parentheses and may hold spaces or ")": the fields follow the last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return ProcStat(fields[0], int(fields[1]), int(fields[2]))


def exited(pid: int) -> bool:
    """True when ``pid`` has exited and only waits to be reaped (a zombie)."""
    st = proc_stat(pid)
    return st is not None and st.state == "Z"


def live_group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not exited (zombies left out)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = proc_stat(entry.name)
            if st is not None and st.pgrp == pgid and st.state != "Z":
                members.append(int(entry.name))
    return members
