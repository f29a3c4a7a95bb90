# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The MIG profile tables of the simulated GPU models, read from tests/nvml_sim/gpu_models.json.

The simulator serves the same file, so tests that need "how many 1g.10gb fit on an A100 80GB" take the answer from
here instead of writing their own copy. That the file itself agrees with NVIDIA's MIG user guide is checked once,
against a table written from the guide, in tests/unit/nvml_sim/test_simulator_mig.py.
"""

from __future__ import absolute_import, division, print_function

import json

from .sim import GPU_MODELS_FILE


def _models():
    with open(GPU_MODELS_FILE) as handle:
        return json.load(handle)['models']


def mig_models():
    """The names of the models that support MIG, sorted."""
    return sorted(name for name, model in _models().items() if model.get('mig'))


def profiles(model):
    """MODEL's GPU-instance profiles by name (1g.10gb, 1g.10gb+me, ...), as gpu_models.json lists them."""
    return dict((profile['name'], profile) for profile in _models()[model]['mig'])


def maxima(model):
    """Profile name -> the most instances of it one GPU of MODEL holds."""
    return dict((name, profile['max_count']) for name, profile in profiles(model).items())


def profile_table(model):
    """Profile name -> (nvidia-smi profile id, most instances per GPU, memory slices), as in NVIDIA's guide."""
    return dict((name, (profile['id'], profile['max_count'], profile['memory_slices']))
                for name, profile in profiles(model).items())


def memory_slices_by_id(model):
    """nvidia-smi profile id -> the memory slices an instance of it occupies on MODEL (its placement size)."""
    return dict((profile['id'], profile['memory_slices']) for profile in profiles(model).values())
