# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Shared helpers for the bzc pyverbs tests.

Everything here talks to the machine the tests run on (normally the guest
prepared by tools/bzc-machine): environment, `ip`/`rdma` commands, sysfs,
/proc/meminfo and the kernel log.  Nothing in here asserts test behaviour;
the test files do.
"""

import contextlib
import errno
import ipaddress
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
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


def last_line(text):
    """The last non-blank line of `text`, stripped, or '(no output)'."""
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    return lines[-1] if lines else '(no output)'


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


def hw_counters(dev=None):
    """{name: value} of the port's hardware counters (bzc_stats.c), read
    through netlink (`rdma statistic show link`), which asks the driver
    every time; sysfs hw_counters may answer from a cache (its lifespan)."""
    import json
    out = rdma('-j', 'statistic', 'show', 'link', f'{dev or DEV}/{PORT}')
    links = json.loads(out.stdout)
    assert len(links) == 1, links
    link = links[0].get('counters', links[0])   # newer iproute2 nests them
    return {k: v for k, v in link.items()
            if k not in ('ifindex', 'ifname', 'port') and isinstance(v, int)}


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


def load_modules(mods, params=None):
    """modprobe each of `mods` (with `params[mod]`, a sequence of
    module parameters, where given); returns (module, stderr) of the
    first that cannot be loaded, or None. For the kernel consumers'
    tests (test_nvmeof.py, test_nfsrdma.py), whose skips name it."""
    for mod in mods:
        args = ['modprobe', mod, *(params or {}).get(mod, ())]
        cp = run(args, check=False)
        if cp.returncode:
            return mod, cp.stderr.strip()
    return None


def unload_and_check(loaded, res0, klog):
    """The end of a kernel consumer's test (test_rds.py, test_nfsrdma.py):
    unload the modules it loaded (`loaded`, in reverse), wait for bzc0's
    resources to be `res0` again (rdma_res_summary() from before: the
    consumer's QPs, CQs, MRs and PDs gone) and read the kernel log since
    `klog` (a KmsgReader, closed here). Returns the problems found."""
    errors = []
    for mod in reversed(loaded):
        cp = run(['modprobe', '-r', mod], check=False, timeout=120)
        if cp.returncode:
            errors.append(f'modprobe -r {mod}: {cp.stderr.strip()}')
    if not wait_until(lambda: rdma_res_summary() == res0, timeout=60):
        errors.append(f'{DEV} resources {rdma_res_summary()}, '
                      f'before {res0}')
    lines = klog.read_new()
    klog.close()
    bad = bad_kernel_lines(lines)
    if bad:
        errors.append('kernel log: ' + '\n'.join(bad))
    return errors


def link_add(name=DEV, netdev=NETDEV, check=True, link_type=LINK_TYPE):
    return rdma('link', 'add', name, 'type', link_type, 'netdev', netdev,
                check=check)


def link_delete(name=DEV, check=True, timeout=60):
    return rdma('link', 'delete', name, check=check, timeout=timeout)


MODULE_PARAMS = '/sys/module/bzc/parameters'


def module_param(name, value=None):
    """bzc.ko's parameter `name`: read it, or with `value` write it."""
    path = os.path.join(MODULE_PARAMS, name)
    if value is None:
        with open(path) as f:
            return int(f.read())
    with open(path, 'w') as f:
        f.write(str(value))


@contextlib.contextmanager
def limited_device(dev, netdev, addr, limits):
    """Device `dev` on a new dummy `netdev` with IPv4 `addr`, made while
    the module parameters `limits` ({name: value}) are set; they are put
    back right after, the device keeps its own. Removed on exit."""
    saved = {k: module_param(k) for k in limits}
    try:
        try:
            for k, v in limits.items():
                module_param(k, v)
            ip('link', 'add', netdev, 'type', 'dummy')
            ip('addr', 'add', f'{addr}/24', 'dev', netdev)
            ip('link', 'set', netdev, 'up')
            link_add(dev, netdev)
        finally:
            for k, v in saved.items():
                module_param(k, v)
        yield
    finally:
        link_delete(dev, check=False)
        ip('link', 'del', netdev, check=False)


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
    return nl_rdma_ack(RDMA_NLDEV_CMD_NEWLINK, body)


def nl_rdma_ack(cmd, body):
    """Send the RDMA netlink request CMD (an RDMA_NLDEV_CMD_*) with the
    attributes BODY and NLM_F_ACK; returns 0 or the positive errno of the
    ACK."""
    import socket
    seq = (int(time.monotonic() * 1000) + os.getpid()) & 0x7fffffff
    msg = struct.pack('=IHHII', 16 + len(body),
                      (RDMA_NL_NLDEV << 10) + cmd,
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
                if ln < 16:
                    break
                off += (ln + 3) & ~3
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


# rtnetlink (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h)
_NLMSG_HDR = struct.Struct('=IHHII')     # len, type, flags, seq, pid
_IFADDRMSG = struct.Struct('=BBBBI')     # family, prefixlen, flags, scope, index
_RTATTR = struct.Struct('=HH')           # len, type
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_RTM_NEWADDR, _RTM_GETADDR = 20, 22
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_SCOPES = {0: 'global', 200: 'site', 253: 'link', 254: 'host'}


def _align4(n):
    return (n + 3) & ~3


def netdev_addrs(name=NETDEV, family=None):
    """Addresses configured on a netdev, as `ip -o addr show` lists them,
    as (ipaddress object, prefixlen, scope) tuples.  Read with one
    rtnetlink RTM_GETADDR dump rather than by running ip(8): the harness
    asks before and after every test, and an exec costs about 0.14 s in
    the TCG guest."""
    index = netdev_ifindex(name)
    fam = {4: socket.AF_INET, 6: socket.AF_INET6}.get(family, socket.AF_UNSPEC)
    req = _NLMSG_HDR.pack(_NLMSG_HDR.size + _IFADDRMSG.size, _RTM_GETADDR,
                          _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + \
        _IFADDRMSG.pack(fam, 0, 0, 0, 0)
    res = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                       socket.NETLINK_ROUTE) as s:
        s.sendall(req)
        while True:
            buf = s.recv(1 << 16)
            off = 0
            while off + _NLMSG_HDR.size <= len(buf):
                ln, typ, _, _, _ = _NLMSG_HDR.unpack_from(buf, off)
                if ln < _NLMSG_HDR.size or off + ln > len(buf):
                    raise OSError(errno.EPROTO, 'bad rtnetlink message')
                if typ == _NLMSG_DONE:
                    return res
                if typ == _NLMSG_ERROR:
                    err = -struct.unpack_from('=i', buf,
                                              off + _NLMSG_HDR.size)[0]
                    raise OSError(err, os.strerror(err))
                if typ == _RTM_NEWADDR:
                    a = _addr_of(buf, off + _NLMSG_HDR.size, off + ln, index)
                    if a:
                        res.append(a)
                off += _align4(ln)


def _addr_of(buf, off, end, index):
    """One RTM_NEWADDR's (address, prefixlen, scope), None for another
    netdev's; IFA_LOCAL is the address for IPv4 (IFA_ADDRESS is the peer
    of a point-to-point link), IFA_ADDRESS for IPv6, as ip(8) shows."""
    fam, plen, _, scope, idx = _IFADDRMSG.unpack_from(buf, off)
    if idx != index or fam not in (socket.AF_INET, socket.AF_INET6):
        return None
    attrs = {}
    off += _IFADDRMSG.size
    while off + _RTATTR.size <= end:
        ln, typ = _RTATTR.unpack_from(buf, off)
        if ln < _RTATTR.size:
            break
        attrs[typ] = bytes(buf[off + _RTATTR.size:off + ln])
        off += _align4(ln)
    raw = attrs.get(_IFA_LOCAL) or attrs.get(_IFA_ADDRESS)
    if not raw:
        return None
    return (ipaddress.ip_address(raw), plen, _SCOPES.get(scope, str(scope)))


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


def _pins_now():
    with open('/proc/sys/vm/stat_refresh', 'w') as f:
        f.write('1')
    with open('/proc/vmstat') as f:
        v = dict(line.split() for line in f)
    return int(v['nr_foll_pin_acquired']) - int(v['nr_foll_pin_released'])


def pinned_pages(samples=5, interval=0.02):
    """Pages pinned with FOLL_PIN in the whole system (/proc/vmstat), the
    least of a few readings.

    The per-CPU counter deltas are folded in first (vm.stat_refresh):
    unfolded, acquired and released lag apart and the difference can even
    read negative (seen on Linux 6.12: -25 before a test, 0 after).
    The count is system wide, and others pin for an instant: on Linux 6.12
    every write to the guest's 9p results share, where the test log goes,
    pins the writer's page for the length of the request (a probe writing
    a log line at a time read 1 in 3 of 40 readings).  A pin that stays,
    what the tests look for, is in every reading; a passing one is not in
    the least of several."""
    least = _pins_now()
    for _ in range(samples - 1):
        time.sleep(interval)
        least = min(least, _pins_now())
    return least


# --------------------------------------------------------------------------
# Baseline state: (re)create what the harness created
# --------------------------------------------------------------------------

class LineChild:
    """A helper script of this directory in a process of its own that
    answers JSON lines: ask(**req) writes one request and returns the
    answer; an answer with an 'error' key fails the test.  close() asks
    it to exit ({exit_key: 'exit'}), then kills it if it does not."""

    def __init__(self, script, *args, exit_key='op', timeout=60):
        self.exit_key, self.timeout = exit_key, timeout
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(__file__), script),
             *map(str, args)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
            cwd=os.path.dirname(__file__))

    def read(self, timeout=None):
        timeout = timeout or self.timeout
        if not select.select([self.p.stdout], [], [], timeout)[0]:
            raise AssertionError(f'peer silent for {timeout}s')
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f'peer exited ({self.p.wait()})')
        ans = json.loads(line)
        assert 'error' not in ans, ans['error']
        return ans

    def ask(self, **req):
        self.p.stdin.write(json.dumps(req) + '\n')
        self.p.stdin.flush()
        return self.read()

    def close(self):
        if self.p.poll() is None:
            try:
                self.ask(**{self.exit_key: 'exit'})
            except (AssertionError, BrokenPipeError, OSError, ValueError):
                pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


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

    def intact(self):
        """Cheap check (sysfs only, no processes started) that module,
        netdev (up, same MTU) and device are there and no temporary
        device or netdev is left.  Addresses are not compared."""
        return (module_loaded() and netdev_exists() and dev_exists() and
                netdev_is_up() and netdev_mtu() == self.mtu and
                not any(dev_exists(d) for d in TMP_DEVS if d != DEV) and
                not any(netdev_exists(n) for n in TMP_NETDEVS))

    def restore(self, quick=False):
        """Bring module, netdev and device back; return a list of the actions
        taken (empty when nothing had to be done).  quick=True: only if
        intact() says something is off (for tests marked keeps_netdev)."""
        if quick and self.intact():
            return []
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


