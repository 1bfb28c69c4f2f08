"""Owner liveness from /proc: pid plus birth time, never ``kill(pid, 0)`` alone.

A process's birth is its start time, read from field 22 of ``/proc/<pid>/stat``
(clock ticks since boot) and made absolute with the boot time from
``/proc/stat`` (``btime``), so that ``(pid, birth)`` names one process across
reboots. A live pid with another birth is another process (pid reuse); a
zombie has exited and is no owner.
"""
from __future__ import annotations

import os
import signal


class ProcProcessTable:
    def __init__(self, proc: str = "/proc"):
        self.proc = proc
        self.hz = os.sysconf("SC_CLK_TCK")
        self.boot = self._boot_seconds()

    def _boot_seconds(self) -> int:
        with open(os.path.join(self.proc, "stat"), "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return int(line.split()[1])
        raise RuntimeError(f"{self.proc}/stat has no btime line")

    def birth_of(self, pid: int) -> int | None:
        """Absolute start time in clock ticks of the process holding ``pid`` (None if none)."""
        if pid <= 0:
            return None
        try:
            with open(os.path.join(self.proc, str(pid), "stat"), "rb") as f:
                data = f.read()
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            return None
        # the command name may hold spaces and parentheses: fields resume after the last ')'
        fields = data[data.rindex(b")") + 2:].split()
        state, start_ticks = fields[0], int(fields[19])
        # guards: liveness-needs-exact-birth
        if state in (b"Z", b"X"):
            return None
        return self.boot * self.hz + start_ticks

    def adopt(self, pid: int, birth: int) -> None:
        """Real processes exist or not: the kernel only watches them."""

    def kill(self, pid: int) -> None:
        """The environment step owner-dies on a real process: SIGKILL, then reap if ours."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass

    def owner(self, pid: int | None = None) -> tuple[int, int]:
        """(pid, birth) of a process (this one by default), as a worker reports itself."""
        pid = os.getpid() if pid is None else pid
        birth = self.birth_of(pid)
        if birth is None:
            raise ProcessLookupError(f"no live process {pid}")
        return pid, birth
