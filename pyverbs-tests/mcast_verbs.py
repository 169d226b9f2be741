# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""ibv_attach_mcast()/ibv_detach_mcast() for pyverbs QPs, and multicast
GIDs as text and bytes; test_mcast.py and mcast_wire_peer.py use them.

pyverbs 44 has no attach/detach, so these call libibverbs' own through
ctypes on the struct ibv_qp behind the pyverbs QP (found in the QP object
and checked by its qp_num, qp_type and state, read through /proc/self/mem
so that a wrong guess cannot crash the caller).
"""

import ctypes
import ipaddress
import struct

_ibv = ctypes.CDLL('libibverbs.so.1', use_errno=True)
for _fn in (_ibv.ibv_attach_mcast, _ibv.ibv_detach_mcast):
    _fn.restype = ctypes.c_int
    _fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint16]


def _peek(addr, n):
    """n bytes at addr of this process, or None where nothing is mapped."""
    try:
        with open('/proc/self/mem', 'rb', buffering=0) as f:
            f.seek(addr)
            return f.read(n)
    except (OSError, ValueError, OverflowError):
        return None


def ibv_qp_ptr(qp):
    """The struct ibv_qp * of a pyverbs QP: the one pointer in the object
    that points at {..., handle, qp_num, state, qp_type} with this QP's
    number and type (rdma-core 44 layout: qp_num at 52, qp_type at 60)."""
    raw = ctypes.string_at(id(qp), type(qp).__basicsize__)
    found = set()
    for off in range(0, len(raw) - 7, 8):
        ptr = struct.unpack_from('<Q', raw, off)[0]
        if ptr < 4096:
            continue
        mem = _peek(ptr, 64)
        if mem is None or len(mem) < 64:
            continue
        qp_num, state, qp_type = struct.unpack_from('<III', mem, 52)
        if qp_num == qp.qp_num and qp_type == qp.qp_type and state <= 6:
            found.add(ptr)
    assert len(found) == 1, \
        f'QP {qp.qp_num}: {len(found)} candidate struct ibv_qp pointers'
    return found.pop()


def mgid_raw(text):
    return ipaddress.IPv6Address(text).packed


def mgid_text(text):
    """text as pyverbs' GID takes it: eight groups of four hex digits
    (ipaddress's exploded form keeps an IPv4-mapped address's dotted tail
    from Python 3.13 on)."""
    return mgid_raw(text).hex(':', 2)


def attach(qp, gid):
    """ibv_attach_mcast(qp, gid, 0): 0 or an errno value."""
    return _ibv.ibv_attach_mcast(ibv_qp_ptr(qp), mgid_raw(gid), 0)


def detach(qp, gid):
    """ibv_detach_mcast(qp, gid, 0): 0 or an errno value."""
    return _ibv.ibv_detach_mcast(ibv_qp_ptr(qp), mgid_raw(gid), 0)