# A process's own fault, as x86 traps.c reports a user-mode general
# protection fault: "traps: COMM[PID] general protection fault ip:... sp:...
# error:... in LIB[...]" (the kernel's own reads "general protection fault,
# probably for non-canonical address ..." or "general protection fault:
# 0000 [#1] ...").
KLOG_USER_GPF = re.compile(r'traps: (\S+\[\d+\]) general protection fault '
                           r'ip:[0-9a-f]+ sp:[0-9a-f]+ error:[0-9a-f]+')
# A test that has matched such a crash to a known bug of a program it runs
# says so in the kernel log, after the fault line (mark_known_user_crash()).
KNOWN_CRASH_MARK = 'bzc-pyverbs: known user-space crash of '
_KNOWN_CRASH = re.compile(re.escape(KNOWN_CRASH_MARK) + r'(\S+\[\d+\]):')


def mark_known_user_crash(comm, pid, reason):
    """Write to the kernel log that process `comm`[`pid`]'s crash is the
    known bug `reason`, so that the user-mode GPF line the kernel logged
    for it earlier does not fail the test or the run (bad_kernel_lines()
    here, kernel_problems in tools/lib/kernel-log.sh).  Only that process's
    user-mode fault lines before the mark are excused; `comm` is cut to the
    kernel's 15 characters."""
    with open('/dev/kmsg', 'w') as k:
        k.write(f'{KNOWN_CRASH_MARK}{comm[:15]}[{pid}]: {reason}\n')


