# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig role's value rules that need no host: where its layouts come from, each layout entry's keys, its unit
names, paths and time-outs. Validate runs them for every host whose stage plan has the role, and the role's preflight
through the same checker (_role_values.CHECKERS). What a layout asks of the GPUs is checked against the hardware
class's promise (_hardware_class.plan_problems) and, on the host, by the mig module. Pure code; a private module: its
API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._role_checker import RoleChecker, strings_problem
from ansible_collections.gpufleet.core.plugins.module_utils._values import (
    describe, path_problem, unit_name_problem, whole_number_problem)

LAYOUT_KEYS = ('gpus', 'layout')


def _layouts_problems(variable, value):
    if not isinstance(value, (list, tuple)):
        return ['%s is %s; give a list of layout entries, such as [{gpus: all, layout: {1g.10gb: 7}}], or []'
                % (variable, describe(value))]
    problems = []
    for position, entry in enumerate(value):
        where = '%s[%d]' % (variable, position)
        if not isinstance(entry, dict):
            problems.append('%s is %s; each entry is a mapping such as {gpus: all, layout: {1g.10gb: 7}}'
                            % (where, describe(entry)))
            continue
        missing = [key for key in LAYOUT_KEYS if key not in entry]
        unknown = sorted((str(key) for key in entry if key not in LAYOUT_KEYS))
        if missing or unknown:
            problems.append('%s must have exactly the keys gpus and layout (%s)' % (where, '; '.join(
                (['it has no %s' % ' and no '.join(missing)] if missing else [])
                + (['%s is not one of them' % ', '.join(unknown)] if unknown else []))))
    return problems


def _source_problem(values):
    """Exactly one source of layouts: mig_layouts, or a mig-parted file with the name of its entry."""
    layouts, parted, name = (values.get(key) for key in ('mig_layouts', 'mig_parted_config_file',
                                                         'mig_parted_config_name'))
    has_layouts = isinstance(layouts, (list, tuple)) and len(layouts) > 0
    if has_layouts == bool(parted) or (parted and not name):
        return ('Set either mig_layouts, or mig_parted_config_file together with mig_parted_config_name (got %d '
                'layout entries, mig_parted_config_file is %s, mig_parted_config_name is %s)'
                % (len(layouts) if isinstance(layouts, (list, tuple)) else 0, describe(parted), describe(name)))
    return None


def check_mig(values):
    check = RoleChecker(values)
    check.rules('mig_layouts', _layouts_problems)
    if check.has('mig_layouts', 'mig_parted_config_file', 'mig_parted_config_name') \
            and isinstance(check.get('mig_layouts'), (list, tuple)):
        check.add(_source_problem(values))
    check.rule('mig_parted_config_file', path_problem, allow_empty=True, example='/etc/gpufleet/mig-parted.yaml')
    check.rule('mig_gpu_target', unit_name_problem, suffixes=('target',))
    check.rule('mig_boot_unit_name', unit_name_problem)
    check.rule('mig_gpu_service_units', strings_problem, 'systemd unit names', '"gpufleet-svc-llm.service"')
    check.rule('mig_boot_after_units', strings_problem, 'systemd unit names', '"nvidia-persistenced.service"')
    check.rule('mig_gpu_reset_command', strings_problem, 'words of a command', '"nvidia-smi"', allow_empty=False)
    check.rule('mig_reboot_timeout', whole_number_problem, 1, example=1800)
    check.rule('mig_boot_timeout_sec', whole_number_problem, 1, example=300)
    for name, example in (('mig_install_dir', '/usr/local/lib/gpufleet'), ('mig_config_dir', '/etc/gpufleet'),
                          ('mig_python_interpreter', '/usr/bin/python3')):
        check.rule(name, path_problem, example=example)
    return check.problems
