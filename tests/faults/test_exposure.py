"""Every server fdeval starts listens on loopback only, read from the process's own sockets (the
LISTEN rows of /proc/<pid>/net/tcp{,6} whose inode is one of its fds: tests/faults/observe.py), not
from its configuration: the Moshi server pool a launch starts in the job (the official moshi.server
on a tiny random checkpoint, CPU), the launch itself, and the review server. The stand-ins the
tests run (the judge's) are not fdeval's and are not counted.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.request

import pytest

from .observe import listening, planted_keys, pool_servers, review_server


def loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    return ip.is_loopback or (
        ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback
    )


@pytest.mark.server
@pytest.mark.slow
def test_the_model_server_pool_and_the_launch_listen_on_loopback_only(watched_pool_launch):
    w = watched_pool_launch
    pids = pool_servers(w.run_dir)
    servers = [c for c in w.watch.children() if c.pid in pids]
    assert pids and len(servers) == len(pids) and all(s.listen for s in servers), (
        pids,
        [(s.cmdline, s.listen) for s in servers],
    )
    every = {(pid, addr, port) for pid, s in w.watch.seen.items() for addr, port in s.listen}
    assert every and not [x for x in every if not loopback(x[1])], every
    # each listens where the pool says it started it (its log), and on nothing else
    log = "".join(p.read_text() for p in (w.run_dir / "servers").glob("*.log"))
    assert all(f"start on 127.0.0.1:{port} " in log for s in servers for _, port in s.listen)


@pytest.mark.server
@pytest.mark.slow
def test_the_review_server_listens_on_loopback_only(watched_pool_launch):
    with review_server([watched_pool_launch.run_dir], planted_keys()) as (proc, url):
        assert (
            urllib.request.urlopen(f"{url}/api/runs", timeout=30).status == 200
        )  # serving, not starting
        port = int(url.rsplit(":", 1)[1])
        assert listening(proc.pid) == {("127.0.0.1", port)}


@pytest.mark.parametrize("family,wildcard", [(socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")])
def test_the_socket_reader_sees_a_wildcard_bind(family, wildcard):
    """What the checks above would catch: a listener on every interface, read from /proc."""
    with socket.socket(family) as s:
        s.bind((wildcard, 0))
        s.listen()
        port = s.getsockname()[1]
        assert (wildcard, port) in listening(os.getpid()) and not loopback(wildcard)