def _user_gpf_of(line):
    """COMM[PID] of a user-mode GPF line, else None."""
    m = KLOG_USER_GPF.search(line)
    return m.group(1) if m else None


# A lockdep report that is known not to be bzc's: tools/debug-kernel names
# its cycle (the text lockdep prints after "Chain exists of:") in
# BZC_KNOWN_LOCKDEP for the one boot that is known to produce it
# (docs/debug-kernel.md).  Only that report's own "WARNING: possible ...
# detected" and "Call Trace:" lines are excused, and only when the report
# is whole (up to its "</TASK>"): any other warning, interleaved or not,
# still fails.
LOCKDEP_REPORT = 'WARNING: possible circular locking dependency detected'


def known_lockdep_chain():
    """The cycle named in BZC_KNOWN_LOCKDEP, or ''."""
    return os.environ.get('BZC_KNOWN_LOCKDEP', '').strip()


def bad_kernel_lines(lines, include_selftest=False):
    """The lines that mean the kernel hit a problem, but user-mode GPFs of
    processes a later mark_known_user_crash() line names, and the known
    lockdep report of known_lockdep_chain()."""
    bad = []
    chain = known_lockdep_chain()
    report = None       # indices in bad of the lockdep report being read
    known = False
    for l in lines:
        m = _KNOWN_CRASH.search(l)
        if m:
            bad = [b for b in bad if _user_gpf_of(b) != m.group(1)]
            report = None   # (its indices moved: excuse nothing)
            continue
        if LOCKDEP_REPORT in l:
            report, known = [], False
        if KLOG_BAD.search(l) and \
                (include_selftest or SELFTEST_MARK not in l):
            if report is not None and (LOCKDEP_REPORT in l or
                                       'Call Trace' in l):
                report.append(len(bad))
            bad.append(l)
        if report is not None:
            known = known or bool(chain and chain in l)
            if '</TASK>' in l:
                if known:
                    bad = [b for i, b in enumerate(bad) if i not in report]
                report = None
    return bad


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


# --------------------------------------------------------------------------
# Queue pairs and traffic (test_qp*.py)
#
# Loopback: two QPs on the same device, addressed by the RoCE v2 GID of
# $BZC_IPV4. Every QPEnd has its own send CQ and receive CQ, so a test can
# say exactly which queue must (or must not) complete.
# --------------------------------------------------------------------------

