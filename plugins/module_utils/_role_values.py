# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Each role's value rules, one checker per role: the rules that need no host (versions, URLs, key fingerprints,
ports, counters, TLS pairing, bcrypt hashes, lists written as strings, ranges).

The site playbook's validate stage runs them for every host before any host is reached, and each role's
tasks/preflight.yml runs the same checker (both through the action gpufleet.core.validate_role_vars). The types are
the argument specs' (meta/argument_specs.yml); a checker still takes what Ansible's argument spec would convert (a
string of digits from -e for a port). Rules that need the host (its system, its addresses, its files) stay in the
role's preflight.

    check_role_values('cuda', {'cuda_default_release': 12.1, ...})
    -> ['cuda_default_release is the number 12.1; quote it, as in cuda_default_release: "12.1" ...']

Every problem names the variable, the value as given and what is allowed, with an example. A variable missing from
``values`` is not checked (the caller fills in the defaults). Pure code. This is a private module: its API may change
without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import ipaddress
import re

from ansible_collections.gpufleet.core.plugins.module_utils._openpgp import EXAMPLE_FINGERPRINT, fingerprint_problem
from ansible_collections.gpufleet.core.plugins.module_utils._plan import is_service_name
from ansible_collections.gpufleet.core.plugins.module_utils._values import (
    boolean, decimal_number, describe, is_http_url, is_unit_name, is_unit_prefix, network, path_problem, percentage, shown,
    whole_number)

_MISSING = object()

DEBIAN_VERSION = r'[0-9][0-9A-Za-z.+~:-]*-[0-9A-Za-z.+~]+'
DRIVER_BRANCH = r'[0-9]{3}'
CUDA_RELEASE = r'[0-9]+\.[0-9]+'
_URL = re.compile(r'(?:https?://[^\s/?#]+(?:[/?#]\S*)?|file:/\S*)')
_DCGM_FIELD = re.compile(r'DCGM_(?:FI|EXP)_[A-Z0-9_]+')
_BCRYPT = re.compile(r'\$2[aby]?\$[0-9]{2}\$[./A-Za-z0-9]{53}')
# systemd's RuntimeDirectory= and LogsDirectory= take these relative to /run and /var/log: plain parts only.
_PLAIN_PARTS = r'(?:/(?!\.\.?(?:/|\Z))[A-Za-z0-9_@:+.-]+)+'
_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_MPS_DAEMON_KEYS = ('device', 'user', 'group', 'default_active_thread_percentage', 'default_pinned_mem_limit',
                    'pipe_directory', 'log_directory', 'clients')
_MPS_CLIENT_KEYS = ('name', 'user', 'active_thread_percentage', 'pinned_mem_limit')


