# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what a topology_facts run executes above ping, counted in CPU instructions, part by part.

Wall-time ratios on this shared machine move by as much as issue 13's 1.1x target (docs/benchmarks/per_host_tasks.md);
instruction counts do not: the same module run counts the same instructions to within 0.05%. This script writes
variants of topology_facts into a scratch copy of the collection (never into the checkout), has Ansible build the
module payloads (AnsiballZ) for them and for ansible.builtin.ping on the simulated hosts, and runs each payload once
under valgrind's cachegrind, counting the instructions it executes:
  - ping: the floor every module task pays (Python, AnsiballZ, ansible-core's module_utils, compiled from source);
  - bare: a module of this collection with topology_facts' documentation and argument spec that only returns;
  - import <name>: bare plus one import (each of topology_facts' module_utils, and pynvml, the simulator here);
  - all imports: bare plus every import topology_facts makes;
  - gather, small return: all that, gathering the whole fact and returning only its size;
  - topology_facts itself;
  - ping and topology_facts again, with zipimport compiling each module once (Python 3.10 to 3.14 compile every
    module imported from a zip twice; CPython pull request #153799 would make it once).
Each row's figure above ping is what that part adds to a module run on the host; the controller's part of a task is
not counted (a module of this collection that does nothing costs what ping costs there as well, per the wall times).

needs: valgrind (apt-get install valgrind)
usage: .venv/bin/python bench/module_load.py [--output docs/benchmarks/module_load.md]
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

from nvml_simulator import installed_simulator, simulated_host  # bench/, the script's own directory

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
HOSTS = ('reference-a100', 'dgx-h100')
UTILS = 'ansible_collections.gpufleet.core.plugins.module_utils.'
# The imports a variant adds, one module_utils at a time, in the order topology_facts makes them.
SINGLE_IMPORTS = [
    ('_host', 'load_host', 'from %s_host import HostFiles' % UTILS),
    ('_cpulist', 'load_cpulist', 'from %s_cpulist import parse_cpulist' % UTILS),
    ('_sysfs_topology (with _cpulist)', 'load_sysfs', 'from %s_sysfs_topology import read_cpu' % UTILS),
    ('pynvml (the simulator)', 'load_pynvml', 'import pynvml'),
    ('_nvml (with pynvml)', 'load_nvml', 'from %s_nvml import Nvml' % UTILS),
]


def variants(source):
    """(label, module name, module source) for each variant, made from topology_facts' own source."""
    head, tail = source.split('\n\ndef main():', 1)
    imports_start = head.index('from ansible.module_utils.basic import')
    preamble, imports = head[:imports_start], head[imports_start:]
    bare_imports = ('from ansible.module_utils.basic import AnsibleModule\n'
                    'from %s_argspec import HOST_ROOTS, argument_spec\n' % UTILS)
    returned = "    module.exit_json(changed=False, ansible_facts={'gpufleet_topology': facts})"
    if returned not in tail or "    files = HostFiles(" not in tail:
        raise SystemExit('topology_facts.main() changed; update bench/module_load.py to match it')
    # The bare module builds its AnsibleModule exactly as topology_facts does: main()'s first statement.
    construct = tail.split('\n    )\n', 1)[0] + '\n    )\n'
    bare_main = ('\n\ndef main():' + construct + '    module.exit_json(changed=False)\n\n\n'
                 'if __name__ == \'__main__\':\n    main()\n')
    made = [('bare', 'load_bare', preamble + bare_imports + bare_main)]
    for label, name, line in SINGLE_IMPORTS:
        made.append(('import ' + label, name, preamble + bare_imports + line + '\n' + bare_main))
    stop_early = tail.replace('    files = HostFiles(',
                              '    module.exit_json(changed=False)\n    files = HostFiles(', 1)
    made.append(('all imports', 'load_imports', preamble + imports + '\n\ndef main():' + stop_early))
    small = tail.replace(returned, "    module.exit_json(changed=False, sections=len(facts))")
    made.append(('gather, small return', 'load_gather', preamble + imports + '\n\ndef main():' + small))
    return made


def scratch_collection(work):
    """A copy of the collection's plugins and metadata under WORK, where the variants go."""
    root = os.path.join(work, 'collections', 'ansible_collections', 'gpufleet', 'core')
    shutil.copytree(os.path.join(REPO, 'plugins'), os.path.join(root, 'plugins'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copytree(os.path.join(REPO, 'meta'), os.path.join(root, 'meta'))
    shutil.copy(os.path.join(REPO, 'galaxy.yml'), root)
    return root


def payloads(work, host, root, env, modules):
    """Ansible builds and keeps each module's AnsiballZ payload for simulated HOST; returns {module: payload path}."""
    tmp = os.path.join(work, 'remote-' + host)
    args = {'sysfs_root': os.path.join(root, 'sys'), 'procfs_root': os.path.join(root, 'proc')}
    tasks = [{'ansible.builtin.ping': {}}] + [{'gpufleet.core.' + name: args} for name in modules]
    play = os.path.join(work, 'play-%s.yml' % host)
    with open(play, 'w') as handle:
        json.dump([{'hosts': 'localhost', 'gather_facts': False, 'environment': env, 'tasks': tasks}], handle)
    ansible_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(work, 'collections'),
                       ANSIBLE_KEEP_REMOTE_FILES='1', ANSIBLE_REMOTE_TMP=tmp, ANSIBLE_LOCALHOST_WARNING='false')
    subprocess.check_call([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                           '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable, play],
                          env=ansible_env, stdout=subprocess.DEVNULL)
    found = {}
    for path in glob.glob(os.path.join(tmp, '*', 'AnsiballZ_*.py')):
        found[os.path.basename(path)[len('AnsiballZ_'):-3]] = path
    return found


# Runs a payload with zipimport finding a module's file name without compiling it, as CPython pull request
# #153799 proposes (issue #141276): in Python 3.10 to 3.14, zipimporter.find_spec asks get_filename for the spec's
# origin, and get_filename compiles the module's source, which exec_module then compiles again.
COMPILE_ONCE = r'''
import runpy
import sys
import zipimport


def get_filename(self, fullname):
    files = self._get_files() if hasattr(self, '_get_files') else self._files
    path = zipimport._get_module_path(self, fullname)
    for suffix, dummy_bytecode, dummy_package in zipimport._zip_searchorder:
        if path + suffix in files:
            return self.archive + zipimport.path_sep + path + suffix
    raise zipimport.ZipImportError("can't find module %r" % fullname, name=fullname)


zipimport.zipimporter.get_filename = get_filename
payload = sys.argv.pop(1)
runpy.run_path(payload, run_name='__main__')
'''


def instructions(host, env, payload, runner=None):
    """Instructions executed by one run of PAYLOAD (cachegrind, no cache simulation); fails if the module failed.

    With RUNNER (a script's path), the payload runs under that script instead of directly.
    """
    command = [sys.executable] + ([runner] if runner else []) + [payload]
    run = subprocess.run(['valgrind', '--tool=cachegrind', '--cache-sim=no', '--cachegrind-out-file=/dev/null']
                         + command, env=dict(os.environ, **env), capture_output=True, text=True, check=False)
    result = json.loads(run.stdout)
    if result.get('failed'):
        raise SystemExit('%s failed on %s: %s' % (payload, host, result.get('msg')))
    match = re.search(r'I\s+refs:\s+([\d,]+)', run.stderr)
    if match is None:
        raise SystemExit('valgrind gave no instruction count for %s:\n%s' % (payload, run.stderr[-2000:]))
    return int(match.group(1).replace(',', ''))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output')
    args = parser.parse_args()
    if shutil.which('valgrind') is None:
        raise SystemExit('valgrind is not installed: apt-get install valgrind')

    work = tempfile.mkdtemp(prefix='gpufleet-bench-')
    modules_dir = os.path.join(scratch_collection(work), 'plugins', 'modules')
    with open(os.path.join(REPO, 'plugins', 'modules', 'topology_facts.py')) as handle:
        made = variants(handle.read())
    for dummy, name, source in made:
        with open(os.path.join(modules_dir, name + '.py'), 'w') as handle:
            handle.write(source)
    installed = installed_simulator(work)
    once = os.path.join(work, 'compile_once.py')
    with open(once, 'w') as handle:
        handle.write(COMPILE_ONCE)
    # (label, module, runner, the row it is compared with)
    rows = [('ping', 'ping', None, None), ('bare', 'load_bare', None, 'ping')] + [
        (label, name, None, 'ping') for label, name, dummy in made[1:]] + [
        ('topology_facts', 'topology_facts', None, 'ping'),
        (ONCE_PING, 'ping', once, None),
        ('topology_facts, zipimport compiling once', 'topology_facts', once, ONCE_PING)]
    counts = {}
    for host in HOSTS:
        root, env = simulated_host(work, host, installed)
        built = payloads(work, host, root, env, sorted(set(name for dummy, name, dummy, dummy in rows) - {'ping'}))
        for label, name, runner, dummy in rows:
            counts[(host, label)] = instructions(host, env, built[name], runner)
            print('%-16s %-42s %15s' % (host, label, format(counts[(host, label)], ',')))
            sys.stdout.flush()

    lines = [
        '# Benchmark: what a topology_facts run executes above ping',
        '',
        'Made by `.venv/bin/python bench/module_load.py` (%s), ansible-core %s, Python %s, %s. Millions of CPU '
        'instructions one module run executes on the host (valgrind cachegrind), and the part above `ping` as a '
        'share of `ping`.' % (datetime.date.today().isoformat(), ansible_version(), platform.python_version(),
                              valgrind_version()),
        '',
        '| run | ' + ' | '.join('`%s`' % host for host in HOSTS) + ' |',
        '| --- |' + ' ---: |' * len(HOSTS),
    ]
    for label, dummy, dummy, against in rows:
        cells = []
        for host in HOSTS:
            value = counts[(host, label)]
            if against is None:
                cells.append('%.1f M' % (value / 1e6))
            else:
                floor = counts[(host, against)]
                cells.append('%.1f M (+%.1f%%)' % (value / 1e6, 100.0 * (value - floor) / floor))
        lines.append('| %s | %s |' % (label, ' | '.join(cells)))
    lines += [''] + ABOUT
    text = '\n'.join(lines) + '\n'
    print(text)
    if args.output:
        with open(args.output, 'w') as handle:
            handle.write(text)
    shutil.rmtree(work)


def ansible_version():
    from ansible.release import __version__  # the venv's ansible-core, which built the payloads
    return __version__


def valgrind_version():
    return subprocess.run(['valgrind', '--version'], capture_output=True, text=True, check=False).stdout.strip()


ONCE_PING = 'ping, zipimport compiling once'
ABOUT = [
    'Each variant is topology_facts\' own module file with its `main()` cut short or its imports reduced (see the',
    'script); "import X" rows add one import to "bare", so a row that imports a module also counts what that module',
    'imports. The payloads are the ones Ansible sends to a host: AnsiballZ ships `module_utils` as source, and',
    'Python keeps no bytecode for code it imports from the payload, so every run parses and compiles them. The',
    'simulator stands in for pynvml, installed with its bytecode compiled as nvidia-ml-py is; a real host\'s NVML',
    'calls cost what the driver costs, which is not counted here. Instructions are not time: they leave out cache',
    'misses and the machine\'s load, and they are the same from run to run, which is why they are used here.',
    'The last two rows run the same payloads with zipimport compiling each module once instead of twice (the fix',
    'proposed in CPython pull request #153799; see the script); topology_facts is compared with `ping` run the',
    'same way.',
]


if __name__ == '__main__':
    main()