GRH_BYTES = 40
UD_QKEY = 0x11111111
# Completions can take a while under TCG (8 MiB copies in a worker).
CQ_TIMEOUT = float(os.environ.get('BZC_CQ_TIMEOUT', '60'))


def _verbs():
    import pyverbs.enums as e
    return e


def access_all():
    e = _verbs()
    return (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
            e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)


_libverbs = None


def wc_status_str(status):
    """ibv_wc_status_str() of libibverbs."""
    global _libverbs
    import ctypes
    if _libverbs is None:
        _libverbs = ctypes.CDLL('libibverbs.so.1')
        _libverbs.ibv_wc_status_str.restype = ctypes.c_char_p
        _libverbs.ibv_wc_status_str.argtypes = [ctypes.c_int]
    return _libverbs.ibv_wc_status_str(status).decode()


def wc_str(wc):
    return (f'wr_id={wc.wr_id:#x} status={wc.status}({wc_status_str(wc.status)})'
            f' opcode={wc.opcode} byte_len={wc.byte_len} qp_num={wc.qp_num}'
            f' src_qp={wc.src_qp} wc_flags={wc.wc_flags:#x}'
            f' imm_data={wc.imm_data:#x} vendor_err={wc.vendor_err}')


def find_ipv4_gid_index(ctx, port=PORT, dev=DEV, ipv4=IPV4):
    """Index of the GID ::ffff:`ipv4` (default $BZC_IPV4) of `dev`
    (query_gid), the RoCE v2 one if the table has it twice."""
    want = ipv4_mapped(ipv4)
    found = []
    for i in range(ctx.query_port(port).gid_tbl_len):
        try:
            gid = ipaddress.IPv6Address(str(ctx.query_gid(port, i)))
        except Exception:       # empty or unreadable entry
            continue
        if gid == want:
            found.append(i)
    if not found:
        raise AssertionError(f'{dev}: no GID {want} (IPv4 {ipv4}) in the '
                             f'GID table; sysfs has {sysfs_gids(dev)}')
    types = sysfs_gids(dev)
    v2 = [i for i in found if i in types and types[i][1] == 'RoCE v2']
    return (v2 or found)[0]


def gid_raw(gid):
    """A pyverbs GID (or its string) as the 16 bytes of the wire."""
    return ipaddress.IPv6Address(str(gid)).packed


