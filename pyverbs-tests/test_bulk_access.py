# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Who may reach a bulk channel and what the MR cache may pin
(bzcdv(7) "Access control"; emu/README.md "Bulk transfers").

* A WRITE, WRITE_WITH_IMM or READ reaches only a channel connected to the
  initiator with both sides' consent (bzcdv_connect_bulk_chan()); anything
  else is an error completion on the initiator, and the target's CQs and
  memory see nothing.
* Cached MRs are registered only by the process whose memory the PD's
  cache pins (EPERM for a forked child).
* Pinning checks its limits before it allocates: huge requests fail with a
  clean errno and a quiet kernel log.
"""

import ctypes
import errno
import os

import pytest

import bzc_helpers as h
import bzcdv as dv
from test_bulk import Peer, bulk, c, caps  # noqa: F401

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
PARAMS = '/sys/module/bzc/parameters'

pytestmark = pytest.mark.keeps_netdev


@pytest.fixture
def cache_on(c, caps):
    if not caps.mr_cache_max_bytes:
        pytest.skip('MR cache disabled (mr_cache_max_mb=0)')


@pytest.fixture
def victim(bulk):
    """Another process with a channel (and receive CQ) and an MR of 64 KiB
    that it handed out: (Peer, its announcement)."""
    p = Peer('serve', 64 * KiB)
    try:
        info = p.read()
        p.ask(cmd='zero', off=0, len=64 * KiB, byte=0x5a)
        yield p, info
    finally:
        p.close()


def assert_untouched(p):
    """The victim's CQs are empty and its memory still all 0x5a."""
    got = p.ask(cmd='pending')
    assert got == {'recv': [], 'cq': []}, got
    assert p.ask(cmd='peek', off=0, len=64 * KiB)['hex'] == '5a' * 64 * KiB


# --------------------------------------------------------------------------
# Bulk channels: strangers
# --------------------------------------------------------------------------

def test_unconnected_channel_cannot_reach(c, victim):
    """A channel that never connected names another process's channel with
    a valid rkey: every opcode, zero-length ones included, completes with
    IBV_WC_LOC_QP_OP_ERR, and the victim sees nothing."""
    p, info = victim
    n = 4 * KiB
    buf = c.buf(n)
    mr = c.mr(buf.addr, n)
    dv.zero(buf.addr, n, 0xee)
    ch = c.chan(c.cq(64), depth=8)
    far = {'raddr': info['addr'], 'rkey': info['rkey'], 'rchan': info['chan']}
    cases = [
        ('zero-length imm, no rkey', dict(op=dv.BULK_WRITE_WITH_IMM,
                                          rkey=0, imm=0xbad)),
        ('zero-length imm with rkey', dict(far, op=dv.BULK_WRITE_WITH_IMM,
                                           imm=0xbad)),
        ('zero-length write', dict(far, op=dv.BULK_WRITE)),
        ('write', dict(far, op=dv.BULK_WRITE, sges=[(buf.addr, n, mr.lkey)])),
        ('write imm', dict(far, op=dv.BULK_WRITE_WITH_IMM, imm=0xbad,
                           sges=[(buf.addr, n, mr.lkey)])),
        ('read', dict(far, op=dv.BULK_READ, sges=[(buf.addr, n, mr.lkey)])),
    ]
    for i, (what, wr) in enumerate(cases):
        wr = dict(wr, wr_id=0xdead0000 + i)
        wr.setdefault('rchan', info['chan'])
        wc = ch.run([wr])[0]
        assert (wc.wr_id, wc.status) == (wr['wr_id'], dv.WC_LOC_QP_OP_ERR), \
            f'{what}: {dv.wc_str(wc)}'
    assert_untouched(p)
    assert dv.read(buf.addr, n) == b'\xee' * n, 'a READ brought data in'


def stranger_ops(ch, buf, mr, info):
    """Every opcode at the victim's channel, zero-length ones included:
    the statuses."""
    far = {'raddr': info['addr'], 'rkey': info['rkey'], 'rchan': info['chan']}
    wrs = [dict(far, op=dv.BULK_WRITE_WITH_IMM, rkey=0, imm=0xbad),
           dict(far, op=dv.BULK_WRITE_WITH_IMM, imm=0xbad),
           dict(far, op=dv.BULK_WRITE, sges=[(buf.addr, 4096, mr.lkey)]),
           dict(far, op=dv.BULK_READ, sges=[(buf.addr, 4096, mr.lkey)])]
    return [w.status for w in ch.run([dict(w, wr_id=i)
                                      for i, w in enumerate(wrs)])]