def _fullmatch(pattern, value):
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def _flow(value):
    """The value in YAML flow style with single-quoted strings, as a user writes it: '10.20.0.0/24', ['a'], {'a': 1};
    a string with a line break or a quote is shown as JSON, which YAML reads too."""
    if isinstance(value, str):
        return "'%s'" % value if re.fullmatch(r"[^'\n\r\\]*", value) else shown(value)
    if isinstance(value, dict):
        return '{%s}' % ', '.join('%s: %s' % (_flow(key), _flow(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return '[%s]' % ', '.join(_flow(item) for item in value)
    return shown(value)


def _flow_described(value):
    """describe()'s words with the value in YAML flow style: "the string '10.20.0.0/24'"."""
    words = describe(value)
    if isinstance(value, (str, dict, list, tuple)) and not isinstance(value, bool):
        return '%s %s' % (' '.join(words.split(' ')[:2]), _flow(value))
    return words


def _as_list(variable, value, what, example):
    """The items of a list, or (None, the problem) for a string (write it as a list) or anything else."""
    if isinstance(value, (list, tuple)):
        return list(value), None
    if isinstance(value, str):
        items = [part.strip() for part in value.split(',') if part.strip()]
        return None, '%s is %s, but it must be a list of %s: write [%s]' % (
            variable, describe(value), what, ', '.join(shown(item) for item in items) or example)
    return None, '%s is %s; give a list of %s, such as [%s]' % (variable, describe(value), what, example)


def _debian_version_problem(variable, value, example):
    if _fullmatch(DEBIAN_VERSION, value):
        return None
    return ('%s is %s; versions must be exact Debian versions, the upstream version and the revision (an epoch '
            'may lead), such as %s' % (variable, describe(value), example))


def _url_problem(variable, value, example, allow_empty=True):
    if (allow_empty and value == '') or (isinstance(value, str) and _URL.fullmatch(value)):
        return None
    if isinstance(value, str) and value and not re.match(r'[A-Za-z][A-Za-z0-9+.-]*:', value):
        why = ', which has no scheme'
    else:
        why = ''
    return '%s is %s%s; give a URL with its scheme (http://, https:// or file:/) and no spaces, such as %s%s' % (
        variable, describe(value), why, example, ", or '' for the default" if allow_empty else '')


def _fingerprints_problems(variable, value):
    """A non-empty list of full OpenPGP fingerprints; each entry by the apt_keyring module's rule."""
    items, problem = _as_list(variable, value, 'key fingerprints', EXAMPLE_FINGERPRINT)
    if problem:
        return [problem]
    if not items:
        return ['%s is empty; pin at least one repository key by its 40-digit fingerprint, such as [%s]'
                % (variable, EXAMPLE_FINGERPRINT)]
    return [problem for problem in (fingerprint_problem(variable, item) for item in items) if problem]


def _strings_problem(variable, value, what, example, allow_empty=True):
    """A list of strings, where a single string is the likely mistake."""
    items, problem = _as_list(variable, value, what, example)
    if problem:
        return problem
    if not items and not allow_empty:
        return '%s is empty; give at least one of %s, such as [%s]' % (variable, what, example)
    bad = [item for item in items if not isinstance(item, str) or not item.strip()]
    if bad:
        return '%s has %s; each entry must be one of %s, such as [%s]' % (
            variable, ', '.join(describe(item) for item in bad), what, example)
    return None


def _port_problem(variable, value, example):
    number = whole_number(value)
    if number is not None and 1 <= number <= 65535:
        return None
    return '%s is %s; give a port, a whole number from 1 to 65535, such as %s' % (variable, describe(value), example)


def _percent_sign_hint(value):
    found = percentage(value)
    if found is not None and found[1]:
        return ' (write %s, without the %% sign)' % shown(int(found[0]) if found[0] == int(found[0]) else found[0])
    return ''


class _Checker:
    """Collects a role's problems; get() reads a variable (_MISSING when the caller left it out)."""

    def __init__(self, values):
        self.values = values if isinstance(values, dict) else {}
        self.problems = []

    def get(self, name):
        return self.values.get(name, _MISSING)

    def has(self, *names):
        return all(name in self.values for name in names)

    def add(self, *problems):
        self.problems.extend(problem for problem in problems if problem)

    def rule(self, name, function, *args, **kwargs):
        """function(name, value, ...) -> a problem or None, for a variable that is present."""
        if name in self.values:
            self.add(function(name, self.values[name], *args, **kwargs))

    def rules(self, name, function, *args):
        """function(name, value, ...) -> a list of problems, for a variable that is present."""
        if name in self.values:
            self.add(*function(name, self.values[name], *args))


def _apt_source(check, prefix, key_url_name='repo_key_url', repo_url_name='repo_url', required=False):
    example = 'http://mirror.example.com/cuda/ubuntu2204/x86_64'
    check.rule('%s_%s' % (prefix, repo_url_name), _url_problem, example, not required)
    check.rule('%s_%s' % (prefix, key_url_name), _url_problem, example + '/3bf863cc.pub', not required)
    check.rules('%s_key_fingerprints' % prefix, _fingerprints_problems)
    check.rule('%s_keyring' % prefix, path_problem, example='/usr/share/keyrings/nvidia-cuda.gpg')


# -- nvidia_driver ---------------------------------------------------------------------------------------------------


def check_nvidia_driver(values):
    check = _Checker(values)
    branch = check.get('nvidia_driver_branch')
    branch_text = str(branch) if isinstance(branch, (str, int)) and not isinstance(branch, bool) else None
    if branch is not _MISSING and (branch_text is None or not re.fullmatch(DRIVER_BRANCH, branch_text)):
        check.add('nvidia_driver_branch is %s; give a server branch, three digits, such as "570"' % describe(branch))
        branch_text = None
    version = check.get('nvidia_driver_version')
    if version is not _MISSING:
        if not isinstance(version, str):
            check.add('nvidia_driver_version is %s; quote it, as in nvidia_driver_version: "570.133.20" (an exact '
                      'version written unquoted is read as a number)' % describe(version))
        elif branch_text is not None and not re.fullmatch(re.escape(branch_text) + r'\.[0-9]+(?:\.[0-9]+)?', version):
            check.add('nvidia_driver_version is %s, which is not an exact version in the branch nvidia_driver_branch '
                      '(%s); give one such as %s.133.20, or change the branch' % (describe(version), branch_text,
                                                                                  branch_text))
        elif branch_text is None and not re.fullmatch(DRIVER_BRANCH + r'\.[0-9]+(?:\.[0-9]+)?', version):
            check.add('nvidia_driver_version is %s; give an exact driver version such as 570.133.20'
                      % describe(version))
    package_version = check.get('nvidia_driver_package_version')
    if package_version not in (_MISSING, ''):
        problem = _debian_version_problem('nvidia_driver_package_version', package_version, '570.133.20-0ubuntu1')
        check.add(problem and problem + ", or '' to derive it from nvidia_driver_version")
    check.rule('nvidia_driver_packages', _strings_problem, 'package names', '"nvidia-driver-570-open"')
    _apt_source(check, 'nvidia_driver')
    check.rule('nvidia_driver_reboot_timeout', lambda name, value: None if (whole_number(value) or 0) >= 1 else
               '%s is %s; give a whole number of seconds, 1 or more, such as 1200' % (name, describe(value)))
    key, cert = check.get('nvidia_driver_module_signing_key'), check.get('nvidia_driver_module_signing_cert')
    for name in ('nvidia_driver_module_signing_key', 'nvidia_driver_module_signing_cert'):
        check.rule(name, path_problem, allow_empty=True, example='/var/lib/shim-signed/mok/MOK.priv')
    if isinstance(key, str) and isinstance(cert, str) and bool(key) != bool(cert):
        check.add('nvidia_driver_module_signing_key is %s and nvidia_driver_module_signing_cert is %s; set both, the '
                  'machine owner key and its certificate, or neither' % (describe(key), describe(cert)))
    check.rule('nvidia_driver_efivars_dir', path_problem, example='/sys/firmware/efi/efivars')
    return check.problems


# -- cuda ------------------------------------------------------------------------------------------------------------


def _release_problem(where, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ('%s has the release %s written as a number (%s); quote it, as in release: "%s" (YAML reads an '
                'unquoted 12.10 as the number 12.1)' % (where, shown(value), describe(value), shown(value)))
    if not _fullmatch(CUDA_RELEASE, value):
        return '%s has the release %s; give a release as a quoted string, such as release: "12.8"' % (
            where, describe(value))
    return None


def check_cuda(values):
    check = _Checker(values)
    toolkits = check.get('cuda_toolkits')
    releases = None
    if toolkits is not _MISSING:
        if not isinstance(toolkits, (list, tuple)):
            check.add('cuda_toolkits must be a list of {release, version} mappings, such as [{release: "12.8", '
                      'version: "12.8.1-1"}]; it is %s' % describe(toolkits))
        elif not toolkits:
            check.add('cuda_toolkits is empty; give at least one toolkit, such as [{release: "12.8", version: '
                      '"12.8.1-1"}]')
        else:
            releases = []
            for position, toolkit in enumerate(toolkits):
                where = 'cuda_toolkits[%d]' % position
                if not isinstance(toolkit, dict):
                    check.add('%s is %s; each toolkit is a mapping such as {release: "12.8", version: "12.8.1-1"}'
                              % (where, describe(toolkit)))
                    releases = None
                    continue
                problem = _release_problem(where, toolkit.get('release'))
                check.add(problem, _debian_version_problem('%s.version' % where, toolkit.get('version'), '12.8.1-1'))
                if problem:
                    releases = None
                elif releases is not None:
                    releases.append(toolkit['release'])
    default = check.get('cuda_default_release')
    if default is not _MISSING:
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            check.add('cuda_default_release is %s; quote it, as in cuda_default_release: "%s" (YAML reads an unquoted '
                      '12.10 as the number 12.1)' % (describe(default), shown(default)))
        elif not _fullmatch(CUDA_RELEASE, default):
            check.add('cuda_default_release is %s; give a release as a quoted string, such as "12.8"'
                      % describe(default))
        elif releases is not None and default not in releases:
            check.add('cuda_default_release is %s, which is not a release of cuda_toolkits: it must be one of %s, '
                      'or add a toolkit for it' % (describe(default), ', '.join(releases)))
    _apt_source(check, 'cuda')
    return check.problems


# -- container_toolkit -----------------------------------------------------------------------------------------------


def check_container_toolkit(values):
    check = _Checker(values)
    check.rule('container_toolkit_version', _debian_version_problem, '1.17.4-1')
    _apt_source(check, 'container_toolkit', repo_url_name='repo_base_url', required=True)
    check.rule('container_toolkit_runtimes', _strings_problem, 'runtimes (docker, containerd)', 'docker',
               allow_empty=False)
    for name, example in (('container_toolkit_docker_daemon_json', '/etc/docker/daemon.json'),
                          ('container_toolkit_containerd_config', '/etc/containerd/config.toml'),
                          ('container_toolkit_cdi_spec', '/etc/cdi/nvidia.yaml')):
        check.rule(name, path_problem, example=example)
    return check.problems


# -- dcgm_exporter ---------------------------------------------------------------------------------------------------


def _management_cidrs_problems(variable, value):
    if isinstance(value, str):
        return ['%s is %s, but it must be a list of networks: write [%s]' % (
            variable, _flow_described(value),
            ', '.join(_flow(part.strip()) for part in value.split(',') if part.strip()))]
    if not isinstance(value, (list, tuple)):
        return ["%s is %s; give a list of the management networks the exporter may listen in, such as "
                "['10.20.0.0/24']" % (variable, _flow_described(value))]
    if not value:
        return ["%s is empty; set it to the management network(s) the exporter may listen in, such as "
                "['10.20.0.0/24']: the exporter never listens on every address" % variable]
    problems = []
    for item in value:
        if network(item) is not None:
            continue
        net = None
        if isinstance(item, str) and '/' in item:
            try:
                net = ipaddress.ip_network(item, strict=False)
            except ValueError:
                net = None
        if net is not None:
            problems.append('%s entry %s has host bits set: the network is %s; write that' % (
                variable, _flow(item), net))
        else:
            problems.append('%s entry %s is not a network in CIDR form, such as 10.20.0.0/24 (given: %s)' % (
                variable, _flow(item), describe(item)))
    return problems


def _counters_problems(variable, value):
    example = '{field: DCGM_FI_DEV_GPU_TEMP, type: gauge, help: GPU temperature (in C).}'
    if not isinstance(value, (list, tuple)):
        return ['%s is %s; give a list of counters, such as [%s]' % (variable, describe(value), example)]
    if not value:
        return ['%s is empty; give the counters the exporter serves, such as [%s]' % (variable, example)]
    problems = []
    for position, counter in enumerate(value):
        where = '%s[%d]' % (variable, position)
        if not isinstance(counter, dict):
            problems.append('%s is %s; each counter is a mapping such as %s' % (where, describe(counter), example))
            continue
        field, kind, text = counter.get('field'), counter.get('type'), counter.get('help')
        if not (isinstance(field, str) and _DCGM_FIELD.fullmatch(field)):
            problems.append('%s.field is %s; give a DCGM field such as DCGM_FI_DEV_GPU_UTIL' % (where, describe(field)))
        if kind not in ('gauge', 'counter', 'label'):
            problems.append('%s.type is %s; give gauge, counter or label' % (where, describe(kind)))
        if not isinstance(text, str) or not text.strip() or re.search(r'[,\n\r]', text):
            problems.append('%s.help is %s; give a help text on one line, without commas, such as "GPU temperature '
                            '(in C)."' % (where, describe(text)))
    return problems


def _basic_auth_problems(variable, value):
    if not isinstance(value, dict):
        return ['%s is %s; give a mapping of user name to bcrypt hash, such as {prometheus: "$2y$10$..."}, or {}'
                % (variable, describe(value))]
    problems = []
    for user, hashed in sorted(value.items(), key=lambda item: str(item[0])):
        if not isinstance(user, str) or not user or ':' in user or re.search(r'\s', user):
            problems.append('%s has the user %s; a user name has no spaces or ":"' % (variable, describe(user)))
        if not (isinstance(hashed, str) and _BCRYPT.fullmatch(hashed)):
            problems.append('%s[%s] is %s, not a bcrypt hash; give one such as htpasswd -nbBC 10 USER PASSWORD '
                            'prints ($2y$10$ and 53 more characters)' % (variable, shown(user), describe(hashed)))
    return problems


def check_dcgm_exporter(values):
    check = _Checker(values)
    check.rule('dcgm_exporter_dcgm_version', _debian_version_problem, '1:4.2.3-1')
    major = check.get('dcgm_exporter_cuda_major')
    if major is not _MISSING:
        major_text = str(major) if isinstance(major, (str, int)) and not isinstance(major, bool) else None
        if major_text is None or not re.fullmatch(r'[0-9]+', major_text):
            check.add('dcgm_exporter_cuda_major is %s; give the CUDA major version, digits only, such as "12": it '
                      'completes the package name datacenter-gpu-manager-4-cuda12, installed like the others at '
                      'the exact Debian versions given' % describe(major))
    mode = check.get('dcgm_exporter_mode')
    if mode in ('package', _MISSING):
        check.rule('dcgm_exporter_version', _debian_version_problem, '4.1.3-1')
    if mode == 'container':
        image = check.get('dcgm_exporter_image')
        if image is not _MISSING and (not isinstance(image, str) or not image.strip() or re.search(r'\s', image)):
            check.add('dcgm_exporter_image is %s; container mode needs an image, such as '
                      'nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04' % describe(image))
    _apt_source(check, 'dcgm_exporter')
    check.rules('dcgm_exporter_management_cidrs', _management_cidrs_problems)
    check.rule('dcgm_exporter_listen_port', _port_problem, 9400)
    check.rule('dcgm_exporter_collect_interval_ms', lambda name, value: None if (whole_number(value) or 0) >= 1 else
               '%s is %s; give a whole number of milliseconds, 1 or more, such as 30000' % (name, describe(value)))
    check.rules('dcgm_exporter_counters', _counters_problems)
    cert, key = check.get('dcgm_exporter_tls_cert_file'), check.get('dcgm_exporter_tls_key_file')
    for name in ('dcgm_exporter_tls_cert_file', 'dcgm_exporter_tls_key_file'):
        check.rule(name, path_problem, allow_empty=True, example='/etc/ssl/gpufleet/exporter.pem')
    if isinstance(cert, str) and isinstance(key, str) and bool(cert) != bool(key):
        check.add('dcgm_exporter_tls_cert_file is %s and dcgm_exporter_tls_key_file is %s; TLS needs both, the '
                  "certificate and its key, or neither ('')" % (describe(cert), describe(key)))
    check.rules('dcgm_exporter_basic_auth_users', _basic_auth_problems)
    check.rule('dcgm_exporter_config_dir', path_problem, example='/etc/gpufleet/dcgm-exporter')
    return check.problems


# -- mps -------------------------------------------------------------------------------------------------------------


def _root_problem(variable, value, root, example):
    if _fullmatch(re.escape(root) + _PLAIN_PARTS, value):
        return None
    return ('%s is %s; give a plain directory under %s/, such as %s (no "..", ".", "//", trailing "/" or special '
            'characters): systemd creates it there' % (variable, describe(value), root, example))


def _thread_percentage_problem(where, value):
    if value is None:
        return None
    number = decimal_number(value) if not isinstance(value, str) or '%' not in value else None
    if number is not None and 1 <= number <= 100:
        return None
    found = percentage(value)
    hint = ''
    if found is not None and found[1]:
        plain = int(found[0]) if found[0] == int(found[0]) else found[0]
        hint = '; write %s, not %s' % (shown(plain), _flow(value))
    return ('%s is %s: expected a number from 1 to 100, the share of the device\'s SMs a client may use (not a '
            'memory limit)%s' % (where, describe(value), hint))


def _unknown_keys(where, item, known):
    problems = []
    for key in sorted(set(item) - set(known), key=str):
        near = difflib.get_close_matches(str(key), known, 1)
        problems.append('%s has the unknown key %s%s (known: %s)' % (
            where, key, '; did you mean %s?' % near[0] if near else '', ', '.join(known)))
    return problems


def _mps_daemons_problems(variable, value):
    if not isinstance(value, (list, tuple)):
        return ['%s is %s; give a list of daemons, such as [{device: GPU-..., user: infer}], or []'
                % (variable, describe(value))]
    problems = []
    for position, daemon in enumerate(value):
        where = '%s[%d]' % (variable, position)
        if not isinstance(daemon, dict):
            problems.append('%s is %s; each daemon is a mapping such as {device: GPU-..., user: infer}'
                            % (where, describe(daemon)))
            continue
        problems.extend(_unknown_keys(where, daemon, _MPS_DAEMON_KEYS))
        problems.append(_thread_percentage_problem('%s.default_active_thread_percentage' % where,
                                                   daemon.get('default_active_thread_percentage')))
        clients = daemon.get('clients')
        if clients is None:
            continue
        if not isinstance(clients, (list, tuple)):
            problems.append('%s.clients is %s; give a list of clients, such as [{name: llm}]'
                            % (where, describe(clients)))
            continue
        for number, client in enumerate(clients):
            spot = '%s.clients[%d]' % (where, number)
            if not isinstance(client, dict):
                problems.append('%s is %s; each client is a mapping such as {name: llm}' % (spot, describe(client)))
                continue
            problems.extend(_unknown_keys(spot, client, _MPS_CLIENT_KEYS))
            problems.append(_thread_percentage_problem('%s.active_thread_percentage' % spot,
                                                       client.get('active_thread_percentage')))
    return [problem for problem in problems if problem]


def check_mps(values):
    check = _Checker(values)
    check.rule('mps_pipe_root', _root_problem, '/run', '/run/gpufleet-mps')
    check.rule('mps_log_root', _root_problem, '/var/log', '/var/log/gpufleet-mps')
    check.rules('mps_daemons', _mps_daemons_problems)
    check.rule('mps_time_slicing_devices', _strings_problem, 'GPU or MIG device UUIDs', '"GPU-..."')
    return check.problems


# -- gpu_watchdog ----------------------------------------------------------------------------------------------------
# The same rules as the watchdog's own check of its configuration (_watchdog.check_config), named by the role's
# variables. Several messages keep the form "name (value)" or "got value" with the value as JSON, which shows its type.


def _budget_problem(variable, value):
    number = decimal_number(value) if not isinstance(value, str) or '%' not in value else None
    if number is not None and 1 <= number <= 100:
        return None
    return '%s is %s; give a percentage from 1 to 100 as a plain number, such as 85%s' % (
        variable, describe(value), _percent_sign_hint(value))


def _count(variable, value, low, allowed, example):
    """A whole number, low or more: 'name (value) must be ...'."""
    number = whole_number(value)
    if number is not None and number >= low:
        return None
    hint = ''
    if isinstance(value, str) and re.fullmatch(r'\s*[0-9]+\s*[A-Za-z%]+\s*', value):
        hint = '; write %s, without a unit' % re.match(r'\s*([0-9]+)', value).group(1)
    return '%s (%s) must be %s, such as %s (it is %s)%s' % (
        variable, shown(value), allowed, example, describe(value), hint)


def _watchdog_path(variable, value, example):
    if path_problem(variable, value) is None:
        return None
    return '%s is %s; give an absolute path on one line, without .., spaces or a trailing /, such as %s (it is %s)' % (
        variable, shown(value), example, describe(value))


def _watchdog_numbers(check):
    counts = (('gpu_watchdog_interval_sec', 1, 'a whole number of seconds, 1 or more', 30),
              ('gpu_watchdog_rate_limit_restarts', 1, 'a whole number, 1 or more', 3),
              ('gpu_watchdog_rate_limit_window_sec', 1, 'a whole number of seconds, 1 or more', 3600),
              ('gpu_watchdog_min_uptime_sec', 0, 'a whole number of seconds, 0 or more', 1800),
              ('gpu_watchdog_reboot_cooldown_sec', 0, 'a whole number of seconds, 0 or more', 21600),
              ('gpu_watchdog_xid_event_wait_ms', 0, 'a whole number of milliseconds, 0 or more', 1000))
    good = {}
    for name, low, allowed, example in counts:
        if name in check.values:
            problem = _count(name, check.values[name], low, allowed, example)
            check.add(problem)
            if not problem:
                good[name] = whole_number(check.values[name])
    interval = good.get('gpu_watchdog_interval_sec')
    window = good.get('gpu_watchdog_rate_limit_window_sec')
    if interval is not None and window is not None and window < interval:
        check.add('gpu_watchdog_rate_limit_window_sec (%d) must be at least the check interval gpu_watchdog_interval_sec '
                  '(%d): a window shorter than the interval never holds two restarts, so the limit would never stop a '
                  'restart loop. Lengthen the window, such as to %d' % (window, interval, max(interval, 3600)))
    wait = good.get('gpu_watchdog_xid_event_wait_ms')
    if interval is not None and wait is not None and wait >= interval * 1000:
        check.add('gpu_watchdog_xid_event_wait_ms (%d) must be shorter than the interval gpu_watchdog_interval_sec '
                  '(%d s, %d ms), such as 1000: each check listens that long for Xid events' % (
                      wait, interval, interval * 1000))
    fraction = check.get('gpu_watchdog_max_remote_fraction')
    if fraction is not _MISSING:
        number = decimal_number(fraction) if not isinstance(fraction, str) or '%' not in fraction else None
        if number is None or not 0 <= number <= 1:
            check.add('gpu_watchdog_max_remote_fraction (%s) must be a fraction from 0 to 1, such as 0.02 for 2%% '
                      '(it is %s)' % (shown(fraction), describe(fraction)))


def _environment_problems(variable, value):
    if not isinstance(value, dict):
        return ['%s must be a mapping of variable names to values, such as {LD_LIBRARY_PATH: /opt/nvidia/lib} (got %s, '
                '%s)' % (variable, shown(value), describe(value))]
    problems = []
    for name, item in sorted(value.items(), key=lambda pair: str(pair[0])):
        if not (isinstance(name, str) and _ENV_NAME.fullmatch(name)):
            problems.append('%s has the name %s; a variable name is letters, digits and _, not starting with a '
                            'digit, such as LD_LIBRARY_PATH' % (variable, describe(name)))
        if isinstance(item, bool) or not isinstance(item, (str, int, float)) or re.search(r'[\n\r"\\]', str(item)):
            # Each becomes Environment="NAME=value" in the unit: a line break, quote or backslash would end or bend it.
            problems.append('%s[%s] is %s; give one-line values without quotes or backslashes, such as '
                            '{LD_LIBRARY_PATH: /opt/nvidia/lib}' % (variable, shown(name), describe(item)))
    return problems


def check_gpu_watchdog(values):
    check = _Checker(values)
    check.rule('gpu_watchdog_memory_budget_percent', _budget_problem)
    budgets = check.get('gpu_watchdog_service_budgets')
    if budgets is not _MISSING:
        if not isinstance(budgets, dict):
            check.add('gpu_watchdog_service_budgets is %s; give a mapping of service name to percentage, such as '
                      '{imagegen: 80}, or {}' % describe(budgets))
        else:
            for name, budget in sorted(budgets.items(), key=lambda pair: str(pair[0])):
                if not is_service_name(name):
                    check.add('gpu_watchdog_service_budgets has the name %s, which is not a service name of the plan '
                              '(such as imagegen)' % describe(name))
                check.add(_budget_problem('gpu_watchdog_service_budgets[%s]' % shown(name), budget))
    _watchdog_numbers(check)
    for name, example in (('gpu_watchdog_plan_file', '/etc/gpufleet/placement.json'),
                          ('gpu_watchdog_config_dir', '/etc/gpufleet'),
                          ('gpu_watchdog_state_dir', '/var/lib/gpufleet-watchdog'),
                          ('gpu_watchdog_textfile_dir', '/var/lib/prometheus/node-exporter'),
                          ('gpu_watchdog_install_dir', '/usr/local/lib/gpufleet'),
                          ('gpu_watchdog_python_interpreter', '/usr/bin/python3')):
        check.rule(name, _watchdog_path, example)
    units = check.get('gpu_watchdog_reset_stop_units')
    if units is not _MISSING and (not isinstance(units, (list, tuple))
                                  or not all(is_unit_name(u, ('service',)) for u in units)):
        check.add('gpu_watchdog_reset_stop_units must be a list of .service units, such as '
                  '[gpufleet-dcgm-exporter.service], or [] (got %s, %s)' % (shown(units), describe(units)))
    mig_unit = check.get('gpu_watchdog_mig_unit')
    if mig_unit is not _MISSING and not (mig_unit == '' or is_unit_name(mig_unit, ('service',))):
        check.add("gpu_watchdog_mig_unit is %s; give a .service unit such as gpufleet-mig.service, or ''"
                  % describe(mig_unit))
    prefix = check.get('gpu_watchdog_mps_unit_prefix')
    if prefix is not _MISSING and not is_unit_prefix(prefix):
        check.add('gpu_watchdog_mps_unit_prefix is %s; give a unit name prefix such as gpufleet-mps@ (letters, '
                  'digits, _ . @ -)' % describe(prefix))
    command = check.get('gpu_watchdog_gpu_reset_command')
    if command is not _MISSING and (not isinstance(command, (list, tuple)) or not command or not all(
            isinstance(word, str) and word and not re.search(r'\s', word) for word in command)):
        # The command runs without a shell: a space inside one word is part of that word, not a separator.
        check.add('gpu_watchdog_gpu_reset_command must be a non-empty list of words, one argument each, such as '
                  "[nvidia-smi, --gpu-reset, -i]; the GPU's UUID is appended and it runs without a shell (got %s, %s)"
                  % (shown(command), describe(command)))
    check.rules('gpu_watchdog_environment', _environment_problems)
    cap = check.get('gpu_watchdog_fleet_max_quarantined')
    if cap is not _MISSING and (whole_number(cap) is None or whole_number(cap) < 0):
        check.add('gpu_watchdog_fleet_max_quarantined must be a whole number of hosts, 0 for no cap, such as 2 (got %s, '
                  '%s)' % (shown(cap), describe(cap)))
    url = check.get('gpu_watchdog_fleet_prometheus_url')
    if url is not _MISSING and not (url == '' or is_http_url(url)):
        check.add("give gpu_watchdog_fleet_prometheus_url an http(s) URL with no trailing slash, such as "
                  "http://10.20.3.41:9090, or '' (got %s, %s)" % (shown(url), describe(url)))
    return check.problems


# -- gpu_services ----------------------------------------------------------------------------------------------------


_CPULIST = re.compile(r'(?:[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)?')
_USER_PREFIX = re.compile(r'[a-z_][a-z0-9_.-]*')
_DEVICE = re.compile(r'(?:/dev/|char-|block-)\S+')


def check_gpu_services(values):
    """The role's own settings; each service's keys are checked with its placement (the service_units filter)."""
    check = _Checker(values)
    for name in ('gpu_services_services', 'gpu_services_mps_daemons', 'gpu_services_device_allow'):
        value = check.get(name)
        if value is not _MISSING and not isinstance(value, (list, tuple)):
            check.add('%s must be a list (it is %s); give %s a list%s' % (
                name, describe(value), name, ', such as [{name: llm, gpus: 2}]' if name == 'gpu_services_services'
                else ''))
    check.rule('gpu_services_plan_file', path_problem, example='/etc/gpufleet/placement.json')
    check.rule('gpu_services_numactl_command', path_problem, example='/usr/bin/numactl')
    check.rule('gpu_services_container_command', path_problem, allow_empty=True, example='/usr/bin/podman')
    prefix = check.get('gpu_services_unit_prefix')
    # A service's unit is the prefix, its name and .service; an '@' would make it a template's instance.
    if prefix is not _MISSING and not (is_unit_prefix(prefix) and '@' not in prefix):
        check.add('gpu_services_unit_prefix is %s; give a unit name prefix of letters, digits, _ . and -, such as '
                  'gpufleet-svc-' % describe(prefix))
    prefix = check.get('gpu_services_mps_unit_prefix')
    if prefix is not _MISSING and not is_unit_prefix(prefix):
        check.add('gpu_services_mps_unit_prefix is %s; give the MPS daemons\' unit name prefix, such as gpufleet-mps@'
                  % describe(prefix))
    target = check.get('gpu_services_gpu_target')
    if target is not _MISSING and not is_unit_name(target, ('target',)):
        check.add('gpu_services_gpu_target is %s; give a .target unit, such as gpufleet-gpu.target' % describe(target))
    users = check.get('gpu_services_user_prefix')
    if users is not _MISSING and not (isinstance(users, str) and _USER_PREFIX.fullmatch(users)):
        check.add('gpu_services_user_prefix is %s; give a user name prefix (lower-case letters, digits, _ . -), such '
                  'as gpufleet-' % describe(users))
    reserved = check.get('gpu_services_reserved_cpus')
    if reserved is not _MISSING and not (isinstance(reserved, str) and _CPULIST.fullmatch(reserved)):
        check.add("gpu_services_reserved_cpus is %s; give a kernel CPU list as a string, such as \"0,32\" or "
                  "\"0-1,32-33\", or ''" % describe(reserved))
    devices = check.get('gpu_services_device_allow')
    if isinstance(devices, (list, tuple)):
        bad = [device for device in devices if not (isinstance(device, str) and _DEVICE.fullmatch(device))]
        if bad:
            check.add('gpu_services_device_allow has %s; give device paths under /dev/ or char-/block- groups, such '
                      'as /dev/nvidia-caps or char-nvidia-caps' % ', '.join(shown(device) for device in bad))
    return check.problems


# -- monitoring ------------------------------------------------------------------------------------------------------


_DURATION = re.compile(r'[0-9]+(?:ms|s|m|h)')
_HOST_PORT = re.compile(r'[A-Za-z0-9_.:\[\]-]+:[0-9]+')
# The role's own scrape jobs (roles/monitoring/vars/main.yml): the pack's alerts select on their names.
MONITORING_JOBS = ('gpufleet_dcgm_exporter', 'gpufleet_node_exporter', 'prometheus')


def _as_text(value):
    return value if isinstance(value, str) else shown(value)


def _in_range(check, name, low, high, words, example, low_open=False, high_open=False):
    value = check.get(name)
    if value is _MISSING:
        return
    number = decimal_number(value)
    if number is None or (number <= low if low_open else number < low) or (number >= high if high_open else number > high):
        check.add('%s is %s: %s, such as %s (it is %s)' % (name, _as_text(value), words, example, describe(value)))


def check_monitoring(values):
    """The monitoring role's settings; the fleet hosts' targets are the monitoring_problems filter's."""
    check = _Checker(values)
    _in_range(check, 'monitoring_gpu_memory_budget_percent', 1, 100, 'a GPU memory budget is a percentage from 1 to 100',
              85)
    budgets = check.get('monitoring_gpu_memory_budgets')
    if budgets is not _MISSING and not isinstance(budgets, dict):
        check.add('monitoring_gpu_memory_budgets is %s: make it a mapping of service name to percentage, such as '
                  '{imagegen: 80} (it is %s)' % (shown(budgets), describe(budgets)))
    elif budgets is not _MISSING:
        bad = [name for name, value in budgets.items() if decimal_number(value) is None
               or not 1 <= decimal_number(value) <= 100]
        if bad:
            check.add('monitoring_gpu_memory_budgets: %s must be percentages from 1 to 100, keyed by service name (got '
                      '%s)' % (', '.join(map(str, bad)), shown(budgets)))
    _in_range(check, 'monitoring_gpu_temperature_celsius', 30, 120, 'give a GPU temperature from 30 to 120 (C)', 85)
    _in_range(check, 'monitoring_gpu_power_percent', 1, 200,
              'give a share of the enforced power limit from 1 to 200 (%)', 100)
    _in_range(check, 'monitoring_binding_max_remote_fraction', 0, 1, 'give a fraction above 0 and below 1', 0.02,
              low_open=True, high_open=True)
    intervals = [check.get(name) for name in ('monitoring_scrape_interval', 'monitoring_evaluation_interval')]
    if any(value is not _MISSING and not (isinstance(value, str) and _DURATION.fullmatch(value)) for value in intervals):
        check.add('monitoring_scrape_interval and monitoring_evaluation_interval are Prometheus durations with a unit, '
                  'such as 30s or 1m (got %s and %s)' % tuple(shown(value) for value in intervals))
    for name, example in (('monitoring_dcgm_exporter_port', 9400), ('monitoring_node_exporter_port', 9100)):
        value = check.get(name)
        if value is not _MISSING and not (whole_number(value) is not None and 1 <= whole_number(value) <= 65535):
            check.add('%s (%s) is a port number, 1-65535, such as %d (it is %s)'
                      % (name, shown(value), example, describe(value)))
    managers = check.get('monitoring_alertmanagers')
    if managers is not _MISSING and (not isinstance(managers, (list, tuple)) or not all(
            isinstance(item, str) and _HOST_PORT.fullmatch(item) for item in managers)):
        check.add("monitoring_alertmanagers must be a list of host:port entries, such as ['am1.example.com:9093', "
                  "'[fd00::9]:9093'] (got %s)" % shown(managers))
    for name in ('monitoring_config_file', 'monitoring_rules_dir', 'monitoring_file_sd_dir',
                 'monitoring_scrape_config_file', 'monitoring_promtool'):
        check.rule(name, path_problem, example='/etc/prometheus/rules.d')
    service = check.get('monitoring_prometheus_service')
    if service is not _MISSING and not (service == '' or is_unit_name(service) or is_unit_prefix(service)):
        check.add("monitoring_prometheus_service is %s: give a unit name such as prometheus, or '' to reload nothing"
                  % shown(service))
    if check.has('monitoring_install_prometheus', 'monitoring_scrape_config_file', 'monitoring_config_file') \
            and boolean(check.get('monitoring_install_prometheus')) is False \
            and check.get('monitoring_scrape_config_file') == check.get('monitoring_config_file'):
        check.add("With monitoring_install_prometheus false, monitoring_scrape_config_file (%s) must not be your "
                  "Prometheus's main configuration monitoring_config_file: the role would overwrite it with its "
                  "snippet; give the snippet its own file, such as /etc/prometheus/gpufleet-scrape.yml"
                  % check.get('monitoring_scrape_config_file'))
    api = check.get('monitoring_api_url')
    if api is not _MISSING and not (api == '' or is_http_url(api)):
        check.add("monitoring_api_url is %s: give an http(s)://host:port URL with no trailing slash, or '' to ask "
                  "nothing" % shown(api))
    report = check.get('monitoring_report_url')
    if report is not _MISSING and not (report == '' or (isinstance(report, str) and re.fullmatch(r'https?://\S+', report))):
        check.add("monitoring_report_url is %s: give an http(s):// URL, or '' for the monitoring host's address"
                  % shown(report))
    wait = check.get('monitoring_report_wait_sec')
    if wait is not _MISSING and not (whole_number(wait) is not None and 0 <= whole_number(wait) <= 3600):
        check.add('monitoring_report_wait_sec %s: give a wait of 0 to 3600 seconds (it is %s)' % (shown(wait),
                                                                                                  describe(wait)))
    groups = check.get('monitoring_extra_rule_groups')
    if groups is not _MISSING and (not isinstance(groups, (list, tuple)) or not all(
            isinstance(item, dict) and 'name' in item and 'rules' in item for item in groups)):
        check.add('monitoring_extra_rule_groups must be a list of rule groups, each a mapping with a name and rules '
                  '(got %s)' % shown(groups))
    jobs = check.get('monitoring_extra_scrape_configs')
    if jobs is not _MISSING and (not isinstance(jobs, (list, tuple)) or not all(
            isinstance(item, dict) and 'job_name' in item and item['job_name'] not in MONITORING_JOBS for item in jobs)):
        check.add('monitoring_extra_scrape_configs must be a list of scrape jobs, each a mapping with a job_name other '
                  'than %s, whose alerts select on them (got %s)' % (', '.join(MONITORING_JOBS), shown(jobs)))
    check.rule('monitoring_exporter_counters', _exporter_counters_problem)
    return check.problems


def _exporter_counters_problem(variable, value):
    """The DCGM field names a site's own exporter serves (whether the alert pack's are among them is the
    monitoring_problems filter's, with the GPU hosts it names)."""
    example = 'DCGM_FI_DEV_GPU_TEMP, DCGM_EXP_XID_ERRORS_COUNT'
    problem = _strings_problem(variable, value, 'DCGM field names', example)
    if problem:
        return problem
    bad = [item for item in value if not _DCGM_FIELD.fullmatch(item)]
    if bad:
        return ("%s has %s; each entry is a DCGM field name, the first column of your exporter's counters CSV, such "
                "as [%s], or leave it empty ([]) to check each GPU host's dcgm_exporter_counters"
                % (variable, ', '.join(describe(item) for item in bad), example))
    return None


CHECKERS = {
    'monitoring': check_monitoring,
    'gpu_services': check_gpu_services,
    'nvidia_driver': check_nvidia_driver,
    'cuda': check_cuda,
    'container_toolkit': check_container_toolkit,
    'dcgm_exporter': check_dcgm_exporter,
    'mps': check_mps,
    'gpu_watchdog': check_gpu_watchdog,
}


def check_role_values(role, values):
    """The problems of a role's variables (a dict of them, defaults filled in), [] for a role without a checker."""
    checker = CHECKERS.get(role)
    return checker(values) if checker else []