class QPEnd:
    """A QP with its own send and receive CQ.  With send_ops (a mask of
    IBV_QP_EX_WITH_*) the QP is an extended one (QPEx, ibv_wr_* API)."""

    def __init__(self, ctx, pd, qp_type, cap=None, sq_sig_all=False,
                 cq_depth=512, channel=None, send_ops=None):
        from pyverbs.cq import CQ
        from pyverbs.qp import QP, QPCap, QPEx, QPInitAttr, QPInitAttrEx
        e = _verbs()
        self.ctx, self.pd, self.qp_type = ctx, pd, qp_type
        self.scq = CQ(ctx, cq_depth, None, channel, 0)
        self.rcq = CQ(ctx, cq_depth, None, channel, 0)
        if send_ops is None:
            self.init_attr = QPInitAttr(qp_type=qp_type, scq=self.scq,
                                        rcq=self.rcq, cap=cap or QPCap(),
                                        sq_sig_all=1 if sq_sig_all else 0)
            self.qp = QP(pd, self.init_attr)
        else:
            self.init_attr = QPInitAttrEx(
                qp_type=qp_type, scq=self.scq, rcq=self.rcq,
                cap=cap or QPCap(), sq_sig_all=1 if sq_sig_all else 0,
                pd=pd, send_ops_flags=send_ops,
                comp_mask=e.IBV_QP_INIT_ATTR_PD |
                e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
            self.qp = QPEx(ctx, self.init_attr)
        self.cap = self.init_attr.cap       # what the device granted

    @property
    def qpn(self):
        return self.qp.qp_num

    def state(self):
        e = _verbs()
        return self.qp.query(e.IBV_QP_STATE)[0].qp_state

    def close(self):
        for o in (self.qp, self.scq, self.rcq):
            o.close()


def qp_to_init(qp, qp_type, access=None, qkey=UD_QKEY, port=PORT,
               pkey_index=0):
    from pyverbs.qp import QPAttr
    e = _verbs()
    a = QPAttr()
    a.qp_state = e.IBV_QPS_INIT
    a.pkey_index = pkey_index
    a.port_num = port
    mask = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
    if qp_type == e.IBV_QPT_UD:
        a.qkey = qkey
        mask |= e.IBV_QP_QKEY
    else:
        a.qp_access_flags = access_all() if access is None else access
        mask |= e.IBV_QP_ACCESS_FLAGS
    qp.modify(a, mask)


def ah_attr_for(gid, gid_index, port=PORT):
    from pyverbs.addr import AHAttr, GlobalRoute
    gr = GlobalRoute(dgid=gid, sgid_index=gid_index, hop_limit=64)
    return AHAttr(port_num=port, is_global=1, gr=gr)


def qp_to_rtr(qp, qp_type, gid, gid_index, dest_qpn, rq_psn=0,
              path_mtu=None, max_dest_rd_atomic=4, min_rnr_timer=1):
    from pyverbs.qp import QPAttr
    e = _verbs()
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTR
    mask = e.IBV_QP_STATE
    if qp_type != e.IBV_QPT_UD:
        a.ah_attr = ah_attr_for(gid, gid_index)
        a.path_mtu = e.IBV_MTU_1024 if path_mtu is None else path_mtu
        a.dest_qp_num = dest_qpn
        a.rq_psn = rq_psn
        mask |= (e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                 e.IBV_QP_RQ_PSN)
    if qp_type == e.IBV_QPT_RC:
        a.max_dest_rd_atomic = max_dest_rd_atomic
        a.min_rnr_timer = min_rnr_timer
        mask |= e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER
    qp.modify(a, mask)


def qp_to_rts(qp, qp_type, sq_psn=0, timeout=14, retry_cnt=7, rnr_retry=7,
              max_rd_atomic=4):
    from pyverbs.qp import QPAttr
    e = _verbs()
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTS
    a.sq_psn = sq_psn
    mask = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN
    if qp_type == e.IBV_QPT_RC:
        a.timeout = timeout
        a.retry_cnt = retry_cnt
        a.rnr_retry = rnr_retry
        a.max_rd_atomic = max_rd_atomic
        mask |= (e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                 e.IBV_QP_MAX_QP_RD_ATOMIC)
    qp.modify(a, mask)


def qp_to_err(qp):
    from pyverbs.qp import QPAttr
    e = _verbs()
    a = QPAttr()
    a.qp_state = e.IBV_QPS_ERR
    qp.modify(a, e.IBV_QP_STATE)


def bring_up_qp(qp, qp_type, gid, gid_index, dest_qpn, access=None,
                rnr_retry=7, min_rnr_timer=1):
    """RESET -> INIT -> RTR -> RTS of one pyverbs QP, addressed at QP
    dest_qpn behind `gid` (UD: just RTS), with qp_to_*()'s defaults."""
    qp_to_init(qp, qp_type, access=access)
    qp_to_rtr(qp, qp_type, gid, gid_index, dest_qpn,
              min_rnr_timer=min_rnr_timer)
    qp_to_rts(qp, qp_type, rnr_retry=rnr_retry)


def connect_qps(a, b, gid_index, access_a=None, access_b=None,
                rnr_retry=7, min_rnr_timer=1):
    """Bring QPEnds a and b to RTS, each addressed at the other (for UD:
    just RTS).  rnr_retry is the requester's, min_rnr_timer the
    responder's (both set on both)."""
    gid = a.ctx.query_gid(PORT, gid_index)
    for me, peer, acc in ((a, b, access_a), (b, a, access_b)):
        bring_up_qp(me.qp, me.qp_type, gid, gid_index, peer.qpn,
                    access=acc, rnr_retry=rnr_retry,
                    min_rnr_timer=min_rnr_timer)


def self_connected_qp(ctx, pd, qp_type, gid_index, cap=None, cq_depth=512):
    """A QPEnd at RTS addressed at itself (UD: just at RTS)."""
    end = QPEnd(ctx, pd, qp_type, cap, cq_depth=cq_depth)
    try:
        bring_up_qp(end.qp, qp_type, ctx.query_gid(PORT, gid_index),
                    gid_index, end.qpn)
    except BaseException:
        end.close()
        raise
    return end


def poll_cq(cq, n, timeout=CQ_TIMEOUT):
    """Exactly n completions (fewer: AssertionError naming what came)."""
    wcs = []
    deadline = time.monotonic() + timeout
    delay = 0.0002
    while len(wcs) < n:
        k, got = cq.poll(n - len(wcs))
        if k:
            wcs.extend(got)
            continue
        if time.monotonic() >= deadline:
            raise AssertionError(
                f'{len(wcs)} of {n} completions after {timeout}s: ' +
                '; '.join(wc_str(w) for w in wcs))
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return wcs


def drain_cq(cq, wait=0.0):
    """Everything the CQ holds now, or within `wait` seconds."""
    wcs = []
    deadline = time.monotonic() + wait
    while True:
        k, got = cq.poll(64)
        wcs.extend(got)
        if k:
            continue
        if time.monotonic() >= deadline:
            return wcs
        time.sleep(0.005)


def assert_quiet(cq, what, wait=0.0):
    """The CQ holds no completion (now, or within `wait` seconds)."""
    extra = drain_cq(cq, wait)
    assert not extra, f'{what}: unexpected completions: ' + \
        '; '.join(wc_str(w) for w in extra)


def expect_wcs(cq, want, what):
    """The CQ's next completions are exactly [(wr_id, status), ...]: they
    come in that order and no more follow within 50 ms.  Returns them."""
    wcs = poll_cq(cq, len(want))
    got = [(w.wr_id, w.status) for w in wcs]
    names = [(i, wc_status_str(s)) for i, s in want]
    assert got == list(want), f'{what}: got ' + \
        '; '.join(wc_str(w) for w in wcs) + f'; want {names}'
    assert_quiet(cq, what, 0.05)
    return wcs


# Work requests from pyverbs MRs.  flags=None: IBV_SEND_SIGNALED.

def sge(mr, off, length, lkey=None):
    """`length` bytes at offset `off` of a pyverbs MR, with its lkey (or
    the lkey given)."""
    from pyverbs.wr import SGE
    return SGE(mr.buf + off, length, mr.lkey if lkey is None else lkey)


def send_wr(wr_id, opcode, sges=(), flags=None):
    from pyverbs.wr import SendWR
    if flags is None:
        flags = _verbs().IBV_SEND_SIGNALED
    return SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sges),
                  sg=list(sges) or None, send_flags=flags)


