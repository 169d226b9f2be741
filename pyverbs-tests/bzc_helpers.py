# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Shared helpers for the bzc pyverbs tests.

Everything here talks to the machine the tests run on (normally the guest
prepared by tools/bzc-machine): environment, `ip`/`rdma` commands, sysfs,
/proc/meminfo and the kernel log.  Nothing in here asserts test behaviour;
the test files do.
"""

import errno
import ipaddress
import os
import re
import struct
import subprocess
import time

# --------------------------------------------------------------------------
# Environment (set by tools/bzc-machine; defaults match what it creates)
# --------------------------------------------------------------------------

DEV = os.environ.get('BZC_DEV', 'bzc0')
NETDEV = os.environ.get('BZC_NETDEV', 'bzcnet0')
IPV4 = os.environ.get('BZC_IPV4', '198.18.0.1')
IPV4_PREFIX = int(os.environ.get('BZC_IPV4_PREFIX', '24'))
# The link type and module are overridable only so that the suite's own
# logic can be validated against the reference device (rxe) in the same VM.
LINK_TYPE = os.environ.get('BZC_LINK_TYPE', 'bzc')
MODULE_NAME = os.environ.get(
    'BZC_MODULE_NAME', 'bzc' if LINK_TYPE == 'bzc' else 'rdma_' + LINK_TYPE)
MODULE_PATH = os.environ.get('BZC_MODULE')
PORT = 1

SYS_IB = '/sys/class/infiniband'

# Names the tests may create; the per-test fixture removes leftovers.
TMP_NETDEVS = ('bzctmp0', 'bzctmp1', 'bzctmp2')
TMP_DEVS = ('bzctmp', 'bzctmpb', 'bzc1')

# ib_mtu enum (IBV_MTU_*) <-> bytes
IB_MTU = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}

# IBV_PORT_* states as printed in sysfs ("4: ACTIVE")
PORT_DOWN = 1
PORT_ACTIVE = 4
PHYS_LINK_UP = 5


class CmdError(AssertionError):
    pass


def run(cmd, check=True, timeout=60, input=None):
    """Run a command (list), return CompletedProcess with text output.

    With check=True a non-zero exit raises CmdError carrying the command's
    output, so a failing `ip`/`rdma` call shows why in the test report.
    On timeout the command is killed; one stuck in the kernel (D state,
    e.g. a device removal waiting for its users) cannot be reaped, so it is
    left behind instead of blocking the test forever, and CmdError says so.
    """
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.PIPE if input is not None else
                         subprocess.DEVNULL, text=True)
    try:
        out, err = p.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        try:
            out, err = p.communicate(timeout=5)
            state = 'killed'
        except subprocess.TimeoutExpired:
            out, err, state = '', '', 'unkillable (stuck in the kernel)'
        raise CmdError(f'{" ".join(cmd)}: timed out after {timeout}s, '
                       f'{state}; stdout={out!r} stderr={err!r}')
    cp = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    if check and cp.returncode != 0:
        raise CmdError(f'{" ".join(cmd)}: exit {cp.returncode}\n'
                       f'stdout: {cp.stdout}\nstderr: {cp.stderr}')
    return cp


def ip(*args, **kw):
    return run(['ip', *args], **kw)


def rdma(*args, **kw):
    return run(['rdma', *args], **kw)


def wait_until(pred, timeout=10.0, interval=0.1):
    """Poll pred() until it returns a truthy value or timeout; return the
    last value (falsy on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        val = pred()
        if val or time.monotonic() >= deadline:
            return val
        time.sleep(interval)


def read_file(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        if default is not None:
            return default
        raise


# --------------------------------------------------------------------------
# Devices, netdevs, module
# --------------------------------------------------------------------------

def ib_devices():
    try:
        return sorted(os.listdir(SYS_IB))
    except FileNotFoundError:
        return []


def dev_exists(name=DEV):
    return os.path.exists(os.path.join(SYS_IB, name))


def netdev_exists(name=NETDEV):
    return os.path.exists(f'/sys/class/net/{name}')


def module_loaded(name=MODULE_NAME):
    return os.path.isdir(f'/sys/module/{name}') and \
        os.path.exists(f'/sys/module/{name}/refcnt')


def module_refcnt(name=MODULE_NAME):
    return int(read_file(f'/sys/module/{name}/refcnt'))


def load_module():
    if MODULE_PATH:
        return run(['insmod', MODULE_PATH], check=False)
    return run(['modprobe', MODULE_NAME], check=False)


def link_add(name=DEV, netdev=NETDEV, check=True, link_type=LINK_TYPE):
    return rdma('link', 'add', name, 'type', link_type, 'netdev', netdev,
                check=check)


def link_delete(name=DEV, check=True, timeout=60):
    return rdma('link', 'delete', name, check=check, timeout=timeout)


# RDMA netlink (include/uapi/rdma/rdma_netlink.h), for requests the rdma
# tool will not send (it checks its arguments itself)
NETLINK_RDMA = 20
RDMA_NL_NLDEV = 5
RDMA_NLDEV_CMD_NEWLINK = 3
RDMA_NLDEV_ATTR_DEV_NAME = 2
RDMA_NLDEV_ATTR_NDEV_NAME = 51
RDMA_NLDEV_ATTR_LINK_TYPE = 65


def rdma_nl_newlink(name=None, link_type=None, netdev=None):
    """Send RDMA_NLDEV_CMD_NEWLINK with the given attributes (None: leave
    the attribute out).  Returns 0 or the positive errno of the ACK."""
    import socket

    def attr(t, val):
        data = val.encode() + b'\0'
        a = struct.pack('=HH', 4 + len(data), t) + data
        return a + b'\0' * (-len(a) % 4)
    body = b''
    if name is not None:
        body += attr(RDMA_NLDEV_ATTR_DEV_NAME, name)
    if link_type is not None:
        body += attr(RDMA_NLDEV_ATTR_LINK_TYPE, link_type)
    if netdev is not None:
        body += attr(RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
    seq = int(time.monotonic() * 1000) & 0x7fffffff
    msg = struct.pack('=IHHII', 16 + len(body),
                      (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_NEWLINK,
                      0x1 | 0x4,            # NLM_F_REQUEST | NLM_F_ACK
                      seq, 0) + body
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA)
    try:
        s.settimeout(60)
        s.bind((0, 0))
        s.send(msg)
        while True:
            resp = s.recv(65536)
            off = 0
            while off + 16 <= len(resp):
                ln, typ, _, rseq, _ = struct.unpack_from('=IHHII', resp, off)
                if typ == 2 and rseq == seq:        # NLMSG_ERROR
                    return -struct.unpack_from('=i', resp, off + 16)[0]
                off += (ln + 3) & ~3
                if ln == 0:
                    break
    finally:
        s.close()


def netdev_mac(name=NETDEV):
    return bytes.fromhex(read_file(f'/sys/class/net/{name}/address')
                         .replace(':', ''))


def netdev_mtu(name=NETDEV):
    return int(read_file(f'/sys/class/net/{name}/mtu'))


def netdev_ifindex(name=NETDEV):
    return int(read_file(f'/sys/class/net/{name}/ifindex'))


def netdev_is_up(name=NETDEV):
    return bool(int(read_file(f'/sys/class/net/{name}/flags'), 16) & 0x1)


def netdev_addrs(name=NETDEV, family=None):
    """Addresses configured on a netdev, from `ip -o addr show`, as
    (ipaddress object, prefixlen, scope) tuples."""
    args = ['-o']
    if family == 4:
        args.append('-4')
    elif family == 6:
        args.append('-6')
    out = ip(*args, 'addr', 'show', 'dev', name).stdout
    res = []
    for line in out.splitlines():
        m = re.search(r'\binet6?\s+([0-9a-fA-F.:]+)/(\d+)(?:.*?\bscope\s+(\w+))?',
                      line)
        if m:
            res.append((ipaddress.ip_address(m.group(1)), int(m.group(2)),
                        m.group(3)))
    return res


def eui64_from_mac(mac):
    """Modified EUI-64 (RFC 4291 appendix A) as rxe/addrconf build it:
    flip the universal/local bit, insert ff:fe in the middle."""
    assert len(mac) == 6
    return bytes([mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe,
                  mac[3], mac[4], mac[5]])


def guid_from_sysfs(text):
    """'0211:22ff:fe33:4455' -> 8 raw bytes"""
    return bytes.fromhex(text.replace(':', ''))


def be64_attr_to_bytes(val):
    """pyverbs returns __be64 fields (node_guid, GID halves) as the native
    (little-endian) integer read from memory; give back the wire bytes."""
    return struct.pack('<Q', val)


# --------------------------------------------------------------------------
# Port / GID state through sysfs and the rdma tool
# --------------------------------------------------------------------------

def sysfs_port(dev=DEV, port=PORT):
    return os.path.join(SYS_IB, dev, 'ports', str(port))


def sysfs_port_state(dev=DEV, port=PORT):
    """'4: ACTIVE' -> 4 (None if the device is gone)"""
    txt = read_file(os.path.join(sysfs_port(dev, port), 'state'), '')
    return int(txt.split(':')[0]) if txt else None


def sysfs_gids(dev=DEV, port=PORT):
    """Valid entries of the GID table via sysfs:
    {index: (IPv6Address, type string, ndev name)}."""
    base = sysfs_port(dev, port)
    res = {}
    try:
        names = os.listdir(os.path.join(base, 'gids'))
    except FileNotFoundError:
        return res
    for n in names:
        idx = int(n)
        try:
            gtype = read_file(os.path.join(base, 'gid_attrs', 'types', n))
        except OSError:
            continue            # empty entry: reading its type gives EINVAL
        gid = ipaddress.IPv6Address(read_file(os.path.join(base, 'gids', n)))
        ndev = read_file(os.path.join(base, 'gid_attrs', 'ndevs', n), '')
        res[idx] = (gid, gtype, ndev)
    return res


def ipv4_mapped(addr):
    return ipaddress.IPv6Address('::ffff:' + str(addr))


def gid_present(gid, dev=DEV):
    return any(g == gid for g, _, _ in sysfs_gids(dev).values())


def rdma_res_summary(dev=DEV):
    """`rdma resource show` counters for one device: {'pd': n, 'ctx': n, ...}"""
    out = rdma('resource', 'show').stdout
    for line in out.splitlines():
        m = re.match(r'\s*\d+:\s+(\S+):\s+(.*)$', line)
        if m and m.group(1) == dev:
            toks = m.group(2).split()
            return {toks[i]: int(toks[i + 1]) for i in range(0, len(toks) - 1, 2)
                    if toks[i + 1].isdigit()}
    return None


def meminfo():
    res = {}
    with open('/proc/meminfo') as f:
        for line in f:
            k, v = line.split(':', 1)
            res[k] = int(v.split()[0])      # kB
    return res


# --------------------------------------------------------------------------
# Baseline state: (re)create what the harness created
# --------------------------------------------------------------------------

class Baseline:
    """What the harness set up, recorded once per session, so that a test
    which deletes the device / module / netdev or changes the MTU leaves
    the next test the same starting point."""

    def __init__(self):
        self.mtu = netdev_mtu() if netdev_exists() else 1500
        self.ipv4 = [(a, p) for a, p, _ in netdev_addrs(family=4)] \
            if netdev_exists() else []
        if not any(str(a) == IPV4 for a, _ in self.ipv4):
            self.ipv4.append((ipaddress.ip_address(IPV4), IPV4_PREFIX))
        self.ipv6_global = [(a, p) for a, p, s in netdev_addrs(family=6)
                            if s == 'global'] if netdev_exists() else []

    def restore(self):
        """Bring module, netdev and device back; return a list of the actions
        taken (empty when nothing had to be done)."""
        actions = []
        for d in TMP_DEVS:
            if d != DEV and dev_exists(d):
                link_delete(d, check=False)
                actions.append(f'deleted leftover device {d}')
        for n in TMP_NETDEVS:
            if netdev_exists(n):
                ip('link', 'del', n, check=False)
                actions.append(f'deleted leftover netdev {n}')
        if not module_loaded():
            cp = load_module()
            actions.append(f'loaded module {MODULE_NAME} (rc {cp.returncode}'
                           f' {cp.stderr.strip()})')
        if not netdev_exists():
            ip('link', 'add', NETDEV, 'type', 'dummy')
            actions.append(f'created netdev {NETDEV}')
        if netdev_mtu() != self.mtu:
            ip('link', 'set', NETDEV, 'mtu', str(self.mtu))
            actions.append(f'restored mtu {self.mtu}')
        if not netdev_is_up():
            ip('link', 'set', NETDEV, 'up')
            actions.append(f'set {NETDEV} up')
        have4 = {(str(a), p) for a, p, _ in netdev_addrs(family=4)}
        want4 = {(str(a), p) for a, p in self.ipv4}
        for a, p in have4 - want4:
            ip('addr', 'del', f'{a}/{p}', 'dev', NETDEV, check=False)
            actions.append(f'removed address {a}/{p}')
        for a, p in want4 - have4:
            ip('addr', 'add', f'{a}/{p}', 'dev', NETDEV)
            actions.append(f'added address {a}/{p}')
        have6 = {(str(a), p) for a, p, s in netdev_addrs(family=6)
                 if s == 'global'}
        want6 = {(str(a), p) for a, p in self.ipv6_global}
        for a, p in have6 - want6:
            ip('-6', 'addr', 'del', f'{a}/{p}', 'dev', NETDEV, check=False)
            actions.append(f'removed address {a}/{p}')
        if not dev_exists():
            link_add()
            actions.append(f'created {DEV}')
        if actions:
            # the port and the IP-based GIDs follow asynchronously
            wait_until(lambda: sysfs_port_state() == PORT_ACTIVE, 15)
            wait_until(lambda: gid_present(ipv4_mapped(IPV4)), 15)
        return actions


# --------------------------------------------------------------------------
# Kernel log
# --------------------------------------------------------------------------

KLOG_BAD = re.compile(
    r'WARNING:|BUG:|Oops|Call Trace|general protection fault|kernel BUG|'
    r'UBSAN:|refcount_t:|list_(add|del) corruption|'
    r'INFO: task .* blocked for more than|rcu: .*(stall|Stall)')


class KmsgReader:
    """Reads the kernel log records appended since the last call, from
    /dev/kmsg (each reader has its own position), falling back to `dmesg`
    line counts when /dev/kmsg cannot be read."""

    def __init__(self):
        self.fd = None
        self.dmesg_lines = None
        try:
            self.fd = os.open('/dev/kmsg', os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = None
            self.dmesg_lines = len(self._dmesg())

    @staticmethod
    def _dmesg():
        return run(['dmesg'], check=False).stdout.splitlines()

    def read_new(self):
        """Return the new kernel log messages as a list of strings."""
        if self.fd is None:
            lines = self._dmesg()
            new = lines[self.dmesg_lines:]
            self.dmesg_lines = len(lines)
            return new
        msgs = []
        while True:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as ex:
                if ex.errno == errno.EPIPE:     # overwritten records: go on
                    msgs.append('<kmsg: records lost (EPIPE)>')
                    continue
                raise
            if not rec:
                break
            txt = rec.decode(errors='replace')
            head, _, body = txt.partition(';')
            lines = body.rstrip('\n').split('\n')
            # continuation lines (" KEY=value") are dictionary data: drop
            msgs.append(lines[0])
        return msgs

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# Lines written to /dev/kmsg by test_harness.py to prove the detection works
SELFTEST_MARK = 'bzc-pyverbs-selftest'


def bad_kernel_lines(lines, include_selftest=False):
    return [l for l in lines if KLOG_BAD.search(l) and
            (include_selftest or SELFTEST_MARK not in l)]


# --------------------------------------------------------------------------
# Async fd discovery for pyverbs contexts
# --------------------------------------------------------------------------

def _fds_by_link(substr):
    res = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            if substr in os.readlink(f'/proc/self/fd/{fd}'):
                res.add(int(fd))
        except OSError:
            pass
    return res


def open_pyverbs_context(name=DEV):
    """Open a pyverbs Context and find its async event fd (pyverbs does not
    expose it): the one new '[infinibandevent]' anon inode after opening.
    ibv_get_async_event() blocks with the GIL held, so callers must poll
    this fd before calling Context.get_async_event()."""
    import pyverbs.device as d
    before = _fds_by_link('infinibandevent')
    ctx = d.Context(name=name)
    new = _fds_by_link('infinibandevent') - before
    if len(new) != 1:
        ctx.close()
        raise AssertionError(f'expected exactly one new async event fd after '
                             f'opening {name}, found {sorted(new)}')
    return ctx, new.pop()


def pyverbs_async_event(ctx, async_fd, timeout):
    """Next async event type of a pyverbs Context, or None after timeout."""
    import select
    p = select.poll()
    p.register(async_fd, select.POLLIN)
    if not p.poll(int(timeout * 1000)):
        return None
    ev = ctx.get_async_event()
    t = ev.event_type
    ev.ack()
    return t


def wait_event(get, want, timeout, ignore=()):
    """Call get(remaining_timeout) until it returns an event whose type is
    `want`; other events must be in `ignore` (returned list records all
    seen).  Returns (found, seen)."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False, seen
        ev = get(left)
        if ev is None:
            return False, seen
        seen.append(ev)
        etype = ev[0] if isinstance(ev, tuple) else ev
        if etype == want:
            return True, seen
        if etype not in ignore:
            return False, seen