def test_one_sided_connect_is_not_enough(c, victim):
    """A stranger that names the victim's channel in its own connect still
    gets IBV_WC_REM_INV_REQ_ERR, while the victim is unconnected and while
    it is connected to someone else; that someone reaches it."""
    p, info = victim
    buf = c.buf(4096)
    mr = c.mr(buf.addr, 4096)
    dv.zero(buf.addr, 4096, 0xee)
    stranger = c.chan(c.cq(64), depth=8)
    assert stranger.connect(bytes.fromhex(info['gid']), info['chan']) == 0
    assert stranger_ops(stranger, buf, mr, info) == \
        [dv.WC_REM_INV_REQ_ERR] * 4
    assert_untouched(p)

    friend = c.chan(c.cq(64), depth=8)
    assert friend.connect(bytes.fromhex(info['gid']), info['chan']) == 0
    assert p.ask(cmd='connect', gid=c.loopback_gid()[1].hex(),
                 chan=friend.num) == {'rc': 0}
    assert stranger_ops(stranger, buf, mr, info) == \
        [dv.WC_REM_INV_REQ_ERR] * 4
    assert_untouched(p)
    assert dv.read(buf.addr, 4096) == b'\xee' * 4096

    # the friend both sides named gets through, zero-length imm included
    assert stranger_ops(friend, buf, mr, info) == [dv.WC_SUCCESS] * 4
    got = p.ask(cmd='recv', n=2)['wcs']
    assert [(w['opcode'], w['imm'], w['src_qp']) for w in got] == \
        [(dv.WC_RECV_RDMA_WITH_IMM, 0xbad, friend.num)] * 2, got
    assert p.ask(cmd='peek', off=0, len=8)['hex'] == 'ee' * 8


def test_zero_length_checks_the_rkey(c):
    """A zero-length WRITE_WITH_IMM or READ between connected channels:
    with no rkey it only needs the connection; an rkey given is checked
    (bad key, rights) like any other, and a refused one posts no
    arrival."""
    a = c.chan(c.cq(64), depth=8)
    pd2 = c.alloc_pd()
    b = c.chan(c.cq(64), depth=8, pd=pd2, recv_cq=c.cq(64))
    dv.connect_pair(a, b)
    far = c.buf(4096)
    rw = c.mr(far.addr, 4096, pd=pd2)
    wo = c.mr(far.addr, 4096, access=dv.ACCESS_LOCAL_WRITE |
              dv.ACCESS_REMOTE_WRITE, pd=pd2)
    base = {'raddr': far.addr, 'rchan': b.num, 'imm': 7}
    cases = [
        ('imm, no rkey', dict(base, op=dv.BULK_WRITE_WITH_IMM, rkey=0),
         dv.WC_SUCCESS),
        ('imm, good rkey', dict(base, op=dv.BULK_WRITE_WITH_IMM,
                                rkey=rw.rkey), dv.WC_SUCCESS),
        ('imm, bad rkey', dict(base, op=dv.BULK_WRITE_WITH_IMM,
                               rkey=rw.rkey ^ 0x5a5a00), dv.WC_REM_ACCESS_ERR),
        ('imm, rkey of another PD', dict(base, op=dv.BULK_WRITE_WITH_IMM,
                                         rkey=c.mr(far.addr, 4096).rkey),
         dv.WC_REM_ACCESS_ERR),
        ('imm, address outside the MR', dict(base, op=dv.BULK_WRITE_WITH_IMM,
                                             rkey=rw.rkey,
                                             raddr=far.addr + 8192),
         dv.WC_REM_ACCESS_ERR),
        ('read, no remote read right', dict(base, op=dv.BULK_READ,
                                            rkey=wo.rkey),
         dv.WC_REM_ACCESS_ERR),
        ('read, good rkey', dict(base, op=dv.BULK_READ, rkey=rw.rkey),
         dv.WC_SUCCESS),
    ]
    for i, (what, wr, status) in enumerate(cases):
        wc = a.run([dict(wr, wr_id=i)])[0]
        assert wc.status == status, f'{what}: {dv.wc_str(wc)}'
        arrivals = b.recv_cq.poll(4) if wr['op'] == dv.BULK_WRITE_WITH_IMM \
            else []
        want = 1 if status == dv.WC_SUCCESS and \
            wr['op'] == dv.BULK_WRITE_WITH_IMM else 0
        assert len(arrivals) == want, f'{what}: {len(arrivals)} arrivals'
    b.recv_cq.assert_empty()