def rdma_wr(wr_id, opcode, sges, rkey, addr, flags=None):
    """An RDMA WRITE (WITH_IMM) or READ of remote `addr` under `rkey`."""
    w = send_wr(wr_id, opcode, sges, flags)
    w.set_wr_rdma(rkey, addr)
    return w


def recv_wr(wr_id, sges):
    from pyverbs.wr import RecvWR
    return RecvWR(wr_id=wr_id, num_sge=len(sges), sg=list(sges))


# Loopback rigs: one VerbsEnv per test module, QPPairs made per test
# through a ClosingFactory fixture:
#
#     @pytest.fixture(scope='module')
#     def env():
#         with h.VerbsEnv() as en:
#             en.mr_a = en.reg(SZ, h.access_all())
#             yield en
#
#     @pytest.fixture
#     def pairs(env):
#         with h.ClosingFactory(h.QPPair, env) as make:
#             yield make            # a test: a, b = pairs()

class VerbsEnv:
    """A context on `dev` (default $BZC_DEV), its PD `pd` (and `pd2`,
    "another PD", unless second_pd=False), the RoCE v2 GID of `ipv4`
    (default $BZC_IPV4; `gid`, `gid_index`) and the MRs made by reg()
    (`registered`, in order).  close(), or the end of a `with` block,
    releases all of it."""

    def __init__(self, second_pd=True, dev=DEV, ipv4=IPV4):
        import pyverbs.device as d
        from pyverbs.pd import PD
        self.ctx = d.Context(name=dev)
        self.pd = PD(self.ctx)
        self.pd2 = PD(self.ctx) if second_pd else None
        self.gid_index = find_ipv4_gid_index(self.ctx, dev=dev, ipv4=ipv4)
        self.gid = self.ctx.query_gid(PORT, self.gid_index)
        self.registered = []

    def reg(self, length, access, pd=None):
        """An MR of `length` bytes in `pd` (default: self.pd), released by
        close()."""
        from pyverbs.mr import MR
        mr = MR(pd or self.pd, length, access)
        self.registered.append(mr)
        return mr

    def close(self):
        for mr in self.registered:
            mr.close()
        if self.pd2 is not None:
            self.pd2.close()
        self.pd.close()
        self.ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class QPPair:
    """Two QPEnds in env.pd, a (the requester) and b (the responder),
    connected to each other by connect_qps(); `a, b = pair` unpacks
    them.  The default cap is 32 WRs and 4 SGEs each way, 64 bytes
    inline.  sq_sig_all applies to a, access_b to b; rnr_retry and
    min_rnr_timer as connect_qps() has them.  close() closes `ends` (a
    test that closes an end itself takes it out of that list)."""

    def __init__(self, env, qp_type=None, cap=None, cq_depth=64,
                 send_ops=None, sq_sig_all=False, access_b=None,
                 rnr_retry=7, min_rnr_timer=1):
        from pyverbs.qp import QPCap
        self.env = env
        self.qp_type = _verbs().IBV_QPT_RC if qp_type is None else qp_type
        if cap is None:
            cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=4,
                        max_recv_sge=4, max_inline_data=64)
        self.ends = []
        try:
            for sig in (sq_sig_all, False):
                self.ends.append(QPEnd(env.ctx, env.pd, self.qp_type, cap,
                                       sig, cq_depth=cq_depth,
                                       send_ops=send_ops))
            self.a, self.b = self.ends
            connect_qps(self.a, self.b, env.gid_index, access_b=access_b,
                        rnr_retry=rnr_retry, min_rnr_timer=min_rnr_timer)
        except BaseException:
            QPPair.close(self)      # not a subclass's: it is not set up
            raise

    def __iter__(self):
        return iter((self.a, self.b))

    def close(self):
        for end in self.ends:
            end.close()


