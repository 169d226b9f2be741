# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""rdma_cm on bzc0: address and route resolution through the netdev's IPv4
address, connection setup through the kernel CM (its MADs travel between
the GSI QPs, QP1, of bzc ports), then traffic on the user QPs.

Real clients in loopback on $BZC_IPV4, server and client on the same
device: rping (with its ping data checked against the pattern rping
writes), ucmatose and udaddy (rdmacm-utils), and pyverbs' synchronous
CMID API (perftest with -R is in test_clients.py).  Also: a connection to a port
nobody listens on is rejected cleanly, a process cannot reach the kernel's
QP1 or use a kernel PD's DMA MR key, and the device and module still go
away after rdma_cm has used them.
"""

import json
import multiprocessing
import re
import subprocess
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.cmid import CMID, AddrInfo
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h

CLIENT_TIMEOUT = 120
LISTEN_TIMEOUT = 60

GSI_QPN = 1
GSI_QKEY = 0x80010000


# --------------------------------------------------------------------------
# Running a server and a client
# --------------------------------------------------------------------------

def cm_listeners(dev=h.DEV):
    """(port space, local port) of every rdma_cm id listening on dev
    (a wildcard listener shows once per device)."""
    out = h.run(['rdma', '-j', 'resource', 'show', 'cm_id']).stdout
    found = set()
    for c in json.loads(out or '[]'):
        if c.get('state') == 'LISTEN' and c.get('ifname') == dev:
            port = int(str(c.get('src-addr', ':-1')).rsplit(':', 1)[1])
            found.add((c.get('ps'), port))
    return found


def wait_listen(server, ps, port):
    """Wait until `server` (a Popen) listens on port in port space ps."""
    deadline = time.monotonic() + LISTEN_TIMEOUT
    while (ps, port) not in cm_listeners():
        if server.poll() is not None:
            out, err = server.communicate()
            pytest.fail(f'server exited with {server.returncode} before '
                        f'listening on {ps} {port}: {out}{err}')
        if time.monotonic() > deadline:
            server.kill()
            pytest.fail(f'server not listening on {ps} {port} after '
                        f'{LISTEN_TIMEOUT}s')
        time.sleep(0.2)


def run_pair(server_cmd, client_cmd, ps, port):
    """Start the server, wait for its listener, run the client; return
    both CompletedProcess-like results (the server must exit by itself)."""
    server = subprocess.Popen(server_cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_listen(server, ps, port)
        client = h.run(client_cmd, check=False, timeout=CLIENT_TIMEOUT)
        sout, serr = server.communicate(timeout=CLIENT_TIMEOUT)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    srv = subprocess.CompletedProcess(server_cmd, server.returncode, sout,
                                      serr)
    return srv, client


def assert_ok(cp, what):
    assert cp.returncode == 0, \
        f'{what}: exit {cp.returncode}\nstdout: {cp.stdout}\n' \
        f'stderr: {cp.stderr}'


# --------------------------------------------------------------------------
# rping
# --------------------------------------------------------------------------

def rping_data(ping, size):
    """The text rping puts in its buffer for ping number `ping` (size
    bytes with the NUL): "rdma-ping-N: " and then characters from 'A' + N,
    cycling through 'A'..'z'."""
    text = f'rdma-ping-{ping}: '
    c = 65 + ping % 58
    while len(text) < size - 1:
        text += chr(c)
        c = 65 if c == 122 else c + 1
    return text


@pytest.mark.parametrize('size', [64, 4000])
def test_rping_loopback(size):
    """rping server and client on $BZC_IPV4: both exit 0, and each of the
    10 pings printed by either side is exactly what rping wrote (the
    client also validates with -V)."""
    count, port = 10, 7000 + size % 1000
    srv, cli = run_pair(
        ['rping', '-s', '-a', h.IPV4, '-v', '-C', str(count), '-S', str(size),
         '-p', str(port)],
        ['rping', '-c', '-a', h.IPV4, '-v', '-V', '-C', str(count), '-S',
         str(size), '-p', str(port)], 'TCP', port)
    assert_ok(cli, 'rping client')
    assert_ok(srv, 'rping server')
    want = [rping_data(i, size) for i in range(count)]
    got_cli = re.findall(r'^ping data: (.*)$', cli.stdout, re.M)
    got_srv = re.findall(r'^server ping data: (.*)$', srv.stdout, re.M)
    assert got_cli == want, f'client printed {got_cli!r}'
    assert got_srv == want, f'server printed {got_srv!r}'


def test_rping_no_listener():
    """A client connecting to a port nobody listens on gets a reject from
    the peer's CM (not a timeout) and exits non-zero; nothing in the
    kernel log (checked by the kernel_log fixture)."""
    start = time.monotonic()
    cli = h.run(['rping', '-c', '-a', h.IPV4, '-C', '1', '-p', '7999'],
                check=False, timeout=CLIENT_TIMEOUT)
    assert cli.returncode != 0, cli.stdout + cli.stderr
    assert 'REJECTED' in cli.stdout + cli.stderr or \
        'connect error' in cli.stdout + cli.stderr, cli.stdout + cli.stderr
    # A MAD-level timeout would take the CM's retries (seconds); a reject
    # comes back at once, even on an emulated CPU.
    assert time.monotonic() - start < 30


# --------------------------------------------------------------------------
# rdmacm-utils
# --------------------------------------------------------------------------

def test_ucmatose_loopback():
    """ucmatose: 4 RC connections through rdma_cm, 10 messages of 1000
    bytes each way on each, then disconnect: both sides report status 0."""
    port = 7471
    args = ['-c', '4', '-C', '10', '-S', '1000', '-p', str(port)]
    srv, cli = run_pair(['ucmatose', '-b', h.IPV4] + args,
                        ['ucmatose', '-s', h.IPV4, '-b', h.IPV4] + args,
                        'TCP', port)
    assert_ok(cli, 'ucmatose client')
    assert_ok(srv, 'ucmatose server')
    for cp in (cli, srv):
        assert 'return status 0' in cp.stdout, cp.stdout
        assert 'data transfers complete' in cp.stdout, cp.stdout


def test_udaddy_loopback():
    """udaddy: UD addresses resolved through SIDR (CM MADs on QP1), then
    datagrams both ways; the server answers through an AH made from the
    received GRH (ibv_create_ah_from_wc), so that header must be a
    RoCE v2 one naming our GID."""
    args = ['-c', '2', '-C', '10', '-S', '500']
    srv, cli = run_pair(['udaddy', '-b', h.IPV4] + args,
                        ['udaddy', '-s', h.IPV4, '-b', h.IPV4] + args,
                        'UDP', 7174)
    assert_ok(cli, 'udaddy client')
    assert_ok(srv, 'udaddy server')
    for cp in (cli, srv):
        assert 'return status 0' in cp.stdout, cp.stdout


# --------------------------------------------------------------------------
# pyverbs CMID (synchronous rdma_cm API)
# --------------------------------------------------------------------------

CMID_PORT = 7600
MSG = 1024


def _cmid_qp_attr():
    return QPInitAttr(qp_type=e.IBV_QPT_RC,
                      cap=QPCap(max_send_wr=4, max_recv_wr=4))


def _cmid_server(ready, result):
    try:
        ai = AddrInfo(src=h.IPV4, src_service=str(CMID_PORT),
                      port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
        sid = CMID(creator=ai, qp_init_attr=_cmid_qp_attr())
        sid.listen()
        ready.set()
        cid = sid.get_request()
        mr = cid.reg_msgs(MSG)
        cid.post_recv(mr, MSG)
        cid.accept()
        wc = cid.get_recv_comp()
        got = mr.read(MSG, 0)
        # Answer with the bytes reversed.
        mr.write(got[::-1], MSG)
        cid.post_send(mr, e.IBV_SEND_SIGNALED, MSG)
        swc = cid.get_send_comp()
        result.put(('ok', wc.status, wc.byte_len, swc.status, got))
        # The queue's feeder thread sends the result, but the synchronous
        # rdma_disconnect() below blocks holding the GIL until the client
        # answers the DREQ, which it does only after reading the result:
        # without the flush both wait for the DREQ to time out (70 s).
        result.close()
        result.join_thread()
        cid.disconnect()
        cid.close()
        sid.close()
    except Exception as ex:  # reported to the test through the queue
        ready.set()
        result.put(('error', repr(ex)))


def test_pyverbs_cmid_connect_send():
    """pyverbs.cmid: a passive CMID listens on $BZC_IPV4, an active one
    connects; the client sends 1 KiB, the server answers with the bytes
    reversed; both completions succeed and the data matches."""
    mp = multiprocessing.get_context('fork')
    ready, result = mp.Event(), mp.Queue()
    server = mp.Process(target=_cmid_server, args=(ready, result))
    server.start()
    try:
        assert ready.wait(LISTEN_TIMEOUT), 'server never listened'
        ai = AddrInfo(src=h.IPV4, dst=h.IPV4, dst_service=str(CMID_PORT),
                      port_space=ce.RDMA_PS_TCP)
        cid = CMID(creator=ai, qp_init_attr=_cmid_qp_attr())
        mr = cid.reg_msgs(MSG)
        cid.post_recv(mr, MSG)
        cid.connect()
        data = bytes((i * 7 + 3) & 0xff for i in range(MSG))
        mr.write(data, MSG)
        cid.post_send(mr, e.IBV_SEND_SIGNALED, MSG)
        swc = cid.get_send_comp()
        assert swc.status == e.IBV_WC_SUCCESS, h.wc_str(swc)
        rwc = cid.get_recv_comp()
        assert rwc.status == e.IBV_WC_SUCCESS, h.wc_str(rwc)
        assert rwc.byte_len == MSG
        assert mr.read(MSG, 0) == data[::-1]
        res = result.get(timeout=CLIENT_TIMEOUT)
        assert res[0] == 'ok', res
        _, rstatus, rlen, sstatus, got = res
        assert (rstatus, rlen, sstatus) == (e.IBV_WC_SUCCESS, MSG,
                                            e.IBV_WC_SUCCESS)
        assert got == data
        cid.disconnect()
        cid.close()
    finally:
        server.join(CLIENT_TIMEOUT)
        if server.is_alive():
            server.kill()
    assert server.exitcode == 0


# --------------------------------------------------------------------------
# What a process must not reach
# --------------------------------------------------------------------------

def test_user_ud_cannot_reach_gsi_qp(ctx):
    """A process's UD QP with the GSI Q_Key sending garbage to QPN 1 of
    bzc0: the datagram is not delivered (UD: the sender still sees
    success), the kernel's MAD layer does not choke on it, and rdma_cm
    connections still work afterwards."""
    gid_index = h.find_ipv4_gid_index(ctx)
    gid = ctx.query_gid(h.PORT, gid_index)
    pd = PD(ctx)
    end = h.QPEnd(ctx, pd, e.IBV_QPT_UD)
    try:
        try:
            h.qp_to_init(end.qp, e.IBV_QPT_UD, qkey=GSI_QKEY)
        except PyverbsRDMAError:
            # A kernel that reserves Q_Keys with the high bit is fine too.
            h.qp_to_init(end.qp, e.IBV_QPT_UD)
        h.qp_to_rtr(end.qp, e.IBV_QPT_UD, gid, gid_index, 0)
        h.qp_to_rts(end.qp, e.IBV_QPT_UD)
        mr = MR(pd, 256, e.IBV_ACCESS_LOCAL_WRITE)
        mr.write(bytes([0x01, 0x01, 0x07, 0x01] + [0xee] * 252), 256)
        ah = AH(pd, attr=h.ah_attr_for(gid, gid_index))
        for i in range(16):
            wr = SendWR(wr_id=i, opcode=e.IBV_WR_SEND,
                        num_sge=1, sg=[SGE(mr.buf, 256, mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_ud(ah, GSI_QPN, GSI_QKEY)
            end.qp.post_send(wr)
        wcs = h.poll_cq(end.scq, 16)
        assert all(w.status == e.IBV_WC_SUCCESS for w in wcs), \
            [h.wc_str(w) for w in wcs]
    finally:
        end.close()
    test_rping_loopback(64)


def kernel_symbol(name):
    """Address of a kernel symbol (root sees real ones in kallsyms)."""
    with open('/proc/kallsyms') as f:
        for line in f:
            addr, _, sym = line.split()[:3]
            if sym == name:
                return int(addr, 16)
    pytest.fail(f'{name} not in /proc/kallsyms')


# The MAD layer allocates the first PD of a new device, and with it the
# first MR: key index 1, whose key is index << 8 | the next index's low
# byte (bzc_mr.c), so 0x102 is the lkey of the kernel's DMA MR.
MAD_DMA_MR_LKEY = 1 << 8 | 2


def test_user_cannot_use_kernel_dma_mr_key(ctx):
    """A process's SEND naming the kernel DMA MR's lkey and a readable
    kernel address (linux_banner): IBV_WC_LOC_PROT_ERR, and the receiver's
    buffer does not get the kernel's bytes."""
    banner = kernel_symbol('linux_banner')
    assert banner, 'kallsyms hides addresses (kptr_restrict)'
    gid_index = h.find_ipv4_gid_index(ctx)
    pd = PD(ctx)
    a = h.QPEnd(ctx, pd, e.IBV_QPT_RC)
    b = h.QPEnd(ctx, pd, e.IBV_QPT_RC)
    try:
        h.connect_qps(a, b, gid_index)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        mr.write(b'\0' * 64, 64)
        b.qp.post_recv(RecvWR(wr_id=7, num_sge=1,
                              sg=[SGE(mr.buf, 64, mr.lkey)]))
        a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(banner, 64, MAD_DMA_MR_LKEY)],
                              send_flags=e.IBV_SEND_SIGNALED))
        swc = h.poll_cq(a.scq, 1)[0]
        assert swc.status == e.IBV_WC_LOC_PROT_ERR, h.wc_str(swc)
        assert h.drain_cq(b.rcq, 0.2) == []
        assert mr.read(64, 0) == b'\0' * 64
    finally:
        a.close()
        b.close()