def test_connect_errors(c):
    """bzcdv_connect_bulk_chan(): EINVAL, ENETUNREACH, EISCONN, and EPERM
    from a forked child; a failed connect leaves the channel unconnected
    and connectable."""
    a = c.chan(c.cq(16), depth=4)
    b = c.chan(c.cq(16), depth=4)
    idx, gid = c.loopback_gid()
    assert a.connect(gid, b.num, comp_mask=1) == errno.EINVAL
    assert a.connect(gid, 0) == errno.EINVAL
    assert a.connect(gid, b.num, sgid_index=dv.GID_TBL_LEN - 1) == \
        errno.EINVAL                                     # an empty entry
    assert a.connect(gid, b.num, sgid_index=255) == errno.EINVAL
    rxe_ip = os.environ.get('RXE_IPV4', '198.18.1.1')
    for other in (dv.ipv4_gid(rxe_ip), bytes(16), b'\xfe\x80' + bytes(14)):
        assert a.connect(other, b.num) == errno.ENETUNREACH, other.hex()
    pid = os.fork()
    if pid == 0:
        os._exit(a.connect(gid, b.num) & 0xff)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == errno.EPERM, \
        status
    assert a.connect(gid, b.num) == 0
    assert a.connect(gid, b.num) == errno.EISCONN
    assert b.connect(gid, a.num) == 0
    # and they work
    buf = c.buf(4096)
    mr = c.mr(buf.addr, 4096)
    wc = a.run([{'op': dv.BULK_WRITE, 'sges': [(buf.addr, 8, mr.lkey)],
                 'raddr': buf.addr + 8, 'rkey': mr.rkey, 'rchan': b.num}])[0]
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)


def test_destroyed_peer(c):
    """A channel whose peer is gone: IBV_WC_REM_INV_REQ_ERR, and the number
    of a channel created after it does not revive the connection."""
    a, b = c.chan(c.cq(16), depth=4), c.chan(c.cq(16), depth=4)
    dv.connect_pair(a, b)
    buf = c.buf(4096)
    mr = c.mr(buf.addr, 4096)
    wr = {'op': dv.BULK_WRITE, 'sges': [(buf.addr, 8, mr.lkey)],
          'raddr': buf.addr + 8, 'rkey': mr.rkey, 'rchan': b.num}
    assert a.run([wr])[0].status == dv.WC_SUCCESS
    b.close()
    assert a.run([wr])[0].status == dv.WC_REM_INV_REQ_ERR
    nb = c.chan(c.cq(16), depth=4)
    assert nb.connect(c.loopback_gid()[1], a.num) == 0
    assert a.run([dict(wr, rchan=nb.num)])[0].status == dv.WC_LOC_QP_OP_ERR


def test_self_connected_channel(c):
    """A channel connected to itself writes into its own PD's memory."""
    n = 64 * KiB
    ch = c.chan(c.cq(16), depth=4)
    dv.connect_pair(ch, ch)
    src, dst = c.buf(n), c.buf(n)
    dv.fill(src.addr, n, dv.pattern(9))
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n)
    wc = ch.run([{'op': dv.BULK_WRITE, 'sges': [(src.addr, n, smr.lkey)],
                  'raddr': dst.addr, 'rkey': dmr.rkey, 'rchan': ch.num}])[0]
    assert (wc.status, wc.byte_len) == (dv.WC_SUCCESS, n), dv.wc_str(wc)
    assert dv.memcmp(dst.addr, src.addr, n) == 0


