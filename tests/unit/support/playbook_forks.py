# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Many ansible-playbook runs from one Python that imported ansible-core once: each run is a fork of it.

A table of playbook runs (tests/unit/playbooks/test_validate_inventory.py) pays ansible-core's start (the Python,
its imports, the config read) once instead of once a row: about half of a short run's CPU. Each run is still a process
of its own, forked before anything ran, so no state passes from one run to the next; what differs from running
ansible-playbook is only that the imports happened earlier, in the same environment.

    rcs = run_playbooks([{'argv': [...], 'cwd': DIR, 'stdout': PATH, 'stderr': PATH}, ...], env, parallel=2)

ENV is every run's environment (ansible-core reads its configuration from it when imported, so it cannot differ
between runs); each run's argv is ansible-playbook's, argv[0] included.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import traceback


def run_playbooks(runs, env, parallel=2, python=None, timeout=1800):
    """Run each of RUNS (argv, cwd, stdout, stderr paths), PARALLEL at a time, in forks of one Python (PYTHON, else
    this one) that imported ansible-core with ENV; returns their exit codes in order."""
    if not runs:
        return []
    served = subprocess.run([python or sys.executable, os.path.abspath(__file__)], env=env,
                            input=json.dumps({'runs': runs, 'parallel': parallel}), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=timeout)
    if served.returncode != 0:
        raise RuntimeError('the playbook fork server failed (rc %d): %s' % (served.returncode, served.stderr[-4000:]))
    return json.loads(served.stdout)['rcs']


def _child(run, main):
    """In the fork: run ansible-playbook's main with the run's argv, cwd and output files; never returns."""
    code = 1
    try:
        os.chdir(run['cwd'])
        for path, fd in ((run['stdout'], 1), (run['stderr'], 2)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = list(run['argv'])
        main(list(run['argv']))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: B902  # whatever happens, the fork must end here and say why
        traceback.print_exc()
        code = 250
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# What a run imports besides ansible.cli.playbook (found with sys.modules after a run): imported once here too. Plugins
# that ansible-core's loader names after their path are imported by it again in each run; these it finds imported.
PRELOAD = ('ansible.executor.task_executor', 'ansible.executor.process.worker', 'ansible.playbook.handler',
           'ansible.playbook.handler_task_include', 'ansible.playbook.included_file', 'ansible.playbook.role_include',
           'ansible.playbook.task_include', 'ansible.parsing.ajson', 'ansible.parsing.yaml.dumper',
           'ansible.utils.encrypt', 'ansible.utils.hashing', 'ansible.utils.shlex', 'ansible.utils.unicode',
           'ansible.module_utils.connection', 'ansible.plugins.strategy.linear', 'ansible.plugins.callback.default',
           'ansible.plugins.callback.minimal', 'ansible.plugins.connection.local', 'ansible.plugins.connection.ssh',
           'ansible.plugins.inventory.auto', 'ansible.plugins.inventory.host_list', 'ansible.plugins.inventory.ini',
           'ansible.plugins.inventory.script', 'ansible.plugins.inventory.toml', 'ansible.plugins.inventory.yaml',
           'ansible.plugins.vars.host_group_vars', 'ansible.plugins.shell.sh', 'ansible.plugins.become.sudo',
           'ansible.plugins.cache.memory', 'jinja2.meta', 'multiprocessing.popen_fork', 'multiprocessing.synchronize')


def _serve():
    request = json.load(sys.stdin)
    # Imported once here, before any fork: this is the whole point.
    from ansible.cli.playbook import main  # pylint: disable=import-outside-toplevel
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:  # another ansible-core: that run imports what it needs itself
            pass
    runs, parallel = request['runs'], max(1, int(request['parallel']))
    rcs, running, queued = [None] * len(runs), {}, list(range(len(runs)))
    while queued or running:
        while queued and len(running) < parallel:
            index = queued.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(runs[index], main)
            running[pid] = index
        pid, status = os.wait()
        rcs[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    sys.stdout.write(json.dumps({'rcs': rcs}))
    return 0


if __name__ == '__main__':
    sys.exit(_serve())
