# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Running the standard RDMA clients (ibv_*_pingpong, perftest, rping) on
this machine: a server in the background and a client against it, each
with a time limit, and reading what they print.

Nothing in here asserts test behaviour; test_clients.py does.
"""

import errno
import re
import socket
import subprocess
import tempfile
import time


class Result:
    """One finished process: argv, exit status, stdout+stderr as text."""

    def __init__(self, argv, rc, out):
        self.argv, self.rc, self.out = argv, rc, out

    def __str__(self):
        return (f'$ {" ".join(self.argv)}\n(exit {self.rc})\n{self.out}')


class ClientError(AssertionError):
    pass


def free_tcp_port():
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('0.0.0.0', 0))
        return s.getsockname()[1]


def tcp_listening(port):
    """Whether some socket listens on TCP `port` (IPv4 or IPv6), read from
    /proc/net/tcp{,6}: no process to start (exec is slow under TCG)."""
    for path in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    if state == '0A' and \
                            int(local.rsplit(':', 1)[1], 16) == port:
                        return True
        except FileNotFoundError:
            continue
    return False


def _stop(proc):
    """Kill proc if it still runs; reap it unless it is stuck in the
    kernel (then leave it: a test must not hang on it)."""
    if proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return False
    return True


def run_client(argv, timeout):
    """Run argv to completion (killed after `timeout` s: ClientError)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        reaped = _stop(p)
        out = p.stdout.read() if reaped else ''
        raise ClientError(f'{" ".join(argv)}: no exit after {timeout} s, '
                          f'{"killed" if reaped else "unkillable"}; '
                          f'output:\n{out}')
    return Result(argv, p.returncode, out)


def run_pair(server, client, port, timeout=60, wait_tcp=True,
             retry_if=None):
    """Start `server` in the background, then `client`; return both
    Results (server second).

    wait_tcp: the server opens TCP `port` to swap connection data; the
    client starts once it listens.  Servers that listen through the RDMA
    CM have no TCP socket to watch: then give retry_if(client_output),
    true when the client failed only because nobody listened yet; it is
    rerun until the time limit.  Whatever happens, the server does not
    outlive this call, and the whole pair gets `timeout` seconds."""
    deadline = time.monotonic() + timeout

    def left():
        return max(0.1, deadline - time.monotonic())

    log = tempfile.TemporaryFile(mode='w+')
    srv = subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, text=True)

    def server_out():
        log.seek(0)
        return log.read()
    try:
        if wait_tcp:
            while not tcp_listening(port):
                if srv.poll() is not None:
                    raise ClientError(
                        f'server exited ({srv.returncode}) before listening '
                        f'on port {port}:\n'
                        f'{Result(server, srv.returncode, server_out())}')
                if time.monotonic() >= deadline:
                    raise ClientError(
                        f'server not listening on TCP port {port} after '
                        f'{timeout} s:\n{Result(server, None, server_out())}')
                time.sleep(0.05)
        while True:
            cli = run_client(client, left())
            if retry_if is not None and cli.rc != 0 and \
                    retry_if(cli.out) and srv.poll() is None and \
                    deadline - time.monotonic() > 1:
                time.sleep(0.3)
                continue
            break
        try:
            srv.wait(timeout=left() if cli.rc == 0 else 5)
        except subprocess.TimeoutExpired:
            _stop(srv)
            raise ClientError(
                f'server did not exit after the client (exit {cli.rc}):\n'
                f'{Result(server, None, server_out())}\n--- client:\n{cli}')
        return cli, Result(server, srv.returncode, server_out())
    finally:
        _stop(srv)
        log.close()


# --------------------------------------------------------------------------
# Output parsing
# --------------------------------------------------------------------------

# perftest result tables: a header line starting with "#bytes", then one
# line of numbers per message size
BW_COLUMNS = ('bytes', 'iterations', 'bw_peak', 'bw_avg', 'msg_rate')
LAT_COLUMNS = ('bytes', 'iterations', 't_min', 't_max', 't_typical',
               't_avg', 't_stdev', 'p99', 'p99_9')
# a number, possibly run into the dashes of the closing rule
# ("0.031933-----"), or nan (a standard deviation of one sample)
_NUM = re.compile(r'-?(?:\d+(?:\.\d+)?|nan|inf)', re.I)


def perftest_rows(out, columns):
    """The result rows perftest printed, as dicts keyed by `columns`."""
    rows = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith('#bytes'):
            continue
        for row in lines[i + 1:]:
            if not re.match(r'\s*\d', row):
                break
            nums = []
            for tok in row.split():
                m = _NUM.match(tok)
                if not m:
                    break
                nums.append(float(m.group()))
            if len(nums) < len(columns):
                break
            rows.append(dict(zip(columns, nums)))
    return rows


# perftest's clock calibration (cycles against gettimeofday) failed: it then
# reports 0 MB/s, and latencies in wrong units
PERFTEST_NO_CLOCK = re.compile(r'Correlation coefficient r\^2: \S+ < 0\.9')


def perftest_clock_failed(out):
    return bool(PERFTEST_NO_CLOCK.search(out))


# "163840 bytes in 0.25 seconds = 5.29 Mbit/sec" and
# "20 iters in 0.25 seconds = 12387.95 usec/iter" (libibverbs examples)
_PP_BYTES = re.compile(r'^(\d+) bytes in ([\d.]+) seconds', re.M)
_PP_ITERS = re.compile(r'^(\d+) iters in ([\d.]+) seconds', re.M)


def pingpong_totals(out):
    """(bytes, iters) an ibv_*_pingpong reported, None where missing."""
    b = _PP_BYTES.search(out)
    n = _PP_ITERS.search(out)
    return (int(b.group(1)) if b else None, int(n.group(1)) if n else None)


# --------------------------------------------------------------------------
# Feature probes
# --------------------------------------------------------------------------

def rdma_cm_device(ipv4):
    """The RDMA device the RDMA CM binds an ID on `ipv4` to: its name, or
    an OSError with the errno of rdma_bind_addr (ENODEV: the CM knows no
    device with that address)."""
    import pyverbs.cm_enums as ce
    from pyverbs.cmid import AddrInfo, CMEventChannel, CMID
    from pyverbs.pyverbs_error import PyverbsRDMAError
    chan = CMEventChannel()
    cmid = None
    try:
        cmid = CMID(creator=chan)
        ai = AddrInfo(src=ipv4, src_service='0', port_space=ce.RDMA_PS_TCP,
                      flags=ce.RAI_PASSIVE)
        try:
            cmid.bind_addr(ai)
        except PyverbsRDMAError as ex:
            code = ex.error_code or errno.EIO
            raise OSError(code, f'rdma_bind_addr({ipv4}): '
                          f'{errno.errorcode.get(code, code)}') from ex
        return cmid.dev_name
    finally:
        if cmid is not None:
            cmid.close()
        chan.close()