class ClosingFactory:
    """For a per-test fixture: calling it calls make(*args, *more,
    **kwargs, **more_kw) (like functools.partial), and close(), or the
    end of a `with` block, closes everything it made, oldest first."""

    def __init__(self, make, *args, **kwargs):
        self.make, self.args, self.kwargs = make, args, kwargs
        self.made = []

    def __call__(self, *more, **more_kw):
        obj = self.make(*self.args, *more, **{**self.kwargs, **more_kw})
        self.made.append(obj)
        return obj

    def close(self):
        for obj in self.made:
            obj.close()
        self.made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def uverbs_maps():
    """{start: length} of this process's /dev/infiniband/uverbs*
    mappings (the rings the provider mapped)."""
    res = {}
    with open('/proc/self/maps') as f:
        for line in f:
            if '/dev/infiniband/uverbs' in line:
                a, b = line.split()[0].split('-')
                res[int(a, 16)] = int(b, 16) - int(a, 16)
    return res


def uverbs_ring_maps():
    """{start: (length, mmap offset)} of this process's
    /dev/infiniband/uverbs* mappings."""
    res = {}
    with open('/proc/self/maps') as f:
        for line in f:
            w = line.split()
            if len(w) >= 6 and w[5].startswith('/dev/infiniband/uverbs'):
                a, b = (int(x, 16) for x in w[0].split('-'))
                res[a] = (b - a, int(w[2], 16))
    return res


def uverbs_cmd_fds():
    """This process's open /dev/infiniband/uverbs* fds (one per context)."""
    return _fds_by_link('/dev/infiniband/uverbs')


