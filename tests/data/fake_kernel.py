"""A kernel with planted faults, for the tests of ``--external``: wgk's served kernel
(``wgk.impl.protocol.serve``) with one fault chosen by the first argument.

- ``honest``: none;
- ``diverge``: a ``dispatch`` rejected ``dependency-not-done`` is answered ``unknown-task``;
- ``subset``: declares only ``dispatch`` and ``heartbeat`` (and decides them honestly), and
  one process on a storage;
- ``garbage``: answers a line that is not JSON to the first ``apply``;
- ``hang``: never answers the first ``apply``;
- ``die``: exits with a message on stderr at the first ``apply``;
- ``lying-hook``: declares the crash hook and ignores ``crash-after``;
- ``uncounted``: declares the crash hook and never says how many boundaries it passed;
- ``early-write``: asked to crash before its first durable boundary (``crash-after`` 0), it
  decides and commits the request first, then dies;
- ``split-brain``: an instance that joins a storage another instance runs on works on a
  private copy of it (it sees none of the other's commits, nor they its own);
- ``no-reset``: a kernel written before ``reset``: it does not declare it and answers one
  with an error;
- ``stale-reset``: declares ``reset`` and answers it, but keeps its kernel: the next ``start``
  goes on with the storage it had, not the new one.
"""
import fcntl
import os
import shutil
import sys
import tempfile
import time

from wgk.impl.protocol.serve import CAPABILITIES, Refused, Served, serve

MODE = sys.argv[1] if len(sys.argv) > 1 else "honest"


class Fake(Served):
    def start(self, msg):
        if MODE == "stale-reset" and self.kernel is not None:
            return {"started": True, "capabilities": CAPABILITIES}
        reply = super().start(msg)
        if MODE == "subset":
            reply["capabilities"] = dict(reply["capabilities"], kinds=["dispatch", "heartbeat"],
                                        processes=1)
        if MODE == "no-reset":
            reply["capabilities"] = {k: v for k, v in reply["capabilities"].items()
                                     if k != "reset"}
        return reply

    def reset(self):
        if MODE == "no-reset":
            if os.environ.get("FAKE_KERNEL_RESETS"):     # where the test looks for one sent
                with open(os.environ["FAKE_KERNEL_RESETS"], "a") as f:
                    f.write("reset\n")
            raise Refused("unknown op 'reset'")
        if MODE == "stale-reset":
            return {"reset": True}
        return super().reset()

    def recover(self, msg):
        if MODE == "split-brain":
            fd = os.open(os.path.join(msg["storage"], "instances.lock"), os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:                  # another instance runs: copy the storage
                private = os.path.join(tempfile.mkdtemp(prefix="wgk-split-"), "storage")
                shutil.copytree(msg["storage"], private)
                msg = dict(msg, storage=private)
            finally:
                os.close(fd)
        return super().recover(msg)

    def apply(self, msg):
        if MODE == "garbage":
            sys.stdout.write("Segmentation fault (core dumped)\n")
            sys.stdout.flush()
        elif MODE == "hang":
            time.sleep(3600)
        elif MODE == "die":
            sys.stderr.write("fake kernel: assertion failed in apply\n")
            sys.stderr.flush()
            os._exit(3)
        elif MODE == "early-write" and msg.get("crash-after") == 0:
            super().apply({k: v for k, v in msg.items() if k != "crash-after"})
            os.kill(os.getpid(), 9)
        elif MODE == "lying-hook":
            msg = {k: v for k, v in msg.items() if k != "crash-after"}
        reply = super().apply(msg)
        if MODE == "uncounted":
            del reply["boundaries"]
        d = reply["decision"]
        if MODE == "diverge" and msg["request"].get("kind") == "dispatch" and \
                d.get("code") == "dependency-not-done":
            reply["decision"] = dict(d, code="unknown-task")
        return reply


if __name__ == "__main__":
    sys.exit(serve(sys.stdin, sys.stdout, Fake()))
