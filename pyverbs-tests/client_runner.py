# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Running the standard RDMA clients (ibv_*_pingpong, perftest, rping) on
this machine: a server in the background and a client against it, each
with a time limit, and reading what they print.

Nothing in here asserts test behaviour; test_clients.py does.
"""

import errno
import re
import signal
import socket
import subprocess
import tempfile
import time


class Result:
    """One finished process: argv, exit status (negative: the signal that
    killed it), stdout+stderr as text, process id."""

    def __init__(self, argv, rc, out, pid=None):
        self.argv, self.rc, self.out, self.pid = argv, rc, out, pid

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


def stop(proc):
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
        reaped = stop(p)
        out = p.stdout.read() if reaped else ''
        raise ClientError(f'{" ".join(argv)}: no exit after {timeout} s, '
                          f'{"killed" if reaped else "unkillable"}; '
                          f'output:\n{out}')
    return Result(argv, p.returncode, out, p.pid)


def run_pair(server, client, port, timeout=60, wait_tcp=True,
             retry_if=None, server_env=None):
    """Start `server` in the background, then `client`; return both
    Results (server second).

    wait_tcp: the server opens TCP `port` to swap connection data; the
    client starts once it listens.  Servers that listen through the RDMA
    CM have no TCP socket to watch: then give retry_if(client_output),
    true when the client failed only because nobody listened yet; it is
    rerun until the time limit.  A client killed by a signal is never
    rerun: whatever it printed, the server may have gone on with it, and
    the crash is the result.  Whatever happens, the server does not
    outlive this call, and the whole pair gets `timeout` seconds.
    server_env: the server's environment (default: this process's)."""
    deadline = time.monotonic() + timeout

    def left():
        return max(0.1, deadline - time.monotonic())

    log = tempfile.TemporaryFile(mode='w+')
    srv = subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, text=True,
                           env=server_env)

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
            try:
                cli = run_client(client, left())
            except ClientError as ex:
                raise ClientError(f'{ex}\n--- server:\n'
                                  f'{Result(server, srv.poll(), server_out())}'
                                  ) from None
            if retry_if is not None and cli.rc > 0 and \
                    retry_if(cli.out) and srv.poll() is None and \
                    deadline - time.monotonic() > 1:
                time.sleep(0.3)
                continue
            break
        if cli.rc < 0 and srv.poll() is None:
            # the client crashed: its server waits for it in vain
            stop(srv)
            return cli, Result(server, srv.poll(), server_out(), srv.pid)
        try:
            srv.wait(timeout=left() if cli.rc == 0 else 5)
        except subprocess.TimeoutExpired:
            stop(srv)
            raise ClientError(
                f'server did not exit after the client (exit {cli.rc}):\n'
                f'{Result(server, None, server_out())}\n--- client:\n{cli}')
        return cli, Result(server, srv.returncode, server_out(), srv.pid)
    finally:
        stop(srv)
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


# --------------------------------------------------------------------------
# perftest's RDMA CM mode (-R)
# --------------------------------------------------------------------------
#
# The client connects twice.  First its control connection
# (rdma_client_connect(); "Unexpected CM event bl blka 8" when the server's
# CM rejected it: nobody listens yet).  Then, after a hand-shake over it,
# the server creates, binds and listens on an ID for the data connection
# while the client resolves the address and route and connects, with no
# sync in between: on a loaded machine the client's request can arrive
# first and be rejected (REJ reason 8, invalid service ID: "RDMA CM event
# error: Event: RDMA_CM_EVENT_REJECTED; error: 8.").  The client then
# retries by itself (rdma_cm_client_connection()), but before perftest
# 26.04.17 that retry uses what rdma_cm_destroy_cma() has just destroyed
# and freed: the CM IDs, their event channel and the array holding them.
# The freed array's slot is typically taken by rdma_getaddrinfo()'s
# sockaddr at once, and rdma_resolve_addr() faults on the address's bytes
# taken for an ID ("traps: ib_send_lat[PID] general protection fault ...
# in librdmacm.so"; id_priv was 0x010012c6xxxx0002: AF_INET, a port,
# 198.18.0.1).  Fixed upstream by linux-rdma/perftest PR #368 (commit
# 3d9d8d0 "perftest: Fix crashes and logical flaws in RDMA CM connection
# retry") and PR #378 (commit e2b3dcf, its clean-up path), first released
# in 26.04.17; Debian 12 ships 4.5+0.17, Debian 13 25.01.0+0.80.  No
# device has a part in it: rxe0 crashes the same way when its server
# listens late.
PERFTEST_CM_RETRY_FIXED = '26.04.17'
PERFTEST_CM_RETRY_BUG = (
    'perftest {version}: after its rejected RDMA CM data connection the '
    'client retried with CM IDs it had freed (fixed in perftest 26.04.17, '
    'linux-rdma/perftest PR #368)')
_PERFTEST_DATA_CM_REJECTED = re.compile(
    r'RDMA CM event error:\s*Event: RDMA_CM_EVENT_REJECTED; error: 8\.')


def perftest_cm_control_rejected(out):
    """perftest -R's client found nobody listening for its control
    connection: the one failure to rerun the client for.  (After its data
    connection failed the server waits on the data listener, which a new
    client would take for the control one.)"""
    return bool(re.search(r'Unexpected CM event bl blka 8\b', out))


def perftest_version():
    """The installed perftest package's version, None if unknown."""
    r = subprocess.run(['dpkg-query', '-W', '-f', '${Version}', 'perftest'],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True, check=False)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() \
        else None


def perftest_has_cm_retry_bug(version):
    """Whether perftest `version` (a Debian version) predates the fix."""
    return version is not None and subprocess.run(
        ['dpkg', '--compare-versions', version, 'lt',
         PERFTEST_CM_RETRY_FIXED], check=False).returncode == 0


def perftest_cm_retry_crash(cli, version):
    """Whether the client Result `cli` is the crash above: perftest
    `version` has the bug, the client's data connection was rejected for
    want of a listener, and then a signal killed the client."""
    return (cli.rc in (-signal.SIGSEGV, -signal.SIGBUS, -signal.SIGABRT) and
            bool(_PERFTEST_DATA_CM_REJECTED.search(cli.out)) and
            not perftest_cm_control_rejected(cli.out) and
            perftest_has_cm_retry_bug(version))
