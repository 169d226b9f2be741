# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Client of tools/peer-agent: commands on the other machine of a
two-machine run (tools/bzc-machines).

The protocol is one JSON object per line over TCP, a request and then its
answer, on one connection:

  {"op": "ping"}                         -> {"ok": true, "host", "env"}
  {"op": "run", "argv", "timeout"}       -> {"ok": true, "rc", "out",
                                             "timed_out"}
  {"op": "start", "argv"}                -> {"ok": true, "id"}
  {"op": "wait", "id", "timeout"}        -> {"ok": true, "rc", "out"}
                                            (rc null: still running)
  {"op": "stop", "id"}                   -> {"ok": true, "rc", "out"}
  {"op": "shutdown"}                     -> {"ok": true}, then it exits
  anything wrong                         -> {"ok": false, "error"}

Peer.set_link() switches the peer's device on the bzc link between rxe1
and bzc0 while the machines run (tools/machine-setup link).

"out" is stdout and stderr together, at most the agent's output limit (the
end is kept).  Nothing in here asserts test behaviour.
"""

import json
import os
import socket
import time

# Bounds of one request and one answer on the wire.
MAX_LINE = 4 << 20
# Port the agent listens on (on the peer's link address).
DEFAULT_PORT = 7950
# The kinds of device the peer can put on its bzc link (set_link), as
# tools/bzc-machines --peer names them.
LINK_KINDS = ('rxe', 'bzc')
# tools/machine-setup, at the same path on both machines (they share it).
MACHINE_SETUP = os.path.join(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))), 'tools', 'machine-setup')


class PeerError(AssertionError):
    pass


class Result:
    """One finished (or still running: rc None) command on the peer."""

    def __init__(self, argv, rc, out, timed_out=False):
        self.argv, self.rc, self.out = argv, rc, out
        self.timed_out = timed_out

    def __str__(self):
        state = 'timed out' if self.timed_out else f'exit {self.rc}'
        return f'peer$ {" ".join(self.argv)}\n({state})\n{self.out}'


def parse_addr(addr):
    """'HOST:PORT' or 'HOST' -> (host, port)."""
    host, _, port = addr.rpartition(':')
    if not host:
        return addr, DEFAULT_PORT
    return host, int(port)


class Peer:
    """A connection to the agent on the other machine."""

    def __init__(self, addr, connect_timeout=10):
        self.addr = parse_addr(addr)
        self.sock = socket.create_connection(self.addr,
                                             timeout=connect_timeout)
        self.rfile = self.sock.makefile('rb')
        info = self.request({'op': 'ping'}, timeout=30)
        self.host = info['host']
        self.env = info['env']

    def close(self):
        self.rfile.close()
        self.sock.close()

    def request(self, req, timeout):
        """Send one request, return its answer (PeerError if not ok)."""
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(json.dumps(req).encode() + b'\n')
            line = self.rfile.readline(MAX_LINE + 1)
        except OSError as e:
            raise PeerError(f'peer agent {self.addr}: {req.get("op")}: {e}')
        if not line.endswith(b'\n'):
            raise PeerError(f'peer agent {self.addr}: {req.get("op")}: '
                            f'connection closed or answer too long')
        ans = json.loads(line)
        if not ans.get('ok'):
            raise PeerError(f'peer agent: {req}: {ans.get("error")}')
        return ans

    def run(self, argv, timeout=60, check=True):
        """Run argv on the peer to completion (killed after timeout s)."""
        ans = self.request({'op': 'run', 'argv': argv, 'timeout': timeout},
                           timeout=timeout + 30)
        r = Result(argv, ans['rc'], ans['out'], ans['timed_out'])
        if check and (r.timed_out or r.rc != 0):
            raise PeerError(str(r))
        return r

    def start(self, argv):
        """Start argv on the peer in the background; return its handle."""
        return BackgroundCommand(self, argv,
                                 self.request({'op': 'start', 'argv': argv},
                                              timeout=30)['id'])

    def shutdown(self):
        self.request({'op': 'shutdown'}, timeout=60)

    def set_link(self, kind, timeout=300):
        """Put a device of `kind` ('rxe': rxe1, 'bzc': bzc0 with the module
        built in the shared tree) on the peer's bzc link, in place of the
        one there (nothing happens when it is there already); returns its
        name once its GID table has the link's address.  The boot's choice
        (tools/bzc-machines --peer) is env['BZC_PEER']."""
        if kind not in LINK_KINDS:
            raise ValueError(f'no peer device kind {kind!r}')
        r = self.run([MACHINE_SETUP, 'link', kind], timeout=timeout)
        lines = r.out.split()
        if not lines:
            raise PeerError(f'no device name from the peer:\n{r}')
        return lines[-1]


class BackgroundCommand:
    """A command started on the peer; wait() or stop() ends it."""

    def __init__(self, peer, argv, ident):
        self.peer, self.argv, self.id = peer, argv, ident

    def wait(self, timeout):
        """Its Result once it exited, or one with rc None after timeout."""
        ans = self.peer.request({'op': 'wait', 'id': self.id,
                                 'timeout': timeout}, timeout=timeout + 30)
        return Result(self.argv, ans['rc'], ans['out'])

    def stop(self):
        """Kill it if it still runs; its Result."""
        ans = self.peer.request({'op': 'stop', 'id': self.id}, timeout=30)
        return Result(self.argv, ans['rc'], ans['out'])


def wait_for_agent(addr, timeout):
    """Connect to the agent, retrying until it answers or timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return Peer(addr)
        except (OSError, PeerError) as e:
            if time.monotonic() > deadline:
                raise PeerError(f'no peer agent at {addr} after {timeout} s:'
                                f' {e}')
            time.sleep(1)


def from_env():
    """The peer of this run (PEER_AGENT, set by tools/bzc-machines), or
    None on a single machine."""
    addr = os.environ.get('PEER_AGENT')
    return Peer(addr) if addr else None


class Script:
    """A script started on the peer that answers JSON lines on TCP `port`
    of `host` (the peer's address): bulk_wire_peer.py, nfsrdma.py serve.
    ask() sends one request and returns its answer; an answer with
    "error" fails the test with it."""

    def __init__(self, peer, argv, host, port, timeout=900):
        self.proc = peer.start(argv)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.sock = socket.create_connection((host, port),
                                                     timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    r = self.proc.stop()
                    raise PeerError(f'{argv[1]} not listening on the '
                                    f'peer:\n{r}')
                time.sleep(0.3)
        self.sock.settimeout(timeout)
        self.rfile = self.sock.makefile('r')

    def ask(self, op, **kw):
        self.sock.sendall(json.dumps({'op': op, **kw}).encode() + b'\n')
        line = self.rfile.readline()
        if not line:
            raise PeerError(f'the peer script went away:\n{self.proc.stop()}')
        ans = json.loads(line)
        assert 'error' not in ans, ans['error']
        return ans

    def close(self, timeout=300):
        """Ask it to exit and wait; its Result (rc None: killed)."""
        try:
            self.ask('exit')
        finally:
            self.sock.close()
            r = self.proc.wait(timeout)
            if r.rc is None:
                r = self.proc.stop()
        return r
