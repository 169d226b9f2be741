# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The provider says why it refuses a call, through libibverbs' log:
VERBS_LOG_LEVEL (1 errors: the control path, 4 debug: also refused work
requests) and VERBS_LOG_FILE, read when libibverbs starts, so each case
runs in a fresh interpreter."""

import os
import subprocess
import sys
import textwrap

import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

HERE = os.path.dirname(os.path.abspath(__file__))

# The refusals: each prints "<errno>" of the refused call on stdout.
SCRIPT = textwrap.dedent('''
    import sys
    sys.path.insert(0, {here!r})
    import pyverbs.device as d
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.pyverbs_error import PyverbsRDMAError
    from pyverbs.qp import QPCap, QPEx, QPInitAttrEx
    import bzc_helpers as h

    ctx = d.Context(name=h.DEV)
    pd = PD(ctx)
    case = sys.argv[1]
    if case == 'create_flags':
        cq = CQ(ctx, 16)
        attr = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                            cap=QPCap(), pd=pd, create_flags=1 << 3,
                            comp_mask=e.IBV_QP_INIT_ATTR_PD |
                            e.IBV_QP_INIT_ATTR_CREATE_FLAGS)
        try:
            QPEx(ctx, attr)
            print(0)
        except PyverbsRDMAError as err:
            print(err.error_code)
    elif case == 'post_send':
        end = h.QPEnd(ctx, pd, e.IBV_QPT_UD)
        h.bring_up_qp(end.qp, e.IBV_QPT_UD, None, 0, 0)
        mr = MR(pd, 64, 0)
        wr = h.send_wr(0x5eed, e.IBV_WR_RDMA_WRITE, [h.sge(mr, 0, 8)])
        try:
            end.qp.post_send(wr)
            print(0)
        except PyverbsRDMAError as err:
            print(err.error_code)
''')


def refuse(case, level, tmp_path):
    log = tmp_path / 'verbs.log'
    env = dict(os.environ, VERBS_LOG_FILE=str(log))
    env.pop('VERBS_LOG_LEVEL', None)
    if level is not None:
        env['VERBS_LOG_LEVEL'] = str(level)
    res = subprocess.run([sys.executable, '-c', SCRIPT.format(here=HERE),
                          case], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    text = log.read_text() if log.exists() else ''
    assert res.stdout.split(), f'no errno printed: {res.stderr}'
    return int(res.stdout.split()[-1]), text


def test_create_qp_ex_flags_logged(tmp_path):
    """ibv_create_qp_ex with a create flag bzc lacks: EOPNOTSUPP, and at
    level 1 the log line names the device, the function and the flag."""
    rc, text = refuse('create_flags', 1, tmp_path)
    assert rc == 95, f'create_qp_ex: errno {rc} (EOPNOTSUPP expected)'
    lines = [ln for ln in text.splitlines() if 'create_flags' in ln]
    assert lines, f'no log line names the flag:\n{text}'
    assert lines[0].startswith(f'{h.DEV}: bzc_create_qp_ex:'), lines[0]
    assert 'unsupported create_flags 0x8' in lines[0], lines[0]


def test_refused_work_request_logged_at_debug(tmp_path):
    """An RDMA WRITE on a UD QP: EINVAL; level 4 says which WR and why,
    level 1 (errors only) says nothing about it."""
    rc, text = refuse('post_send', 4, tmp_path)
    assert rc == 22, f'post_send: errno {rc} (EINVAL expected); log:\n{text}'
    assert 'work request 0x5eed refused (Invalid argument): opcode not ' \
        'supported on this QP type' in text, text
    (tmp_path / 'quiet').mkdir()
    rc, text = refuse('post_send', 1, tmp_path / 'quiet')
    assert rc == 22
    assert 'refused' not in text, text


def test_nothing_logged_by_default(tmp_path):
    """Without VERBS_LOG_LEVEL libibverbs writes no log at all."""
    rc, text = refuse('create_flags', None, tmp_path)
    assert rc == 95
    assert not (tmp_path / 'verbs.log').exists(), text
