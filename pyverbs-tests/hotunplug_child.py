# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Child process for test_hotunplug.py (not a test itself).

Opens the device (pyverbs Context + PD), prints READY, waits for
IBV_EVENT_DEVICE_FATAL on its async fd, tries more verbs (which must fail),
prints WAITING and waits for a line on stdin before closing everything.
Each observation is one line on stdout: KEY value...

With a third argument "rings" it also creates a CQ, whose ring the provider
maps, and writes a pattern into the ring's last bytes (RING start length
before READY); after the removal it reports what that memory reads now
(RING_AFTER pattern|zero|other) and that writing there does not kill it
(RING_WRITE OK).
"""

import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyverbs.enums as e                      # noqa: E402
from pyverbs.cq import CQ                      # noqa: E402
from pyverbs.pd import PD                      # noqa: E402
from pyverbs.pyverbs_error import PyverbsError  # noqa: E402

import bzc_helpers as h                        # noqa: E402


RING_TAIL = 64


def say(*a):
    print(*a, flush=True)


def main():
    name = sys.argv[1]
    fatal_timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    rings = len(sys.argv) > 3 and sys.argv[3] == 'rings'
    ctx, afd = h.open_pyverbs_context(name)
    pd = PD(ctx)
    cq = None
    if rings:
        before = h.uverbs_maps()
        cq = CQ(ctx, 64)
        new = {a: n for a, n in h.uverbs_maps().items() if a not in before}
        if len(new) != 1:
            say('RING_MAPS', len(new))
            return 1
        (start, length), = new.items()
        tail = start + length - RING_TAIL
        pattern = os.urandom(RING_TAIL)
        ctypes.memmove(tail, pattern, RING_TAIL)
        say('RING', start, length)
    say('READY', pd.handle)

    deadline = time.monotonic() + fatal_timeout
    fatal = False
    while time.monotonic() < deadline:
        ev = h.pyverbs_async_event(ctx, afd, deadline - time.monotonic())
        if ev is None:
            break
        say('EVENT', ev)
        if ev == e.IBV_EVENT_DEVICE_FATAL:
            fatal = True
            break
    say('FATAL' if fatal else 'NO_FATAL')

    for what, fn in (('ALLOC_PD', lambda: PD(ctx)),
                     ('QUERY_PORT', lambda: ctx.query_port(1)),
                     ('QUERY_DEVICE', lambda: ctx.query_device())):
        try:
            fn()
            say(what, 'OK')
        except PyverbsError as ex:
            say(what, 'FAILED', getattr(ex, 'error_code', -1), str(ex)
                .replace('\n', ' '))

    if rings:
        now = ctypes.string_at(tail, RING_TAIL)
        say('RING_AFTER', 'pattern' if now == pattern else
            'zero' if now == bytes(RING_TAIL) else 'other')
        ctypes.memset(tail, 0x5a, RING_TAIL)
        say('RING_WRITE', 'OK')

    say('WAITING')
    sys.stdin.readline()
    rc = 0
    closing = [('CLOSE_CQ', cq.close)] if cq else []
    for what, fn in closing + [('CLOSE_PD', pd.close),
                               ('CLOSE_CTX', ctx.close)]:
        try:
            fn()
            say(what, 'OK')
        except PyverbsError as ex:
            say(what, 'FAILED', str(ex).replace('\n', ' '))
            rc = 1
    say('DONE')
    return rc


if __name__ == '__main__':
    sys.exit(main())