@pytest.fixture
def second_device(bulk):
    """bzctmp on dummy netdev bzctmp0 with 198.18.2.1/24: (name, its GID)."""
    ip4 = '198.18.2.1'
    h.ip('link', 'add', 'bzctmp0', 'type', 'dummy')
    try:
        h.ip('link', 'set', 'bzctmp0', 'up')
        h.ip('addr', 'add', f'{ip4}/24', 'dev', 'bzctmp0')
        h.link_add('bzctmp', 'bzctmp0')
        gid = dv.ipv4_gid(ip4)
        assert h.wait_until(lambda: h.gid_present(
            h.ipv4_mapped(ip4), 'bzctmp'), 10), h.sysfs_gids('bzctmp')
        yield 'bzctmp', gid
    finally:
        h.link_delete('bzctmp', check=False)
        h.ip('link', 'del', 'bzctmp0', check=False)


def test_other_device_cannot_reach(c, victim, second_device):
    """A channel on another bzc device cannot connect to bzc0's address,
    and cannot reach the victim's channel number even when connected to
    that number at its own device's address: the number names a channel of
    the device it is connected through."""
    p, info = victim
    name, gid2 = second_device
    with dv.Ctx(name) as c2:
        idx2 = c2.gid_index(gid2)
        buf = c2.buf(4096)
        mr = c2.mr(buf.addr, 4096)
        dv.zero(buf.addr, 4096, 0xee)
        ch = c2.chan(c2.cq(64), depth=8)
        assert ch.connect(bytes.fromhex(info['gid']), info['chan'],
                          sgid_index=idx2) == errno.ENETUNREACH
        # the victim accepts only addresses of its own device
        assert p.ask(cmd='connect', gid=gid2.hex(), chan=ch.num) == \
            {'rc': errno.ENETUNREACH}
        assert stranger_ops(ch, buf, mr, info) == [dv.WC_LOC_QP_OP_ERR] * 4
        assert ch.connect(gid2, info['chan'], sgid_index=idx2) == 0
        assert stranger_ops(ch, buf, mr, info) == \
            [dv.WC_REM_INV_REQ_ERR] * 4
        assert dv.read(buf.addr, 4096) == b'\xee' * 4096
        ch.close()
    assert_untouched(p)


# --------------------------------------------------------------------------
# Bulk channels: how many
# --------------------------------------------------------------------------

def _set_param(name, value):
    with open(f'{PARAMS}/{name}', 'w') as f:
        f.write(str(value))


def test_max_chans_advertised(c):
    """max_chans is filled in only when asked for in comp_mask, and then
    equals the module parameter max_bulk_chans."""
    a = dv.DeviceAttr(comp_mask=0, max_chans=0xdeadbeef)
    assert dv.lib.bzcdv_query_device(c.p, ctypes.byref(a)) == 0
    assert (a.comp_mask, a.max_chans) == (0, 0xdeadbeef)
    a = c.query_device(comp_mask=dv.DEVICE_ATTR_MASK_MAX_CHANS)
    assert a.comp_mask == dv.DEVICE_ATTR_MASK_MAX_CHANS
    assert a.max_chans == int(h.read_file(f'{PARAMS}/max_bulk_chans'))
    assert a.max_chans >= 64


def test_chan_limit_enomem(c):
    """At max_chans channels on the device (all processes together) the
    next bzcdv_create_bulk_chan() fails with ENOMEM; destroying one makes
    room again."""
    path = f'{PARAMS}/max_bulk_chans'
    old = int(h.read_file(path))
    limit = 5
    made = []
    try:
        _set_param('max_bulk_chans', limit)
        a = c.query_device(comp_mask=dv.DEVICE_ATTR_MASK_MAX_CHANS)
        assert a.max_chans == limit
        cq = c.cq(64)
        for _ in range(limit):
            made.append(dv.Chan(c, c.pd, cq, depth=1))
        with pytest.raises(OSError) as e:
            dv.Chan(c, c.pd, cq, depth=1)
        assert e.value.errno == errno.ENOMEM
        # another context (or process) counts against the same device
        with dv.Ctx(h.DEV) as c2:
            with pytest.raises(OSError) as e:
                dv.Chan(c2, c2.pd, c2.cq(4), depth=1)
            assert e.value.errno == errno.ENOMEM
        made.pop().close()
        made.append(dv.Chan(c, c.pd, cq, depth=1))
    finally:
        for ch in made:
            ch.close()
        _set_param('max_bulk_chans', old)
    c.chan(depth=1)


# --------------------------------------------------------------------------
# The MR cache
# --------------------------------------------------------------------------

