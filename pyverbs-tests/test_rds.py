# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""RDS over RDMA on bzc0: the kernel's Reliable Datagram Sockets with
their InfiniBand transport (rds_rdma) as a kernel consumer of bzc0.

Two RDS sockets on $BZC_IPV4 (ports 4000 and 4001) in this process: RDS
carries traffic between two sockets of one address over an RC
connection to itself through rdma_cm (an active and a passive QP on
bzc0), since SO_RDS_TRANSPORT asks for the IB transport and not the
loopback one. The tests check:

- datagrams of 1 byte to 1 MiB (RDS's largest) both ways, and 200 small
  ones in order, byte for byte, carried by bzc0;
- RDS's zero-copy RDMA: the receiver maps a buffer with an
  RDS_CMSG_RDMA_MAP message (rds_rdma fast-registers it on the
  connection's QP with a zero-based address: REG_MR of an MR whose iova
  is 0), the sender moves data with RDS_CMSG_RDMA_ARGS (an RDMA WRITE
  or READ through that rkey, then the message) and gets an
  RDS_CMSG_RDMA_STATUS notification; the bytes land exactly in the
  mapped range (the ones before it untouched).

(The RDS_GET_MR and RDS_GET_MR_FOR_DEST socket options cannot be used:
rds_rdma registers through a connection's QP and those options pass it
none, so they fail with EOPNOTSUPP on every fast-registering device,
rxe0 included.)

Afterwards the sockets are closed, rds_rdma and rds unloaded, bzc0's
kernel resources back to where they were and the kernel log clean.
Skips name the missing kernel module.
"""

import ctypes
import mmap
import os
import socket
import struct

import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

# <linux/rds.h>
SOL_RDS = 276
SO_RDS_TRANSPORT = 8
RDS_TRANS_IB = 0
RDS_CMSG_RDMA_ARGS = 1
RDS_CMSG_RDMA_MAP = 3
RDS_CMSG_RDMA_STATUS = 4
RDS_RDMA_READWRITE = 0x0001
RDS_RDMA_USE_ONCE = 0x0008
RDS_RDMA_NOTIFY_ME = 0x0020
RDS_RDMA_SUCCESS = 0
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
RDS_MAX_MSG = 1 << 20
MODULES = ('rds_rdma',)
TIMEOUT = 60


def _socket(port):
    s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    s.setsockopt(SOL_RDS, SO_RDS_TRANSPORT, RDS_TRANS_IB)
    # Room for a 1 MiB datagram (the default buffer takes about 200 KiB).
    s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 16 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
    s.bind((h.IPV4, port))
    s.settimeout(TIMEOUT)
    return s


@pytest.fixture(scope='module')
def pair():
    """Two RDS sockets on bzc0's address, forced onto the IB transport."""
    loaded = [m for m in ('rds', 'rds_rdma')
              if not os.path.isdir(f'/sys/module/{m}')]
    # Before rds_rdma attaches to bzc0 (its PD and listeners).
    res0 = h.rdma_res_summary()
    missing = h.load_modules(MODULES)
    if missing:
        pytest.skip(f'kernel module {missing[0]} cannot be loaded: '
                    f'{missing[1]}')
    klog = h.KmsgReader()
    socks = []
    try:
        socks = [_socket(4000), _socket(4001)]
        yield socks
    finally:
        for s in socks:
            s.close()
        # rds_rdma's connections, MR pools and PD on bzc0 go with it.
        errors = h.unload_and_check(loaded, res0, klog)
        assert not errors, errors


def _send_recv(src, dst, data):
    src.sendto(data, dst.getsockname())
    got, frm = dst.recvfrom(RDS_MAX_MSG + 1)
    assert frm == src.getsockname()
    return got


def _sent_bytes(fn):
    before = h.hw_counters()
    fn()
    after = h.hw_counters()
    return after['sent_bytes'] - before['sent_bytes']


def test_ib_transport(pair):
    """Both sockets are on the IB transport."""
    for s in pair:
        assert s.getsockopt(SOL_RDS, SO_RDS_TRANSPORT) == RDS_TRANS_IB


@pytest.mark.parametrize('size', (1, 4096, 8192, 65536, 300000, RDS_MAX_MSG))
def test_datagram(pair, size):
    """A datagram of `size` bytes arrives intact both ways, over bzc0."""
    a, b = pair
    data = os.urandom(size)
    back = os.urandom(size)

    def both():
        assert _send_recv(a, b, data) == data
        assert _send_recv(b, a, back) == back
    assert _sent_bytes(both) >= 2 * size


def test_many_in_order(pair):
    """200 datagrams sent back to back arrive complete and in order."""
    a, b = pair
    msgs = [struct.pack('=I', i) * (1 + i % 64) for i in range(200)]
    for m in msgs:
        a.sendto(m, b.getsockname())
    for m in msgs:
        got, _ = b.recvfrom(RDS_MAX_MSG)
        assert got == m


def _addr(buf):
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _map(owner, peer, buf, offset, length):
    """`owner` maps `length` bytes of `buf` from `offset` for RDMA by
    `peer` (an RDS_CMSG_RDMA_MAP message to it); returns the cookie."""
    cookie = ctypes.c_uint64(0)
    args = struct.pack('=QQQQ', _addr(buf) + offset, length,
                       ctypes.addressof(cookie),
                       RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE)
    owner.sendmsg([b'map'], [(SOL_RDS, RDS_CMSG_RDMA_MAP, args)], 0,
                  peer.getsockname())
    got, _ = peer.recvfrom(16)
    assert got == b'map'
    assert cookie.value, 'no cookie'
    return cookie.value


def _rdma(src, dst, cookie, buf, length, write, token):
    """`src` moves `length` bytes between `buf` and `dst`'s mapped range
    (an RDMA WRITE if `write`, else a READ), then a message; returns the
    notification's (token, status)."""
    iov = ctypes.create_string_buffer(struct.pack('=QQ', _addr(buf), length))
    flags = RDS_RDMA_NOTIFY_ME | (RDS_RDMA_READWRITE if write else 0)
    args = struct.pack('=QQQQQQQ', cookie, 0, length, ctypes.addressof(iov),
                       1, flags, token)
    src.sendmsg([b'done'], [(SOL_RDS, RDS_CMSG_RDMA_ARGS, args)], 0,
                dst.getsockname())
    got, _ = dst.recvfrom(16)
    assert got == b'done'
    _, anc, _, _ = src.recvmsg(16, 1024)
    notes = [struct.unpack('=Qi', d[:12]) for lvl, typ, d in anc
             if (lvl, typ) == (SOL_RDS, RDS_CMSG_RDMA_STATUS)]
    assert len(notes) == 1, anc
    return notes[0]


@pytest.mark.parametrize('length,offset', ((4096, 0), (65536, 100),
                                           (300000, 4000), (RDS_MAX_MSG, 0)))
def test_rdma_write(pair, length, offset):
    """An RDMA WRITE through the receiver's fast-registered, zero-based
    MR puts the bytes exactly into the mapped range."""
    a, b = pair
    target = mmap.mmap(-1, offset + length + 4096)
    target[:] = b'\x5a' * len(target)
    source = mmap.mmap(-1, length)
    data = os.urandom(length)
    source[:] = data
    cookie = _map(b, a, target, offset, length)
    token = 0x1000 + length
    assert _rdma(a, b, cookie, source, length, True, token) == \
        (token, RDS_RDMA_SUCCESS)
    assert target[offset:offset + length] == data
    assert target[:offset] == b'\x5a' * offset
    assert target[offset + length:] == b'\x5a' * (len(target) - offset -
                                                  length)


@pytest.mark.parametrize('length', (8192, 200000))
def test_rdma_read(pair, length):
    """An RDMA READ from the peer's mapped range brings its bytes."""
    a, b = pair
    remote = mmap.mmap(-1, length)
    data = os.urandom(length)
    remote[:] = data
    local = mmap.mmap(-1, length)
    cookie = _map(b, a, remote, 0, length)
    assert _rdma(a, b, cookie, local, length, False, 77) == \
        (77, RDS_RDMA_SUCCESS)
    assert local[:] == data