def map_rings_at(cmd_fd, rings):
    """Map rings ({start: (length, offset)} of uverbs_ring_maps()) from
    cmd_fd at the same addresses, e.g. in a forked child, which inherits
    no ring mapping."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    prot_rw, map_shared_fixed = 0x3, 0x01 | 0x10
    for start, (length, off) in rings.items():
        addr = libc.mmap(start, length, prot_rw, map_shared_fixed, cmd_fd,
                         off)
        if addr != start:
            raise OSError(ctypes.get_errno(),
                          f'mapping ring {off:#x} at {start:#x}')


# Bytes that differ from the data at every position (b ^ 0xff).
INVERT = bytes(255 - i for i in range(256))


def fill_for(data):
    """What to put where `data` must land, so that every byte changes."""
    return data.translate(INVERT)


def rdma_res_list(kind):
    """`rdma -j resource show KIND` entries of the device under test
    (kind: qp, cq, mr, pd)."""
    import json
    out = rdma('-j', 'resource', 'show', kind).stdout.strip()
    if not out:
        return []
    return [r for r in json.loads(out) if r.get('ifname') == DEV]


# RDMA netlink resource tracking: what `rdma resource show` prints, read
# without starting the rdma tool (starting any process can take seconds in
# the TCG guest, where every exec reads its binary over 9p).
_NLDEV_CMD_GET = 1
_NLDEV_CMD_RES_GET = 9
# kind: (dump command, table attr, entry attr, id attr)
_NLDEV_RES = {'qp': (10, 19, 20, 21), 'cq': (12, 35, 36, 61),
              'mr': (13, 40, 41, 62), 'pd': (14, 46, 47, 60)}
_NLA_DEV_INDEX, _NLA_DEV_NAME = 1, 2
_NLA_SUMMARY, _NLA_SUMMARY_ENTRY = 15, 16
_NLA_SUMMARY_NAME, _NLA_SUMMARY_CURR = 17, 18
_NLA_RES_PID, _NLA_RES_KERN_NAME = 28, 29


def _nla_parse(buf):
    """{type: payload} of a run of netlink attributes (last one wins)
    plus the ordered list."""
    res, lst, off = {}, [], 0
    while off + 4 <= len(buf):
        ln, typ = struct.unpack_from('=HH', buf, off)
        if ln < 4:
            break
        payload = buf[off + 4:off + ln]
        res[typ & 0x3fff] = payload
        lst.append((typ & 0x3fff, payload))
        off += (ln + 3) & ~3
    return res, lst


def _nl_rdma(cmd, attrs=b'', dump=False):
    """Send one NLDEV request; return the attribute blobs of the replies."""
    import socket
    flags = 0x1 | (0x300 if dump else 0)        # REQUEST (| DUMP)
    seq = (int(time.monotonic() * 1000) + os.getpid()) & 0x7fffffff
    msg = struct.pack('=IHHII', 16 + len(attrs),
                      (RDMA_NL_NLDEV << 10) + cmd, flags, seq, 0) + attrs
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA)
    out = []
    try:
        s.settimeout(30)
        s.bind((0, 0))
        s.send(msg)
        while True:
            resp = s.recv(1 << 20)
            off = 0
            while off + 16 <= len(resp):
                ln, typ, fl, rseq, _ = struct.unpack_from('=IHHII', resp, off)
                if ln < 16:
                    return out
                body = resp[off + 16:off + ln]
                off += (ln + 3) & ~3
                if rseq != seq:
                    continue
                if typ == 3:                    # NLMSG_DONE
                    return out
                if typ == 2:                    # NLMSG_ERROR
                    err = -struct.unpack_from('=i', body)[0]
                    if err:
                        raise OSError(err, f'RDMA netlink command {cmd}: '
                                      f'{os.strerror(err)}')
                    return out
                out.append(body)
                if not dump:
                    return out
    finally:
        s.close()


def _nla_u32(t, v):
    return struct.pack('=HHI', 8, t, v)


def ib_dev_index(dev=DEV):
    for body in _nl_rdma(_NLDEV_CMD_GET, dump=True):
        a, _ = _nla_parse(body)
        if a.get(_NLA_DEV_NAME, b'').rstrip(b'\0').decode() == dev:
            return struct.unpack('=I', a[_NLA_DEV_INDEX][:4])[0]
    return None


_NLDEV_CMD_PORT_GET, _NLDEV_CMD_DELLINK = 5, 4
_NLA_NDEV_NAME = 51


def nl_links():
    """{device: netdev name or None} of every RDMA device, as `rdma link`
    shows them, over netlink (no process started)."""
    res = {}
    for body in _nl_rdma(_NLDEV_CMD_GET, dump=True):
        a, _ = _nla_parse(body)
        name = a[_NLA_DEV_NAME].rstrip(b'\0').decode()
        idx = struct.unpack('=I', a[_NLA_DEV_INDEX][:4])[0]
        res[name] = None
        try:
            ports = _nl_rdma(_NLDEV_CMD_PORT_GET,
                             _nla_u32(_NLA_DEV_INDEX, idx), dump=True)
        except OSError:             # the device went away meanwhile
            ports = []
        for pbody in ports:
            pa, _ = _nla_parse(pbody)
            if _NLA_NDEV_NAME in pa:
                res[name] = pa[_NLA_NDEV_NAME].rstrip(b'\0').decode()
    return res


def nl_dellink(dev):
    """`rdma link delete DEV` over netlink; returns 0 or the positive errno
    (ENODEV when there is no such device)."""
    idx = ib_dev_index(dev)
    if idx is None:
        return errno.ENODEV
    return nl_rdma_ack(_NLDEV_CMD_DELLINK, _nla_u32(_NLA_DEV_INDEX, idx))


def set_netdev_up(name, up):
    """`ip link set NAME up|down` through SIOCSIFFLAGS: no process started,
    so a test can flip it at a chosen moment."""
    import fcntl
    import socket
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = fcntl.ioctl(s, siocgifflags,
                          struct.pack('16sH14x', name.encode(), 0))
        flags = struct.unpack_from('16sH', ifr)[1]
        flags = flags | iff_up if up else flags & ~iff_up
        fcntl.ioctl(s, siocsifflags,
                    struct.pack('16sH14x', name.encode(), flags))


def nl_res_summary(dev=DEV):
    """Like rdma_res_summary(), over netlink: {'qp': n, 'mr': n, ...}."""
    idx = ib_dev_index(dev)
    if idx is None:
        return None
    res = {}
    for body in _nl_rdma(_NLDEV_CMD_RES_GET, _nla_u32(_NLA_DEV_INDEX, idx)):
        a, _ = _nla_parse(body)
        _, entries = _nla_parse(a.get(_NLA_SUMMARY, b''))
        for t, blob in entries:
            if t != _NLA_SUMMARY_ENTRY:
                continue
            ea, _ = _nla_parse(blob)
            name = ea[_NLA_SUMMARY_NAME].rstrip(b'\0').decode()
            res[name] = struct.unpack('=Q', ea[_NLA_SUMMARY_CURR][:8])[0]
    return res


def nl_res_list(kind, dev=DEV):
    """The `kind` objects (qp, cq, mr, pd) of a device over netlink, as
    [{'id': n, 'pid': pid or None, 'kern': name or None}]."""
    cmd, table, entry, idattr = _NLDEV_RES[kind]
    idx = ib_dev_index(dev)
    if idx is None:
        return []
    res = []
    for body in _nl_rdma(cmd, _nla_u32(_NLA_DEV_INDEX, idx), dump=True):
        a, _ = _nla_parse(body)
        _, entries = _nla_parse(a.get(table, b''))
        for t, blob in entries:
            if t != entry:
                continue
            ea, _ = _nla_parse(blob)
            res.append({
                'id': struct.unpack('=I', ea[idattr][:4])[0]
                if idattr in ea else None,
                'pid': struct.unpack('=I', ea[_NLA_RES_PID][:4])[0]
                if _NLA_RES_PID in ea else None,
                'kern': ea[_NLA_RES_KERN_NAME].rstrip(b'\0').decode()
                if _NLA_RES_KERN_NAME in ea else None})
    return res
