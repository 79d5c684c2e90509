"""A Ray cluster of several nodes on this machine, started the way an operator starts one:
``ray start --head``, then ``ray start --address HEAD`` for each further node, every node a
separate raylet with its own object store and workers, on the loopback address only.

Two things stand between ``ray start`` and a loopback cluster on Linux, and this module
handles both without touching Ray's files:

- Ray replaces 127.0.0.1 with the machine's outward address wherever it reads one (a node's
  ``--node-ip-address``, the ``--address`` it joins), so that other machines can reach it.
  With ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in the environment it keeps 127.0.0.1, as it
  does on macOS, which is enough for the head and for a driver.
- With that variable ``ray start --address`` refuses to join a cluster ("multi-node clusters
  are not supported on Windows and OSX"). Each ``ray start`` therefore runs through
  :func:`main` below (``python _cluster.py start ...``), which lets a node join and keeps the
  loopback address in that one process; the processes it starts keep the variable.

Every process a node starts descends from its ``ray start --block`` process, except Ray's
worker processes, which start sessions of their own but are still children of the node's
raylet; :meth:`RayNode.processes` walks that tree in ``/proc`` (so Linux only), recording each
process's start time so that a pid reused after it exits is never signalled.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# How long a node may take to start (a cold import of Ray on a loaded 2-core machine is several
# seconds) and to stop.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 3.0
READY = "Ray runtime started"


class ClusterError(RuntimeError):
    """A node could not be started here (the test that needed it skips, saying why)."""


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time in clock ticks) of every live process, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:  # exited while we looked
            continue
        # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":  # a zombie has exited; only its parent's wait is missing
            table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def _signal(processes: dict[int, int], sig: int) -> None:
    """Send ``sig`` to each pid that is still the process recorded (same start time)."""
    table = _proc_table()
    for pid, started in processes.items():
        if table.get(pid, (0, -1))[1] == started:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _alive(processes: dict[int, int]) -> dict[int, int]:
    table = _proc_table()
    return {pid: t for pid, t in processes.items() if table.get(pid, (0, -1))[1] == t}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RayNode:
    """One ``ray start --block`` process and what it started."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    # Every process seen in this node's tree, pid -> start time: a process that has left the
    # tree (its parent died first) is still this node's.
    seen: dict[int, int] = field(default_factory=dict)

    def processes(self) -> dict[int, int]:
        """This node's live processes (pid -> start time), the ``ray start`` process first."""
        table = _proc_table()
        root = self.process.pid
        if root in table:
            self.seen.setdefault(root, table[root][1])
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        stack = [p for p in self.seen if p in table and table[p][1] == self.seen[p]]
        while stack:
            pid = stack.pop()
            for child in children.get(pid, []):
                if child not in self.seen:
                    self.seen[child] = table[child][1]
                    stack.append(child)
        return _alive(self.seen)

    def kill(self) -> dict[int, int]:
        """SIGKILL every process of this node at once, as a machine that loses power: no
        drain, no goodbye to the cluster. Returns what was killed."""
        victims = self.processes()
        _signal(victims, signal.SIGKILL)
        return victims

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to every process (Ray's ``ray stop``, but only this node's), then SIGKILL
        to what is left after ``timeout``; reaps the ``ray start`` process."""
        victims = self.processes()
        _signal(victims, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(victims) and time.monotonic() < deadline:
            time.sleep(0.1)
            victims.update(self.processes())  # workers started while stopping
        _signal(_alive(victims), signal.SIGKILL)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # not ours to wait on forever
            pass


class LocalCluster:
    """A head and further nodes on 127.0.0.1, one CPU each and a small object store.

    ``env`` is what every node and every driver of this cluster runs with
    (:meth:`driver_env`): the loopback setting, a token for Ray's authentication generated
    for this cluster (nothing written to ``~/.ray``), and Ray's failure detection shortened
    from its defaults (a node missing 3 health checks 0.5 s apart is dead, where the default
    takes 5 checks 3 s apart) so that a test sees a lost node in seconds.
    """

    def __init__(self, root: Path, extra_env: dict[str, str] | None = None) -> None:
        if not sys.platform.startswith("linux"):
            raise ClusterError("a multi-node cluster on one machine is set up for Linux only")
        self.root = root
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[RayNode] = []
        self.env = {
            **os.environ,
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_health_check_period_ms": "500",
            "RAY_health_check_timeout_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
            # A stopping node leaves at once instead of draining for 30 s.
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
            **(extra_env or {}),
        }
        for key in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH"):  # not another cluster's
            self.env.pop(key, None)

    def driver_env(self) -> dict[str, str]:
        return dict(self.env)

    def _start(self, name: str, args: list[str], timeout: float) -> RayNode:
        log = self.root / f"{name}.log"
        common = [
            "--block",
            "--num-cpus=1",
            "--object-store-memory=100000000",
            "--dashboard-agent-listen-port=0",
            "--metrics-export-port=0",
            "--min-worker-port=0",
            "--max-worker-port=0",
            "--disable-usage-stats",
        ]
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, __file__, "start", *args, *common],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.root,
                start_new_session=True,  # a ^C in the test's terminal is the test's to handle
            )
        node = RayNode(name, process, log)
        self.nodes.append(node)
        deadline = time.monotonic() + timeout
        while True:
            node.processes()  # learn the tree while its root is alive
            text = log.read_text(errors="replace")
            if READY in text:
                return node
            if process.poll() is not None or time.monotonic() > deadline:
                why = "exited" if process.poll() is not None else f"not ready in {timeout:.0f} s"
                tail = "\n".join(text.splitlines()[-15:])
                raise ClusterError(f"ray node {name!r} {why}; its log ends:\n{tail}")
            time.sleep(0.1)

    def start_head(self, timeout: float = START_TIMEOUT_S) -> RayNode:
        temp = self.root / "ray"  # short: Ray's socket paths must fit in 107 bytes
        args = [
            "--head",
            f"--port={self.port}",
            "--node-ip-address=127.0.0.1",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
        ]
        return self._start("head", args, timeout)

    def add_node(self, timeout: float = START_TIMEOUT_S) -> RayNode:
        name = f"node{len(self.nodes)}"
        return self._start(name, [f"--address={self.address}"], timeout)

    def stop(self) -> None:
        """Every node, the head last; never raises (a teardown must finish)."""
        for node in reversed(self.nodes):
            try:
                node.stop()
            except Exception as exc:  # the other nodes must still stop
                print(f"stopping ray node {node.name}: {exc!r}", file=sys.stderr)


def main() -> None:
    """``ray start`` on the loopback address, joining a cluster too (see the module docstring)."""
    import ray._private.ray_constants as constants
    import ray._private.services as services
    from ray.scripts.scripts import main as ray_main

    constants.ENABLE_RAY_CLUSTER = True  # may join; get_node_ip_address asks the head's view
    services.resolve_ip_for_localhost = lambda host: host  # 127.0.0.1 stays 127.0.0.1
    sys.argv[0] = "ray"
    ray_main()


if __name__ == "__main__":
    main()