# --------------------------------------------------------------------------
# Teardown after rdma_cm use
# --------------------------------------------------------------------------

@pytest.mark.disruptive
def test_link_delete_and_rmmod_after_cm():
    """After rping (the CM, MAD agents and QP1 busy on bzc0), `rdma link
    delete` and `rmmod` both succeed: the kernel clients let go of the
    device and nothing holds the module."""
    test_rping_loopback(64)
    h.link_delete(timeout=60)
    assert not h.dev_exists()
    h.run(['rmmod', h.MODULE_NAME], timeout=60)
    assert not h.module_loaded()


# --------------------------------------------------------------------------
# rdma-core's own rdma_cm tests
# --------------------------------------------------------------------------

# What needs more than rdma_cm: DC is mlx5's. (The multicast tests run:
# bzc has ibv_attach_mcast.)
RDMA_CORE_CM_SKIPS = {
    'test_rdmacm_async_traffic_dc_external_qp': 'non MLX5 device',
}
RDMA_CORE_CM_MULTICAST = ('test_rdmacm_async_multicast_traffic',
                          'test_rdmacm_async_ex_multicast_traffic',
                          'test_rdmacm_async_ex_leave_multicast_traffic')


def test_rdma_core_cm_suite():
    """rdma-core's test_rdmacm.py on bzc0 (told its netdev, see
    rdma_core_cm.py): every connection test passes (sync and async RC,
    reject, external QP, UDP, RDMA read and write, multicast join, traffic
    and leave), and only the mlx5 DC test skips."""
    runner = __file__.replace('test_rdma_cm.py', 'rdma_core_cm.py')
    cp = h.run(['/usr/bin/python3', runner, h.DEV, h.NETDEV, '-v', '-k',
                'test_rdmacm'], check=False, timeout=600)
    out = cp.stdout + cp.stderr
    results = dict(re.findall(r'^(test_\w+) \([^)]*\)(?:\n[^\n]*?)? '
                              r'\.\.\. (ok|skipped [^\n]*|FAIL|ERROR)$',
                              out, re.M))
    assert cp.returncode == 0, out
    assert len(results) >= 11, out
    for name in RDMA_CORE_CM_MULTICAST:
        assert results.get(name) == 'ok', f'{name}: {results.get(name)}\n{out}'
    for name, res in results.items():
        if name in RDMA_CORE_CM_SKIPS:
            assert res.startswith('skipped') and \
                RDMA_CORE_CM_SKIPS[name] in res, f'{name}: {res}'
        else:
            assert res == 'ok', f'{name}: {res}\n{out}'
