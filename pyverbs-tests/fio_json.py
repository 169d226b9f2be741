# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""fio with JSON output: the one runner of the storage tests
(fio_verify.py) and benchmarks (tools/bench-nvmeof, tools/bench-nfs).

jobs() runs fio and returns its jobs by name; timed() runs the
benchmarks' single time-based job (direct I/O, libaio) on a file or a
block device. Both raise FioError, with fio's last line of output, when
fio fails or a job reports an error.
"""

import json
import subprocess

import bzc_helpers as h

# The options of every timed() job, besides its file, runtime and args.
TIMED = ('--ioengine=libaio', '--direct=1', '--time_based', '--ramp_time=1')


class FioError(RuntimeError):
    """fio exited non-zero, printed no JSON, or a job failed."""


def jobs(argv, timeout, env=None):
    """Run `fio --output-format=json ARGV...` in /tmp; {jobname: job}."""
    cp = subprocess.run(['fio', '--output-format=json', *argv], env=env,
                        cwd='/tmp', capture_output=True, text=True,
                        timeout=timeout)
    if cp.returncode:
        raise FioError(f'fio exit {cp.returncode}: '
                       f'{h.last_line(cp.stderr or cp.stdout)}')
    # fio may print warnings before the JSON.
    start = cp.stdout.find('{')
    if start < 0:
        raise FioError(f'fio printed no report: {h.last_line(cp.stdout)}')
    report = json.loads(cp.stdout[start:])
    out = {}
    for job in report['jobs']:
        if job.get('error'):
            raise FioError(f'fio job {job["jobname"]}: error '
                           f'{job["error"]}')
        out[job['jobname']] = job
    return out


def timed(filename, args, runtime):
    """One job of `runtime` seconds (plus 1 s of ramp) on `filename`
    with the fio options `args`; the job's report (its 'read' and
    'write' hold 'iops' and 'bw_bytes')."""
    argv = ['--name=bench', f'--filename={filename}', *TIMED,
            f'--runtime={runtime}', *args]
    return jobs(argv, timeout=runtime * 10 + 300)['bench']
