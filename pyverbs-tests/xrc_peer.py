# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The other process of the two-process XRC tests (test_xrc.py), run as
    /usr/bin/python3 xrc_peer.py MODE PATH [ARGS...]
It opens the XRC domain of the file PATH (which the test's process opened
first) in a context of its own, and talks JSON lines: one request per line
on stdin, one answer per line on stdout (errors as {"error": "..."}).

Modes:
  srq PATH N     an XRC SRQ of that domain (its own PD, CQ and MR) with N
                 receives of SLOT bytes posted; prints {"srqn"}, then
                 serves {"op": "poll", "n": k} (k completions with their
                 data), {"op": "exit"}.
  open PATH QPN  ibv_open_qp() of the domain's XRC TGT QP QPN (pyverbs has
                 no binding: ctypes, through the verbs_context ops that
                 <infiniband/verbs.h>'s inline ibv_open_xrcd()/
                 ibv_open_qp() call); prints {"qp_num", "qp_type",
                 "state"} as ibv_query_qp() tells them, then serves
                 {"op": "close"} (ibv_destroy_qp() of its handle),
                 {"op": "exit"}.
"""

import ctypes
import json
import os
import sys
import time

DEV = os.environ.get('BZC_DEV', 'bzc0')
SLOT = 256


def say(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.stdout.flush()


def requests():
    for line in sys.stdin:
        yield json.loads(line)


def xrc_srq(ctx, pd, xrcd, cq, max_wr):
    """An XRC SRQ in `xrcd` completing to `cq` (test_xrc.py's too)."""
    import pyverbs.enums as e
    from pyverbs.srq import SRQ, SrqInitAttrEx

    attr = SrqInitAttrEx(max_wr=max_wr)
    attr.srq_type = e.IBV_SRQT_XRC
    attr.pd = pd
    attr.xrcd = xrcd
    attr.cq = cq
    attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                      e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_XRCD)
    return SRQ(ctx, attr)


def serve_srq(path, n):
    import pyverbs.device as d
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.wr import SGE, RecvWR
    from pyverbs.xrcd import XRCD, XRCDInitAttr

    ctx = d.Context(name=DEV)
    fd = os.open(path, os.O_RDONLY)
    xrcd = XRCD(ctx, XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD |
                                  e.IBV_XRCD_INIT_ATTR_OFLAGS, 0, fd))
    pd = PD(ctx)
    cq = CQ(ctx, 64, None, None, 0)
    mr = MR(pd, SLOT * n, e.IBV_ACCESS_LOCAL_WRITE)
    srq = xrc_srq(ctx, pd, xrcd, cq, n)
    for i in range(n):
        srq.post_recv(RecvWR(wr_id=i, num_sge=1,
                             sg=[SGE(mr.buf + i * SLOT, SLOT, mr.lkey)]))
    say({'srqn': srq.get_srq_num()})
    for req in requests():
        if req['op'] == 'exit':
            break
        if req['op'] != 'poll':
            say({'error': f'unknown request {req}'})
            continue
        wcs, deadline = [], time.monotonic() + 30
        while len(wcs) < req['n'] and time.monotonic() < deadline:
            k, got = cq.poll(req['n'] - len(wcs))
            wcs.extend(got)
            if not k:
                time.sleep(0.001)
        say({'wcs': [{'wr_id': w.wr_id, 'status': w.status,
                      'byte_len': w.byte_len, 'qp_num': w.qp_num,
                      'src_qp': w.src_qp,
                      'data': mr.read(w.byte_len, w.wr_id * SLOT).hex()}
                     for w in wcs]})
    srq.close()
    mr.close()
    cq.close()
    pd.close()
    xrcd.close()
    os.close(fd)
    ctx.close()
    say({'exit': 0})


