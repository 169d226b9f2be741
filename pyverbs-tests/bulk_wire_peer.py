# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The far side of the bulk-over-the-wire tests (test_bulk_wire.py): a plain
RC QP and an MR, with pyverbs only (nothing bzc-specific), on the peer
machine of a two-machine run, so the device may be rxe or bzc.

    /usr/bin/python3 bulk_wire_peer.py DEV GID_INDEX PORT SIZE

It listens on TCP PORT (all addresses) for one connection and talks JSON
lines, one request and one answer each (errors as {"error": "..."}):

  {"op": "info"}                           -> {"qpn", "gid", "psn", "addr",
        "rkey", "size"}: its QP (in RESET) and MR
  {"op": "connect", "qpn", "gid", "psn", "mtu"} -> {}: its QP brought to
        RTS addressed at the caller's, one receive posted (for a
        WRITE_WITH_IMM)
  {"op": "fill", "seed", "off", "len"}    -> {}: the MR's range filled with
        pattern(seed), the same bytes as bzcdv.pattern() tiled
  {"op": "sha", "off", "len"}              -> {"sha": hex}: SHA-256 of the
        MR's range
  {"op": "recv", "timeout"}                -> {"wcs": [...]}: the receive
        completions polled within timeout s (each status, opcode,
        byte_len, imm, flags)
  {"op": "state"}                          -> {"state": n}
  {"op": "exit"}                           -> {}, then it exits
"""

import hashlib
import json
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bzc_helpers as h  # noqa: E402  (qp_to_* only: pyverbs, no bzcdv)

from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.addr import GID  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QP, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import RecvWR, SGE  # noqa: E402
import pyverbs.enums as e  # noqa: E402

CHUNK = 16 << 20
PATTERN_LEN = (1 << 20) + 4099      # bzcdv.pattern()'s default length


def pattern(seed, length=PATTERN_LEN):
    return random.Random(seed).randbytes(length)


class Side:
    def __init__(self, dev, gidx, size):
        self.ctx = Context(name=dev)
        self.gidx = gidx
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)
        self.size = size
        self.mr = MR(self.pd, size, e.IBV_ACCESS_LOCAL_WRITE |
                     e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
        cap = QPCap(max_send_wr=4, max_recv_wr=8, max_send_sge=1,
                    max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq,
                                         rcq=self.cq, cap=cap))
        self.recv_buf = MR(self.pd, 64, e.IBV_ACCESS_LOCAL_WRITE)

    PSN = 0x1234

    def info(self, req):
        return {'qpn': self.qp.qp_num,
                'gid': str(self.ctx.query_gid(1, self.gidx)),
                'psn': self.PSN, 'addr': self.mr.buf, 'rkey': self.mr.rkey,
                'size': self.size}

    def connect(self, req):
        h.qp_to_init(self.qp, e.IBV_QPT_RC)
        h.qp_to_rtr(self.qp, e.IBV_QPT_RC, GID(req['gid']), self.gidx,
                    req['qpn'], rq_psn=req['psn'],
                    path_mtu=req.get('mtu', e.IBV_MTU_4096))
        h.qp_to_rts(self.qp, e.IBV_QPT_RC, sq_psn=self.PSN)
        sge = SGE(self.recv_buf.buf, 64, self.recv_buf.lkey)
        self.qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[sge]))
        return {}

    def fill(self, req):
        block = pattern(req['seed'])
        off, end = req['off'], req['off'] + req['len']
        pos = off
        while pos < end:
            # Tiled from the range's start, as bzcdv.fill() does.
            at = (pos - off) % len(block)
            n = min(end - pos, len(block) - at)
            self.mr.write(block[at:at + n], n, pos)
            pos += n
        return {}

    def sha(self, req):
        d = hashlib.sha256()
        pos, end = req['off'], req['off'] + req['len']
        while pos < end:
            n = min(CHUNK, end - pos)
            d.update(self.mr.read(n, pos))
            pos += n
        return {'sha': d.hexdigest()}

    def recv(self, req):
        wcs = []
        end = time.monotonic() + req.get('timeout', 10)
        while time.monotonic() < end:
            n, got = self.cq.poll(8)
            for wc in got[:n]:
                wcs.append({'status': wc.status, 'opcode': wc.opcode,
                            'byte_len': wc.byte_len,
                            'imm': socket.ntohl(wc.imm_data),
                            'flags': wc.wc_flags, 'wr_id': wc.wr_id})
            if wcs and req.get('first', True):
                break
            time.sleep(0.01)
        return {'wcs': wcs}

    def state(self, req):
        attr, _ = self.qp.query(e.IBV_QP_STATE)
        return {'state': attr.qp_state}


def main():
    dev, gidx, port, size = (sys.argv[1], int(sys.argv[2]),
                             int(sys.argv[3]), int(sys.argv[4]))
    side = Side(dev, gidx, size)
    srv = socket.create_server(('0.0.0.0', port))
    srv.settimeout(300)
    conn, _ = srv.accept()
    conn.settimeout(None)
    rfile, wfile = conn.makefile('r'), conn.makefile('w')
    for line in rfile:
        req = json.loads(line)
        op = req.get('op')
        if op == 'exit':
            wfile.write('{}\n')
            wfile.flush()
            break
        try:
            ans = getattr(side, op)(req)
        except Exception as ex:     # reported to the test, which fails
            ans = {'error': f'{op}: {type(ex).__name__}: {ex}'}
        wfile.write(json.dumps(ans) + '\n')
        wfile.flush()
    conn.close()


if __name__ == '__main__':
    main()
