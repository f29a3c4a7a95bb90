# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Builds the helper bundle on the controller and installs it with ansible.builtin.copy.

The copy action does the transfer, so check mode, diff, ownership and changed are copy's own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.core.plugins.plugin_utils._helper_bundle import (
    HelperBundleError, built_bundle, bundle_name, collection_version)

ARGUMENT_SPEC = {
    'directory': {'type': 'path', 'required': True},
    'owner': {'type': 'str'},
    'group': {'type': 'str'},
    'mode': {'type': 'raw', 'default': '0644'},
}


class ActionModule(ActionBase):

    # The copy action below transfers the file and manages its own remote temporary directory.
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        super(ActionModule, self).run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x; the copy action makes its own
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            version = collection_version()
            # Built once per run, in the run's local temporary directory (removed when the run ends).
            source, modules = built_bundle(version, C.DEFAULT_LOCAL_TMP)
        except HelperBundleError as exc:
            raise AnsibleActionFail('gpufleet.core.helper_bundle: %s' % exc)
        name = bundle_name(version)
        dest = os.path.join(args['directory'], name)
        copy_args = {'src': source, 'dest': dest, 'mode': args['mode']}
        copy_args.update((key, args[key]) for key in ('owner', 'group') if args[key] is not None)
        copy_task = self._task.copy()
        copy_task.args = copy_args
        # ansible.legacy, as the template action does: a local override of copy still applies.
        copy_action = self._shared_loader_obj.action_loader.get(
            'ansible.legacy.copy', task=copy_task, connection=self._connection, play_context=self._play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        try:
            result = copy_action.run(task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if not result.get('failed'):
            result.update({'bundle': dest, 'name': name, 'version': version, 'modules': modules})
        return result
