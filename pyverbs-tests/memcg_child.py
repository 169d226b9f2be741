# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The process of test_memcg.py that creates objects with big rings.

Usage: memcg_child.py DEV qp|cq COUNT.  Creates up to COUNT QPs (16384
send and receive WRs of 32 SGEs: 32 MiB of rings each) or CQs (65535
entries: 2 MiB each) on one PD, stopping at the first failure, and prints
one JSON line: {"created": n, "errno": e or null}.

Inside a full memory cgroup, a page fault of the process itself ends in
the OOM killer, while the kernel's ring allocations fail with ENOMEM,
which is what the test wants to see. So the process takes every page it
will need before it starts: test_memcg.py runs it with PYTHONMALLOC=
malloc, and it grows and touches glibc's heap first and keeps it
(M_TRIM_THRESHOLD, M_MMAP_THRESHOLD), so neither Python nor the provider
faults in a new page inside the loop.
"""

import ctypes
import json
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_RESERVE = 16 << 20


def reserve_heap():
    """Fault in HEAP_RESERVE bytes of heap and keep them for later
    allocations (mallocs below 32 MiB come from the heap, which is never
    trimmed)."""
    libc = ctypes.CDLL(None)
    libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    libc.malloc.restype = ctypes.c_void_p
    p = libc.malloc(HEAP_RESERVE)
    if not p:
        sys.exit('memcg_child: cannot reserve the heap')
    ctypes.memset(p, 1, HEAP_RESERVE)
    libc.free(ctypes.c_void_p(p))


def main():
    dev, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reserve_heap()
    ctx = d.Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    objs = []
    err = None
    for _ in range(count):
        try:
            if kind == 'qp':
                objs.append(QP(pd, QPInitAttr(
                    qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                    cap=QPCap(16384, 16384, 32, 32))))
            else:
                objs.append(CQ(ctx, 65535))
        except PyverbsRDMAError as ex:
            err = ex.error_code
            break
    print(json.dumps({'created': len(objs), 'errno': err}), flush=True)
    for o in objs:
        o.close()
    cq.close()
    pd.close()
    ctx.close()


if __name__ == '__main__':
    main()