def test_cached_mr_reg_in_forked_child_eperm(c, cache_on):
    """A forked child holds the parent's uverbs fd and PD but not its
    memory: bzcdv_reg_mr_cached() on the parent's PD fails with EPERM and
    pins nothing."""
    n = 1 * MiB
    buf = c.buf(n)
    dv.zero(buf.addr, n, 1)
    s0 = c.cache_stats()
    pins0 = h.pinned_pages()
    pid = os.fork()
    if pid == 0:
        code = 255
        try:
            m = dv.lib.bzcdv_reg_mr_cached(c.pd, buf.addr, n, dv.ACCESS_ALL)
            code = 0 if m else ctypes.get_errno()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), status
    assert os.WEXITSTATUS(status) == errno.EPERM, \
        f'child got {os.strerror(os.WEXITSTATUS(status))}, not EPERM'
    s1 = c.cache_stats()
    assert (s1.misses, s1.pinned_bytes, s1.entries) == \
        (s0.misses, s0.pinned_bytes, s0.entries), (s0.as_dict(), s1.as_dict())
    assert h.pinned_pages() <= pins0, (pins0, h.pinned_pages())
    # the parent still registers
    assert c.cached(buf.addr, n).lkey


@pytest.mark.parametrize('backing', ['prot_none', 'noreserve_rw'])
def test_cached_mr_2tib_enomem(c, cache_on, backing):
    """2 TiB through the MR cache, over address space nothing backs: ENOMEM
    at once (more pages than one registration holds), no kernel warning,
    nothing pinned."""
    size = 2 * TiB
    addr = dv.reserve(size) if backing == 'prot_none' else dv.reserve_rw(size)
    try:
        pins0 = h.pinned_pages()
        with pytest.raises(OSError) as e:
            dv.CachedMr(c.pd, addr, size)
        assert e.value.errno == errno.ENOMEM, e.value
        assert h.pinned_pages() <= pins0
        assert c.cache_stats().pinned_bytes == 0
    finally:
        dv.munmap(addr, size)


def test_cached_mr_unmapped_efault(c, cache_on):
    """512 GiB of PROT_NONE address space: EFAULT, found before any page
    array is allocated or anything pinned."""
    size = 512 * GiB
    addr = dv.reserve(size)
    try:
        with pytest.raises(OSError) as e:
            dv.CachedMr(c.pd, addr, size)
        assert e.value.errno == errno.EFAULT, e.value
    finally:
        dv.munmap(addr, size)


@pytest.mark.parametrize('backing', ['prot_none', 'noreserve_rw'])
def test_reg_mr_2tib_einval(c, backing):
    """ibv_reg_mr of 2 TiB (above max_mr_size, 1 TiB): EINVAL before
    anything is pinned, whatever backs the range."""
    size = 2 * TiB
    addr = dv.reserve(size) if backing == 'prot_none' else dv.reserve_rw(size)
    try:
        pins0 = h.pinned_pages()
        with pytest.raises(OSError) as e:
            dv.Mr(c.pd, addr, size)
        assert e.value.errno == errno.EINVAL, e.value
        assert h.pinned_pages() <= pins0
    finally:
        dv.munmap(addr, size)


def test_reg_mr_unmapped_efault(c):
    """ibv_reg_mr of 512 GiB of PROT_NONE address space: EFAULT."""
    size = 512 * GiB
    addr = dv.reserve(size)
    try:
        with pytest.raises(OSError) as e:
            dv.Mr(c.pd, addr, size)
        assert e.value.errno == errno.EFAULT, e.value
    finally:
        dv.munmap(addr, size)


def test_over_memlock_enomem(bulk):
    """A process without CAP_IPC_LOCK and RLIMIT_MEMLOCK of 256 KiB: a
    cached MR within the limit works; over it (1 MiB, and 2 TiB of
    unbacked address space) both the cache and ibv_reg_mr fail with
    ENOMEM before allocating or pinning anything."""
    limit = 256 * KiB
    pins0 = h.pinned_pages()
    p = Peer('memlock', limit)
    try:
        got = p.read(120)
    finally:
        p.close()
    assert got == {'cached_within': 0, 'cached_over': errno.ENOMEM,
                   'cached_2tib': errno.ENOMEM, 'reg_over': errno.ENOMEM,
                   'pinned_bytes': limit // 2}, got
    assert h.wait_until(lambda: h.pinned_pages() <= pins0, timeout=30), \
        (pins0, h.pinned_pages())
