# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The process of test_memcg.py that creates objects with big rings.

Usage: memcg_child.py DEV qp|cq COUNT.  Creates up to COUNT QPs (16384
send and receive WRs of 32 SGEs: 32 MiB of rings each) or CQs (65535
entries: 2 MiB each) on one PD, stopping at the first failure, and prints
one JSON line: {"created": n, "errno": e or null}.
"""

import json
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr


def main():
    dev, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
