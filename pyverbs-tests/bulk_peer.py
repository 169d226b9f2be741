# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The other process of the bulk tests (test_bulk.py), run as
    /usr/bin/python3 bulk_peer.py MODE ARGS...
It talks JSON lines: one request per line on stdin, one answer per line on
stdout (errors as {"error": "..."}).

Modes:
  serve SIZE     a channel (with a receive CQ) and an MR of SIZE bytes;
                 prints {"chan", "gid", "addr", "rkey"}, then serves
                 requests: connect, fill, check, recv, pending, write_to,
                 exit.
  selftest SEED ITERS   two channels of its own, random transfers, each
                 checked; prints {"ok": n}.
  hold SIZE      posts a COPY and a WRITE of SIZE bytes, prints
                 {"posted": true} and sleeps (to be killed mid-transfer).
  memlock LIMIT  without CAP_IPC_LOCK and with RLIMIT_MEMLOCK LIMIT bytes,
                 tries registrations of several sizes; prints
                 {"case": errno or 0, ...}.
"""

import json
import random
import sys
import time

import bzcdv as dv

DEV = __import__('os').environ.get('BZC_DEV', 'bzc0')


def say(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.stdout.flush()


def check_region(addr, length, seed, start):
    """Whether [addr, addr+length) holds pattern(seed) tiled from start."""
    block = dv.pattern(seed)
    scratch = dv.Buffer(max(length, 1))
    try:
        dv.fill(scratch.addr, length, block, start)
        return dv.memcmp(addr, scratch.addr, length) == 0
    finally:
        scratch.close()


def serve(size):
    with dv.Ctx(DEV) as c:
        buf = c.buf(size)
        mr = c.mr(buf.addr, size)
        recv_cq = c.cq(256)
        ch = c.chan(c.cq(256), depth=16, recv_cq=recv_cq)
        say({'chan': ch.num, 'gid': c.loopback_gid()[1].hex(),
             'addr': buf.addr, 'rkey': mr.rkey, 'size': size})
        for line in sys.stdin:
            req = json.loads(line)
            try:
                cmd = req['cmd']
                if cmd == 'exit':
                    say({'ok': True})
                    return
                if cmd == 'connect':
                    # accept (and reach) the channel (gid, chan)
                    say({'rc': ch.connect(bytes.fromhex(req['gid']),
                                          req['chan'])})
                elif cmd == 'fill':
                    dv.fill(buf.addr + req['off'], req['len'],
                            dv.pattern(req['seed']), req.get('start', 0))
                    say({'ok': True})
                elif cmd == 'zero':
                    dv.zero(buf.addr + req['off'], req['len'],
                            req.get('byte', 0))
                    say({'ok': True})
                elif cmd == 'check':
                    say({'ok': check_region(buf.addr + req['off'], req['len'],
                                            req['seed'], req.get('start', 0))})
                elif cmd == 'peek':
                    say({'hex': dv.read(buf.addr + req['off'],
                                        req['len']).hex()})
                elif cmd == 'pending':
                    # what sits in the CQs now, without waiting
                    say({'recv': [dv.wc_str(w) for w in recv_cq.poll(16)],
                         'cq': [dv.wc_str(w) for w in ch.cq.poll(16)]})
                elif cmd == 'recv':
                    wcs = recv_cq.wait(req['n'], req.get('timeout', 60))
                    say({'wcs': [{'status': w.status, 'opcode': w.opcode,
                                  'byte_len': w.byte_len,
                                  'imm': dv.wc_imm(w), 'flags': w.wc_flags,
                                  'qp_num': w.qp_num, 'src_qp': w.src_qp}
                                 for w in wcs]})
                elif cmd == 'write_to':
                    # this process as the initiator, into the caller's MR
                    n = req['len']
                    dv.fill(buf.addr, n, dv.pattern(req['seed']))
                    wcs = ch.run([{'op': dv.BULK_WRITE,
                                   'sges': [(buf.addr, n, mr.lkey)],
                                   'raddr': req['raddr'], 'rkey': req['rkey'],
                                   'rchan': req['rchan']}])
                    say({'status': wcs[0].status,
                         'byte_len': wcs[0].byte_len})
                else:
                    say({'error': f'unknown cmd {cmd}'})
            except Exception as e:      # the test reports it
                say({'error': repr(e)})


def selftest(seed, iters):
    rnd = random.Random(seed)
    size = 8 << 20
    with dv.Ctx(DEV) as c:
        pd2 = c.alloc_pd()
        a, b = c.buf(size), c.buf(size)
        mra = c.mr(a.addr, size)
        mrb = c.mr(b.addr, size, pd=pd2)
        cha = c.chan(c.cq(64), depth=8)
        chb = c.chan(c.cq(64), depth=8, pd=pd2)
        dv.connect_pair(cha, chb)
        block = dv.pattern(seed)
        done = 0
        for i in range(iters):
            op = rnd.choice([dv.BULK_WRITE, dv.BULK_READ, dv.BULK_COPY])
            n = rnd.randint(1, size // 2)
            lo = rnd.randint(0, size - n)
            ro = rnd.randint(0, size - n)
            start = rnd.randint(0, len(block))
            if op == dv.BULK_READ:
                dv.fill(b.addr + ro, n, block, start)
                wr = {'op': op, 'sges': [(a.addr + lo, n, mra.lkey)],
                      'raddr': b.addr + ro, 'rkey': mrb.rkey,
                      'rchan': chb.num, 'wr_id': i}
                dst, src = a.addr + lo, b.addr + ro
            elif op == dv.BULK_WRITE:
                dv.fill(a.addr + lo, n, block, start)
                wr = {'op': op, 'sges': [(a.addr + lo, n, mra.lkey)],
                      'raddr': b.addr + ro, 'rkey': mrb.rkey,
                      'rchan': chb.num, 'wr_id': i}
                dst, src = b.addr + ro, a.addr + lo
            else:
                # within a: two non-overlapping halves
                n = rnd.randint(1, size // 4)
                lo = rnd.randint(0, size // 2 - n)
                ro = size // 2 + rnd.randint(0, size // 2 - n)
                dv.fill(a.addr + lo, n, block, start)
                wr = {'op': op, 'sges': [(a.addr + lo, n, mra.lkey)],
                      'raddr': a.addr + ro, 'rkey': mra.lkey, 'wr_id': i}
                dst, src = a.addr + ro, a.addr + lo
            wc = cha.run([wr])[0]
            if wc.status != dv.WC_SUCCESS or wc.wr_id != i or \
                    wc.byte_len != n or wc.opcode != dv.OP_WC[op]:
                raise AssertionError(f'iteration {i} op {op}: {dv.wc_str(wc)}')
            if dv.memcmp(dst, src, n):
                raise AssertionError(f'iteration {i} op {op}: data differs')
            done += 1
        say({'ok': done})


def hold(size):
    c = dv.Ctx(DEV)
    a, b = c.buf(size), c.buf(size)
    dv.zero(a.addr, size, 0x5a)
    mra, mrb = c.mr(a.addr, size), c.mr(b.addr, size)
    ch = c.chan(c.cq(64), depth=8)
    dv.connect_pair(ch, ch)             # it writes into itself
    rc, _ = ch.post([
        {'op': dv.BULK_COPY, 'sges': [(a.addr, size, mra.lkey)],
         'raddr': b.addr, 'rkey': mrb.lkey},
        {'op': dv.BULK_COPY, 'sges': [(b.addr, size, 0)],
         'raddr': a.addr, 'rkey': 0},
        {'op': dv.BULK_WRITE, 'sges': [(a.addr, size, mra.lkey)],
         'raddr': b.addr, 'rkey': mrb.rkey, 'rchan': ch.num}])
    say({'posted': rc == 0, 'rc': rc})
    while True:
        time.sleep(60)


def memlock(limit):
    """Registrations by a process that RLIMIT_MEMLOCK binds: each case's
    errno (0: it worked), with what the kernel pinned for it afterwards."""
    import errno
    import resource
    dv.drop_cap_ipc_lock()
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (limit, limit))
    out = {}
    with dv.Ctx(DEV) as c:
        small = c.buf(limit // 2)
        big = c.buf(limit * 4)
        tib2 = dv.reserve_rw(2 << 40)
        cases = {
            'cached_within': lambda: dv.CachedMr(c.pd, small.addr,
                                                 limit // 2),
            'cached_over': lambda: dv.CachedMr(c.pd, big.addr, limit * 4),
            'cached_2tib': lambda: dv.CachedMr(c.pd, tib2, 2 << 40),
            'reg_over': lambda: dv.Mr(c.pd, big.addr, limit * 4),
        }
        for name, make in cases.items():
            try:
                obj = make()
                obj.close()
                out[name] = 0
            except OSError as e:
                out[name] = e.errno or errno.EIO
        out['pinned_bytes'] = c.cache_stats().pinned_bytes
        dv.munmap(tib2, 2 << 40)
    say(out)


def main():
    mode = sys.argv[1]
    if mode == 'serve':
        serve(int(sys.argv[2]))
    elif mode == 'selftest':
        selftest(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == 'hold':
        hold(int(sys.argv[2]))
    elif mode == 'memlock':
        memlock(int(sys.argv[2]))
    else:
        raise SystemExit(f'unknown mode {mode}')


if __name__ == '__main__':
    main()
