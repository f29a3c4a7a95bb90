# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The install roles' value checkers: nvidia_driver, cuda, container_toolkit and dcgm_exporter (their versions,
repositories and keys, the exporter's networks, counters and TLS). _role_values.py is their entry; the rules are
described there. Pure code. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.gpufleet.core.plugins.module_utils._openpgp import EXAMPLE_FINGERPRINT, fingerprint_problem
from ansible_collections.gpufleet.core.plugins.module_utils._role_checker import (
    DCGM_FIELD, MISSING, RoleChecker, as_list, flow_described, flow_style, full_match, strings_problem)
from ansible_collections.gpufleet.core.plugins.module_utils._values import describe, network, path_problem, shown, whole_number

DEBIAN_VERSION = r'[0-9][0-9A-Za-z.+~:-]*-[0-9A-Za-z.+~]+'
DRIVER_BRANCH = r'[0-9]{3}'
CUDA_RELEASE = r'[0-9]+\.[0-9]+'
_URL = re.compile(r'(?:https?://[^\s/?#]+(?:[/?#]\S*)?|file:/\S*)')
_BCRYPT = re.compile(r'\$2[aby]?\$[0-9]{2}\$[./A-Za-z0-9]{53}')


def _debian_version_problem(variable, value, example):
    if full_match(DEBIAN_VERSION, value):
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
    items, problem = as_list(variable, value, 'key fingerprints', EXAMPLE_FINGERPRINT)
    if problem:
        return [problem]
    if not items:
        return ['%s is empty; pin at least one repository key by its 40-digit fingerprint, such as [%s]'
                % (variable, EXAMPLE_FINGERPRINT)]
    return [problem for problem in (fingerprint_problem(variable, item) for item in items) if problem]


def _port_problem(variable, value, example):
    number = whole_number(value)
    if number is not None and 1 <= number <= 65535:
        return None
    return '%s is %s; give a port, a whole number from 1 to 65535, such as %s' % (variable, describe(value), example)


def _apt_source(check, prefix, key_url_name='repo_key_url', repo_url_name='repo_url', required=False):
    example = 'http://mirror.example.com/cuda/ubuntu2204/x86_64'
    check.rule('%s_%s' % (prefix, repo_url_name), _url_problem, example, not required)
    check.rule('%s_%s' % (prefix, key_url_name), _url_problem, example + '/3bf863cc.pub', not required)
    check.rules('%s_key_fingerprints' % prefix, _fingerprints_problems)
    check.rule('%s_keyring' % prefix, path_problem, example='/usr/share/keyrings/nvidia-cuda.gpg')


# -- nvidia_driver ---------------------------------------------------------------------------------------------------


def check_nvidia_driver(values):
    check = RoleChecker(values)
    branch = check.get('nvidia_driver_branch')
    branch_text = str(branch) if isinstance(branch, (str, int)) and not isinstance(branch, bool) else None
    if branch is not MISSING and (branch_text is None or not re.fullmatch(DRIVER_BRANCH, branch_text)):
        check.add('nvidia_driver_branch is %s; give a server branch, three digits, such as "570"' % describe(branch))
        branch_text = None
    version = check.get('nvidia_driver_version')
    if version is not MISSING:
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
    if package_version not in (MISSING, ''):
        problem = _debian_version_problem('nvidia_driver_package_version', package_version, '570.133.20-0ubuntu1')
        check.add(problem and problem + ", or '' to derive it from nvidia_driver_version")
    check.rule('nvidia_driver_packages', strings_problem, 'package names', '"nvidia-driver-570-open"')
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
    check.rule('nvidia_driver_loaded_version_file', path_problem, example='/sys/module/nvidia/version')
    return check.problems


# -- cuda ------------------------------------------------------------------------------------------------------------


def _release_problem(where, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ('%s has the release %s written as a number (%s); quote it, as in release: "%s" (YAML reads an '
                'unquoted 12.10 as the number 12.1)' % (where, shown(value), describe(value), shown(value)))
    if not full_match(CUDA_RELEASE, value):
        return '%s has the release %s; give a release as a quoted string, such as release: "12.8"' % (
            where, describe(value))
    return None


def check_cuda(values):
    check = RoleChecker(values)
    toolkits = check.get('cuda_toolkits')
    releases = None
    if toolkits is not MISSING:
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
    if default is not MISSING:
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            check.add('cuda_default_release is %s; quote it, as in cuda_default_release: "%s" (YAML reads an unquoted '
                      '12.10 as the number 12.1)' % (describe(default), shown(default)))
        elif not full_match(CUDA_RELEASE, default):
            check.add('cuda_default_release is %s; give a release as a quoted string, such as "12.8"'
                      % describe(default))
        elif releases is not None and default not in releases:
            check.add('cuda_default_release is %s, which is not a release of cuda_toolkits: it must be one of %s, '
                      'or add a toolkit for it' % (describe(default), ', '.join(releases)))
    _apt_source(check, 'cuda')
    return check.problems


# -- container_toolkit -----------------------------------------------------------------------------------------------


def check_container_toolkit(values):
    check = RoleChecker(values)
    check.rule('container_toolkit_version', _debian_version_problem, '1.17.4-1')
    _apt_source(check, 'container_toolkit', repo_url_name='repo_base_url', required=True)
    check.rule('container_toolkit_runtimes', strings_problem, 'runtimes (docker, containerd)', 'docker',
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
            variable, flow_described(value),
            ', '.join(flow_style(part.strip()) for part in value.split(',') if part.strip()))]
    if not isinstance(value, (list, tuple)):
        return ["%s is %s; give a list of the management networks the exporter may listen in, such as "
                "['10.20.0.0/24']" % (variable, flow_described(value))]
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
                variable, flow_style(item), net))
        else:
            problems.append('%s entry %s is not a network in CIDR form, such as 10.20.0.0/24 (given: %s)' % (
                variable, flow_style(item), describe(item)))
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
        if not (isinstance(field, str) and DCGM_FIELD.fullmatch(field)):
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
    check = RoleChecker(values)
    check.rule('dcgm_exporter_dcgm_version', _debian_version_problem, '1:4.2.3-1')
    major = check.get('dcgm_exporter_cuda_major')
    if major is not MISSING:
        major_text = str(major) if isinstance(major, (str, int)) and not isinstance(major, bool) else None
        if major_text is None or not re.fullmatch(r'[0-9]+', major_text):
            check.add('dcgm_exporter_cuda_major is %s; give the CUDA major version, digits only, such as "12": it '
                      'completes the package name datacenter-gpu-manager-4-cuda12, installed like the others at '
                      'the exact Debian versions given' % describe(major))
    mode = check.get('dcgm_exporter_mode')
    if mode in ('package', MISSING):
        check.rule('dcgm_exporter_version', _debian_version_problem, '4.1.3-1')
    if mode == 'container':
        image = check.get('dcgm_exporter_image')
        if image is not MISSING and (not isinstance(image, str) or not image.strip() or re.search(r'\s', image)):
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
