# SPDX-License-Identifier: GPL-3.0-or-later
"""The NVML simulator as the benchmarks put it on a host's PYTHONPATH: a copy with its bytecode compiled.

A real host's pynvml is nvidia-ml-py, an installed package whose bytecode pip compiled. tests/nvml_sim is compiled
afresh by every module run wherever no bytecode file is written (PYTHONDONTWRITEBYTECODE, as on the development
machine, or a read-only checkout): about 20 ms per run for its 1,300 lines, which a benchmark would otherwise count
as the module's own cost. Importing the copy still costs what importing it costs.
"""

import compileall
import os
import shutil
import subprocess
import sys

SIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'nvml_sim')
SIM = os.path.normpath(SIM)


def installed_simulator(work):
    """Copy the simulator's module and the GPU models it reads into WORK/nvml_sim, compile it, return that path."""
    target = os.path.join(work, 'nvml_sim')
    os.mkdir(target)
    for name in ('pynvml.py', 'gpu_models.json'):
        shutil.copy(os.path.join(SIM, name), target)
    if not compileall.compile_dir(target, quiet=1):
        raise SystemExit('could not compile the simulator copy in %s' % target)
    return target


def simulated_host(work, name, installed):
    """Render simulated host NAME (tests/nvml_sim/hosts/NAME.json) into WORK/NAME, its sysfs and procfs trees; return
    that root and the environment a module run on it needs: INSTALLED (installed_simulator's copy) as PYTHONPATH, the
    host's description, and its simulator state in WORK."""
    description = os.path.join(SIM, 'hosts', name + '.json')
    root = os.path.join(work, name)
    subprocess.check_call([sys.executable, os.path.join(SIM, 'render_tree.py'), description, root],
                          stdout=subprocess.DEVNULL)
    return root, {'PYTHONPATH': installed, 'GPUFLEET_NVML_SIM_HOST': description,
                  'GPUFLEET_NVML_SIM_STATE': os.path.join(work, name + '.state.json')}