# <infiniband/verbs.h>: the verbs_context ops sit just before the struct
# ibv_context they extend ("grows up"), at these offsets from it; the
# public structures ibv_xrcd_init_attr and ibv_qp_open_attr.
OFF_OPEN_QP = -64
OFF_OPEN_XRCD = -32
OFF_CLOSE_XRCD = -24
IBV_XRCD_INIT_ATTR_FD = 1
IBV_XRCD_INIT_ATTR_OFLAGS = 2
IBV_QP_OPEN_ATTR_NUM = 1
IBV_QP_OPEN_ATTR_XRCD = 2
IBV_QP_OPEN_ATTR_TYPE = 8
IBV_QPT_XRC_RECV = 10
IBV_QP_STATE = 1


class XrcdInitAttr(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint32), ('fd', ctypes.c_int),
                ('oflags', ctypes.c_int)]


class QpOpenAttr(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint32), ('qp_num', ctypes.c_uint32),
                ('xrcd', ctypes.c_void_p), ('qp_context', ctypes.c_void_p),
                ('qp_type', ctypes.c_int)]


assert ctypes.sizeof(QpOpenAttr) == 32 and QpOpenAttr.qp_type.offset == 24


def op(ctx_addr, off, restype, *argtypes):
    fn = ctypes.c_void_p.from_address(ctx_addr + off).value
    if not fn:
        raise OSError(95, 'op not implemented')
    return ctypes.CFUNCTYPE(restype, *argtypes, use_errno=True)(fn)


def serve_open(path, qpn):
    from verbs_ctypes import RawContext

    lib = ctypes.CDLL('libibverbs.so.1', use_errno=True)
    lib.ibv_query_qp.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int, ctypes.c_void_p]
    lib.ibv_destroy_qp.argtypes = [ctypes.c_void_p]
    raw = RawContext(DEV)
    ctx = ctypes.addressof(raw.ctx.contents)
    fd = os.open(path, os.O_RDONLY)
    open_xrcd = op(ctx, OFF_OPEN_XRCD, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.POINTER(XrcdInitAttr))
    close_xrcd = op(ctx, OFF_CLOSE_XRCD, ctypes.c_int, ctypes.c_void_p)
    open_qp = op(ctx, OFF_OPEN_QP, ctypes.c_void_p, ctypes.c_void_p,
                 ctypes.POINTER(QpOpenAttr))
    xrcd = open_xrcd(ctx, XrcdInitAttr(IBV_XRCD_INIT_ATTR_FD |
                                       IBV_XRCD_INIT_ATTR_OFLAGS, fd, 0))
    if not xrcd:
        say({'error': f'ibv_open_xrcd: errno {ctypes.get_errno()}'})
        return
    qp = open_qp(ctx, QpOpenAttr(IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
                                 IBV_QP_OPEN_ATTR_TYPE, qpn, xrcd, None,
                                 IBV_QPT_XRC_RECV))
    if not qp:
        say({'error': f'ibv_open_qp: errno {ctypes.get_errno()}'})
        return
    attr = ctypes.create_string_buffer(256)     # struct ibv_qp_attr
    init = ctypes.create_string_buffer(128)     # struct ibv_qp_init_attr
    ret = lib.ibv_query_qp(qp, attr, IBV_QP_STATE, init)
    say({'query': ret,
         'qp_num': ctypes.c_uint32.from_address(qp + 52).value,
         'qp_type': ctypes.c_int.from_address(qp + 60).value,
         'state': ctypes.c_int.from_buffer(attr, 0).value})
    for req in requests():
        if req['op'] == 'close' and qp:
            say({'closed': lib.ibv_destroy_qp(qp)})
            qp = None
        elif req['op'] == 'exit':
            break
        else:
            say({'error': f'unknown request {req}'})
    if qp:
        lib.ibv_destroy_qp(qp)
    close_xrcd(xrcd)
    os.close(fd)
    raw.close()
    say({'exit': 0})


if __name__ == '__main__':
    mode, path = sys.argv[1], sys.argv[2]
    try:
        if mode == 'srq':
            serve_srq(path, int(sys.argv[3]))
        elif mode == 'open':
            serve_open(path, int(sys.argv[3]))
        else:
            say({'error': f'unknown mode {mode}'})
    except Exception as ex:     # the test reads it from the answer
        say({'error': f'{type(ex).__name__}: {ex}'})
