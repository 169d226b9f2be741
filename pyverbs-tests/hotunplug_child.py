# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Child process for test_hotunplug.py (not a test itself).

Opens the device (pyverbs Context + PD), prints READY, waits for
IBV_EVENT_DEVICE_FATAL on its async fd, tries more verbs (which must fail),
prints WAITING and waits for a line on stdin before closing everything.
Each observation is one line on stdout: KEY value...
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyverbs.enums as e                      # noqa: E402
from pyverbs.pd import PD                      # noqa: E402
from pyverbs.pyverbs_error import PyverbsError  # noqa: E402

import bzc_helpers as h                        # noqa: E402


def say(*a):
    print(*a, flush=True)


def main():
    name = sys.argv[1]
    fatal_timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    ctx, afd = h.open_pyverbs_context(name)
    pd = PD(ctx)
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

    say('WAITING')
    sys.stdin.readline()
    rc = 0
    for what, fn in (('CLOSE_PD', pd.close), ('CLOSE_CTX', ctx.close)):
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
