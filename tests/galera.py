"""A private MariaDB Galera cluster on 127.0.0.1 for the tests whose claim is about one:
three ``mariadbd`` processes with their own data directories, configuration files and
ports, started as an operator would start them and ended by their own ids.

Starting one takes seconds, not minutes, because no node copies a whole database: the first
node is bootstrapped once and stopped cleanly, the other two start from copies of its data
directory, and the cluster forms again from that shared state, so each joiner needs only an
incremental state transfer (IST) of a few writesets. A node killed with SIGKILL is brought
back the way ``galera_recovery`` does it: ``--wsrep-recover`` reads its last committed
position out of InnoDB, and the node starts from there (IST again, not a full copy).

State transfers go through ``wsrep_sst_mariabackup`` (Debian's ``mariadb-backup``, which
streams with ``socat``): rsync's transfer script runs an rsync daemon that drops to
``nobody`` when started by root, and then cannot write a root-owned data directory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

MARIADBD = "/usr/sbin/mariadbd"
PROVIDER = "/usr/lib/galera/libgalera_smm.so"
#: What the cluster needs beyond the MariaDB server the suite already uses.
INSTALL = "apt-get install galera-4 mariadb-backup socat"
NEEDED = {
    "galera-4 (libgalera_smm.so)": lambda: Path(PROVIDER).is_file(),
    "mariadbd": lambda: Path(MARIADBD).is_file(),
    "mariadb-install-db": lambda: shutil.which("mariadb-install-db") is not None,
    "mariadb-backup": lambda: shutil.which("mariabackup") is not None,
    "socat": lambda: shutil.which("socat") is not None,
    "mariadb (the client)": lambda: shutil.which("mariadb") is not None,
}

#: Group communication tuned for a test on one machine: a SIGKILLed node is suspected after
#: 2 s and evicted after 3 s (the defaults are 5 s and 15 s); the survivors' commits wait for
#: the eviction, so this is how long a dead node pauses the cluster's writes. The write-set
#: cache is 32 MB (the default 128 MB is a file written out in full at start).
PROVIDER_OPTIONS = (
    "gcache.size=32M",
    "evs.keepalive_period=PT0.5S",
    "evs.inactive_check_period=PT0.5S",
    "evs.suspect_timeout=PT2S",
    "evs.inactive_timeout=PT3S",
    "evs.install_timeout=PT3S",
    "pc.announce_timeout=PT1S",
)


def missing() -> list[str]:
    """What this machine lacks to start a cluster (empty when nothing)."""
    return [name for name, present in NEEDED.items() if not present()]


def require() -> None:
    """Skip without what a cluster needs; under ``CI``, where it is installed, fail instead."""
    if lacking := missing():
        why = f"a Galera cluster needs {', '.join(lacking)}; on Debian: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    name: str
    home: Path
    sql: int
    gcomm: int
    ist: int
    sst: int
    process: subprocess.Popen[bytes] | None = None
    #: Where the log of the node's last (re)start begins.
    log_offset: int = 0

    @property
    def datadir(self) -> Path:
        return self.home / "data"

    @property
    def config(self) -> Path:
        return self.home / "my.cnf"

    @property
    def error_log(self) -> Path:
        return self.home / "error.log"

    def url(self, database: str) -> str:
        return f"mysql+asyncmy://root@127.0.0.1:{self.sql}/{database}"

    def sql_text(self, statement: str, *, timeout: float = 10) -> subprocess.CompletedProcess[str]:
        """``statement`` through the ``mariadb`` client; tab-separated rows, no headers."""
        return subprocess.run(
            [
                "mariadb",
                "--no-defaults",
                "--protocol=tcp",
                "-h127.0.0.1",
                f"-P{self.sql}",
                "-uroot",
                "--batch",
                "--skip-column-names",
                "-e",
                statement,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def status(self, name: str) -> str | None:
        """One ``wsrep_*`` status value; None while the node does not answer."""
        try:
            done = self.sql_text(f"SHOW GLOBAL STATUS LIKE '{name}'", timeout=3)
        except subprocess.TimeoutExpired:
            return None
        if done.returncode != 0 or not done.stdout.strip():
            return None
        return done.stdout.split("\t", 1)[1].strip()

    def synced_in(self, size: int) -> bool:
        return self.status("wsrep_local_state_comment") == "Synced" and self.status(
            "wsrep_cluster_size"
        ) == str(size)


class Cluster:
    """Three Galera nodes under ``root``; :meth:`start` forms the cluster."""

    def __init__(self, root: Path, size: int = 3) -> None:
        self.root = root
        # A Unix socket's path must fit in 108 bytes, which a test's tmp_path may not leave.
        self.sockets = Path(tempfile.mkdtemp(prefix="pageant-galera-"))
        self.nodes = [
            Node(f"n{i}", root / f"n{i}", free_port(), free_port(), free_port(), free_port())
            for i in range(size)
        ]

    # ── configuration ──────────────────────────────────────────────────────────

    def _write_config(self, node: Node) -> None:
        members = ",".join(f"127.0.0.1:{n.gcomm}" for n in self.nodes)
        options = ";".join(
            (
                f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm}",
                f"ist.recv_addr=127.0.0.1:{node.ist}",
                *PROVIDER_OPTIONS,
            )
        )
        node.home.mkdir(parents=True, exist_ok=True)
        node.config.write_text(
            "\n".join(
                (
                    "[mariadbd]",
                    f"datadir={node.datadir}",
                    f"socket={self.sockets / f'{node.name}.sock'}",
                    f"pid-file={node.home / 'mariadbd.pid'}",
                    f"log-error={node.error_log}",
                    f"port={node.sql}",
                    "bind-address=127.0.0.1",
                    "user=root",
                    "skip-name-resolve",
                    "innodb_buffer_pool_size=32M",
                    "innodb_log_file_size=8M",
                    # Galera replicates row images: ROW is required, the binary log is not.
                    "binlog_format=ROW",
                    "innodb_autoinc_lock_mode=2",
                    "character-set-server=utf8mb4",
                    "collation-server=utf8mb4_bin",
                    "wsrep_on=ON",
                    f"wsrep_provider={PROVIDER}",
                    "wsrep_cluster_name=pageant-test",
                    f"wsrep_cluster_address=gcomm://{members}",
                    f"wsrep_node_address=127.0.0.1:{node.gcomm}",
                    f"wsrep_node_name={node.name}",
                    f'wsrep_provider_options="{options}"',
                    "wsrep_sst_method=mariabackup",
                    "wsrep_sst_auth=root:",
                    f"wsrep_sst_receive_address=127.0.0.1:{node.sst}",
                    # What the operators' guide asks of a cluster pageant uses: a table
                    # without a primary key, or one outside InnoDB, is refused outright.
                    "wsrep_mode=REQUIRED_PRIMARY_KEY,STRICT_REPLICATION",
                    "",
                    "[sst]",
                    "sst-log-archive=0",
                    "",
                )
            )
        )

    # ── processes ───────────────────────────────────────────────────────────────

    def _launch(self, node: Node, *extra: str) -> None:
        node.process = subprocess.Popen(
            [MARIADBD, f"--defaults-file={node.config}", *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _wait(self, node: Node, size: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node.process is not None and node.process.poll() is not None:
                break
            if node.synced_in(size):
                return
            time.sleep(0.1)
        raise AssertionError(
            f"galera node {node.name} not synced in a cluster of {size} within {timeout:g} s; "
            f"the end of its log:\n{self.tail(node)}"
        )

    def tail(self, node: Node, lines: int = 30) -> str:
        if not node.error_log.exists():
            return "(no log)"
        text = node.error_log.read_text(errors="replace").splitlines()
        return "\n".join(line[:300] for line in text[-lines:])

    def start(self, timeout: float = 60) -> None:
        """Initialise, bootstrap and form the cluster; every node Synced on return."""
        first, *others = self.nodes
        for node in self.nodes:
            self._write_config(node)
        subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={first.datadir}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                "--innodb-log-file-size=8M",
            ],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        # Once alone, to give the cluster its identity (the state UUID in grastate.dat and
        # in InnoDB), then stopped cleanly so that its copies share that state.
        self._launch(first, "--wsrep-new-cluster")
        self._wait(first, 1, timeout)
        self.stop(first)
        for node in others:
            shutil.copytree(first.datadir, node.datadir)
        self._launch(first, "--wsrep-new-cluster")
        self._wait(first, 1, timeout)
        for node in others:
            self._launch(node)
        for node in others:
            self._wait(node, len(self.nodes), timeout)

    def stop(self, node: Node, timeout: float = 30) -> None:
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(timeout)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(10)

    def kill(self, node: Node) -> float:
        """SIGKILL the node; answers the instant (``time.monotonic()``) it was sent."""
        assert node.process is not None
        killed = time.monotonic()
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(10)
        return killed

    def rejoin(self, node: Node, timeout: float = 60) -> str:
        """Start a killed node again from its recovered position; answers that position."""
        recover = node.home / "recover.log"
        node.log_offset = node.error_log.stat().st_size if node.error_log.exists() else 0
        subprocess.run(
            [
                MARIADBD,
                f"--defaults-file={node.config}",
                "--wsrep-recover",
                f"--log-error={recover}",
            ],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        found = re.search(r"Recovered position: (\S+)", recover.read_text(errors="replace"))
        assert found, f"no position recovered for {node.name}:\n{recover.read_text()}"
        self._launch(node, f"--wsrep-start-position={found.group(1)}")
        return found.group(1)

    def wait_synced(self, node: Node, timeout: float = 60) -> None:
        self._wait(node, len(self.nodes), timeout)

    def received_ist(self, node: Node) -> bool:
        """Whether the node's last start caught up by IST (a few writesets), not a full SST."""
        with node.error_log.open("rb") as log:
            log.seek(node.log_offset)
            text = log.read().decode(errors="replace")
        return "IST completed on joiner" in text and "SST completed on joiner" not in text

    def close(self) -> None:
        """SIGKILL every node still running (by its own id); the data goes with tmp_path."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                os.kill(node.process.pid, signal.SIGKILL)
                node.process.wait(10)
        shutil.rmtree(self.sockets, ignore_errors=True)
