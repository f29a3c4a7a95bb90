# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role's value checker (module_utils/_role_values.py), one table: every rule refused with a message naming the
variable and the value as given, and accepted with a good value; each role's own defaults pass."""

from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils._role_values import CHECKERS, check_role_values
from ansible_collections.gpufleet.core.plugins.module_utils._runtime_role_checkers import MONITORING_JOBS

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
FPR = 'EB693B3035CD5710E231E123A4B469963BF863CC'
DAEMON = {'device': 'GPU-0', 'user': 'infer'}


def defaults(role):
    with open(os.path.join(REPO, 'roles', role, 'defaults', 'main.yml')) as handle:
        return yaml.safe_load(handle)


# (role, variables over the defaults, fragments a refusal must hold) -- the variable and the value as given.
REFUSED = [
    # nvidia_driver
    ('nvidia_driver', {'nvidia_driver_branch': '57'}, ['nvidia_driver_branch', '"57"', 'three digits']),
    ('nvidia_driver', {'nvidia_driver_version': 570.133}, ['nvidia_driver_version', 'the number 570.133', 'quote it']),
    ('nvidia_driver', {'nvidia_driver_version': '580.95.05'}, ['nvidia_driver_version', '"580.95.05"', 'branch']),
    ('nvidia_driver', {'nvidia_driver_package_version': '570.133.20'},
     ['nvidia_driver_package_version', '"570.133.20"', 'exact Debian versions']),
    ('nvidia_driver', {'nvidia_driver_key_fingerprints': ['3BF863CC']},
     ['nvidia_driver_key_fingerprints', '"3BF863CC"', 'give the full 40-digit fingerprint']),
    ('nvidia_driver', {'nvidia_driver_key_fingerprints': ['A4B469963BF863CC']},
     ['nvidia_driver_key_fingerprints', '"A4B469963BF863CC"', 'give the full 40-digit fingerprint']),
    ('nvidia_driver', {'nvidia_driver_key_fingerprints': FPR}, ['nvidia_driver_key_fingerprints', FPR, 'write [']),
    ('nvidia_driver', {'nvidia_driver_key_fingerprints': []}, ['nvidia_driver_key_fingerprints is empty']),
    ('nvidia_driver', {'nvidia_driver_key_fingerprints': ['not-a-key']},
     ['nvidia_driver_key_fingerprints', '"not-a-key"', '40-digit']),
    ('nvidia_driver', {'nvidia_driver_repo_url': 'mirror.example.com/cuda'},
     ['nvidia_driver_repo_url', '"mirror.example.com/cuda"', 'scheme']),
    ('nvidia_driver', {'nvidia_driver_repo_key_url': 'ftp://mirror/key.pub'}, ['nvidia_driver_repo_key_url', 'ftp://']),
    ('nvidia_driver', {'nvidia_driver_packages': 'nvidia-driver-570-open'},
     ['nvidia_driver_packages', '"nvidia-driver-570-open"', 'must be a list']),
    ('nvidia_driver', {'nvidia_driver_reboot_timeout': '20m'}, ['nvidia_driver_reboot_timeout', '"20m"']),
    ('nvidia_driver', {'nvidia_driver_module_signing_key': '/var/lib/mok/MOK.priv'},
     ['nvidia_driver_module_signing_key', '"/var/lib/mok/MOK.priv"', 'set both']),
    ('nvidia_driver', {'nvidia_driver_efivars_dir': 'sys/firmware'}, ['nvidia_driver_efivars_dir', '"sys/firmware"']),
    # cuda
    ('cuda', {'cuda_default_release': 12.1}, ['cuda_default_release is the number 12.1', 'quote it']),
    ('cuda', {'cuda_default_release': '12'}, ['cuda_default_release', '"12"', 'such as "12.8"']),
    ('cuda', {'cuda_default_release': '12.9'}, ['cuda_default_release', '"12.9"', 'not a release of cuda_toolkits',
                                                'must be one of 12.8']),
    ('cuda', {'cuda_toolkits': {'release': '12.8', 'version': '12.8.1-1'}}, ['cuda_toolkits must be a list', 'mapping']),
    ('cuda', {'cuda_toolkits': []}, ['cuda_toolkits is empty']),
    ('cuda', {'cuda_toolkits': ['12.8']}, ['cuda_toolkits[0]', '"12.8"', 'mapping']),
    ('cuda', {'cuda_toolkits': [{'release': 12.8, 'version': '12.8.1-1'}]},
     ['cuda_toolkits[0] has the release 12.8 written as a number', 'quote it']),
    ('cuda', {'cuda_toolkits': [{'release': '12.8', 'version': '12.8.1'}]},
     ['cuda_toolkits[0].version', '"12.8.1"', 'exact Debian versions']),
    ('cuda', {'cuda_key_fingerprints': ['3BF863CC']}, ['cuda_key_fingerprints', '"3BF863CC"', 'full 40-digit']),
    ('cuda', {'cuda_repo_url': 'mirror/cuda'}, ['cuda_repo_url', '"mirror/cuda"', 'scheme']),
    # container_toolkit
    ('container_toolkit', {'container_toolkit_version': '1.17.4'}, ['container_toolkit_version', '"1.17.4"']),
    ('container_toolkit', {'container_toolkit_version': '1.17.4-1\n'}, ['container_toolkit_version', '"1.17.4-1\\n"']),
    ('container_toolkit', {'container_toolkit_repo_base_url': ''}, ['container_toolkit_repo_base_url', '""', 'scheme']),
    ('container_toolkit', {'container_toolkit_key_fingerprints': ['DDCAE044F796ECB0']},
     ['container_toolkit_key_fingerprints', '"DDCAE044F796ECB0"', 'full 40-digit']),
    ('container_toolkit', {'container_toolkit_runtimes': 'docker'}, ['container_toolkit_runtimes', '"docker"', 'list']),
    ('container_toolkit', {'container_toolkit_cdi_spec': '/etc/cdi/../nvidia.yaml'},
     ['container_toolkit_cdi_spec', '"/etc/cdi/../nvidia.yaml"']),
    # dcgm_exporter
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': '10.20.0.0/24'},
     ["dcgm_exporter_management_cidrs is the string '10.20.0.0/24'", "write ['10.20.0.0/24']"]),
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': []}, ['dcgm_exporter_management_cidrs is empty']),
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': ['10.20.0.5/24']},
     ["'10.20.0.5/24' has host bits set", 'the network is 10.20.0.0/24']),
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': ['lan']},
     ['dcgm_exporter_management_cidrs', "'lan' is not a network"]),
    ('dcgm_exporter', {'dcgm_exporter_version': '4.1.3'}, ['dcgm_exporter_version', '"4.1.3"', 'exact Debian versions']),
    ('dcgm_exporter', {'dcgm_exporter_dcgm_version': '4.2.3'}, ['dcgm_exporter_dcgm_version', '"4.2.3"']),
    ('dcgm_exporter', {'dcgm_exporter_cuda_major': '12.8'}, ['dcgm_exporter_cuda_major', '"12.8"', 'digits only']),
    ('dcgm_exporter', {'dcgm_exporter_mode': 'container', 'dcgm_exporter_image': ''},
     ['dcgm_exporter_image', '""', 'container mode needs an image']),
    ('dcgm_exporter', {'dcgm_exporter_listen_port': 94000}, ['dcgm_exporter_listen_port', 'the integer 94000', '65535']),
    ('dcgm_exporter', {'dcgm_exporter_listen_port': '9400x'}, ['dcgm_exporter_listen_port', '"9400x"']),
    ('dcgm_exporter', {'dcgm_exporter_counters': []}, ['dcgm_exporter_counters is empty']),
    ('dcgm_exporter', {'dcgm_exporter_counters': [{'field': 'GPU_TEMP', 'type': 'gauge', 'help': 'Temperature.'}]},
     ['dcgm_exporter_counters[0].field', '"GPU_TEMP"', 'DCGM_FI_']),
    ('dcgm_exporter', {'dcgm_exporter_counters': [{'field': 'DCGM_FI_DEV_GPU_TEMP', 'type': 'histogram',
                                                   'help': 'Temperature.'}]},
     ['dcgm_exporter_counters[0].type', '"histogram"', 'gauge, counter or label']),
    ('dcgm_exporter', {'dcgm_exporter_counters': [{'field': 'DCGM_FI_DEV_GPU_TEMP', 'type': 'gauge',
                                                   'help': 'Temperature, in C.'}]},
     ['dcgm_exporter_counters[0].help', '"Temperature, in C."', 'without commas']),
    ('dcgm_exporter', {'dcgm_exporter_tls_cert_file': '/etc/ssl/exporter.pem'},
     ['dcgm_exporter_tls_cert_file is the string "/etc/ssl/exporter.pem"', 'dcgm_exporter_tls_key_file', 'both']),
    ('dcgm_exporter', {'dcgm_exporter_basic_auth_users': {'prometheus': 'secret'}},
     ['dcgm_exporter_basic_auth_users["prometheus"]', '"secret"', 'bcrypt']),
    ('dcgm_exporter', {'dcgm_exporter_key_fingerprints': ['3BF863CC']},
     ['dcgm_exporter_key_fingerprints', '"3BF863CC"', 'full 40-digit']),
    # mps
    ('mps', {'mps_daemons': [dict(DAEMON, default_active_thread_percentage='50%')]},
     ['mps_daemons[0].default_active_thread_percentage', '"50%"', 'expected a number from 1 to 100', "write 50"]),
    ('mps', {'mps_daemons': [dict(DAEMON, default_active_thread_percentage=0)]},
     ['mps_daemons[0].default_active_thread_percentage', 'the integer 0', '1 to 100']),
    ('mps', {'mps_daemons': [dict(DAEMON, clients=[{'name': 'llm', 'active_thread_percentage': 150}])]},
     ['mps_daemons[0].clients[0].active_thread_percentage', 'the integer 150']),
    ('mps', {'mps_daemons': [dict(DAEMON, default_pinned_mem_limits='20G')]},
     ['mps_daemons[0]', 'default_pinned_mem_limits', 'did you mean default_pinned_mem_limit?']),
    ('mps', {'mps_daemons': {'device': 'GPU-0'}}, ['mps_daemons', 'the mapping', 'list of daemons']),
    ('mps', {'mps_daemons': [dict(DAEMON, clients='llm')]}, ['mps_daemons[0].clients', '"llm"']),
    ('mps', {'mps_pipe_root': '/run/../etc'}, ['mps_pipe_root', '"/run/../etc"', 'under /run/']),
    ('mps', {'mps_pipe_root': '/tmp/mps'}, ['mps_pipe_root', '"/tmp/mps"']),
    ('mps', {'mps_log_root': '/var/log/gpufleet-mps\n'}, ['mps_log_root', '"/var/log/gpufleet-mps\\n"']),
    ('mps', {'mps_time_slicing_devices': 'GPU-0'}, ['mps_time_slicing_devices', '"GPU-0"', 'list']),
    # Devices by UUID only: an index names another GPU after a reorder, and the plan would never match it.
    ('mps', {'mps_time_slicing_devices': ['GPU-1', 0]}, ['mps_time_slicing_devices', 'the integer 0', 'UUIDs']),
    ('mps', {'mps_time_slicing_devices': ['1']}, ['mps_time_slicing_devices[0]', '"1"', 'GPU-... or MIG-... UUID']),
    ('mps', {'mps_daemons': [dict(DAEMON, device=0)]}, ['mps_daemons[0].device', 'the integer 0', 'indices reorder']),
    ('mps', {'mps_daemons': [dict((key, value) for key, value in DAEMON.items() if key != 'device')]},
     ['mps_daemons[0] has no device', 'UUID']),
    # gpu_watchdog
    ('gpu_watchdog', {'gpu_watchdog_memory_budget_percent': '85%'},
     ['gpu_watchdog_memory_budget_percent', 'the string "85%"', 'without the % sign']),
    ('gpu_watchdog', {'gpu_watchdog_memory_budget_percent': 101}, ['gpu_watchdog_memory_budget_percent', '101', '1 to 100']),
    ('gpu_watchdog', {'gpu_watchdog_service_budgets': {'imagegen': '80%'}},
     ['gpu_watchdog_service_budgets["imagegen"]', '"80%"', 'without the % sign']),
    ('gpu_watchdog', {'gpu_watchdog_service_budgets': [{'imagegen': 80}]},
     ['gpu_watchdog_service_budgets', '[{"imagegen": 80}]', 'a mapping']),
    ('gpu_watchdog', {'gpu_watchdog_service_budgets': {'image gen': 80}},
     ['gpu_watchdog_service_budgets', '"image gen"', 'not a service name']),
    ('gpu_watchdog', {'gpu_watchdog_interval_sec': '30s'}, ['gpu_watchdog_interval_sec ("30s")', 'without a unit']),
    ('gpu_watchdog', {'gpu_watchdog_interval_sec': 0}, ['gpu_watchdog_interval_sec (0)', '1 or more']),
    ('gpu_watchdog', {'gpu_watchdog_rate_limit_restarts': 0}, ['gpu_watchdog_rate_limit_restarts (0)']),
    ('gpu_watchdog', {'gpu_watchdog_min_uptime_sec': -5}, ['gpu_watchdog_min_uptime_sec (-5)', '0 or more']),
    ('gpu_watchdog', {'gpu_watchdog_reboot_cooldown_sec': -1}, ['gpu_watchdog_reboot_cooldown_sec (-1)']),
    ('gpu_watchdog', {'gpu_watchdog_interval_sec': 60, 'gpu_watchdog_rate_limit_window_sec': 30},
     ['gpu_watchdog_rate_limit_window_sec (30)', 'gpu_watchdog_interval_sec (60)', 'Lengthen the window']),
    ('gpu_watchdog', {'gpu_watchdog_xid_event_wait_ms': 30000},
     ['gpu_watchdog_xid_event_wait_ms (30000)', 'shorter than the interval']),
    ('gpu_watchdog', {'gpu_watchdog_max_remote_fraction': 2}, ['gpu_watchdog_max_remote_fraction (2)', '0.02']),
    ('gpu_watchdog', {'gpu_watchdog_max_remote_fraction': '2%'}, ['gpu_watchdog_max_remote_fraction ("2%")']),
    ('gpu_watchdog', {'gpu_watchdog_plan_file': '/etc/gpufleet/placement.json\n'},
     ['gpu_watchdog_plan_file is "/etc/gpufleet/placement.json\\n"', 'on one line']),
    ('gpu_watchdog', {'gpu_watchdog_python_interpreter': 'python3'},
     ['gpu_watchdog_python_interpreter is "python3"', 'absolute']),
    ('gpu_watchdog', {'gpu_watchdog_reset_stop_units': ['dcgm;reboot.service']},
     ['gpu_watchdog_reset_stop_units', 'dcgm;reboot.service']),
    ('gpu_watchdog', {'gpu_watchdog_mig_unit': 'gpufleet-mig'}, ['gpu_watchdog_mig_unit', '"gpufleet-mig"']),
    ('gpu_watchdog', {'gpu_watchdog_mps_unit_prefix': 'gpufleet mps@'}, ['gpu_watchdog_mps_unit_prefix', '"gpufleet mps@"']),
    ('gpu_watchdog', {'gpu_watchdog_gpu_reset_command': 'nvidia-smi --gpu-reset -i'},
     ['gpu_watchdog_gpu_reset_command must be a non-empty list of words', 'got "nvidia-smi --gpu-reset -i"']),
    ('gpu_watchdog', {'gpu_watchdog_gpu_reset_command': []}, ['gpu_watchdog_gpu_reset_command', 'got []']),
    ('gpu_watchdog', {'gpu_watchdog_environment': ['A=1']}, ['gpu_watchdog_environment must be a mapping', '["A=1"]']),
    ('gpu_watchdog', {'gpu_watchdog_environment': {'A': 'x"y'}}, ['gpu_watchdog_environment["A"]', 'without quotes']),
    ('gpu_watchdog', {'gpu_watchdog_environment': {'A B': 'x'}}, ['gpu_watchdog_environment', '"A B"']),
    ('gpu_watchdog', {'gpu_watchdog_fleet_max_quarantined': '10%'},
     ['gpu_watchdog_fleet_max_quarantined must be a whole number', 'got "10%"']),
    ('gpu_watchdog', {'gpu_watchdog_fleet_max_quarantined': -1}, ['gpu_watchdog_fleet_max_quarantined', 'got -1']),
    ('gpu_watchdog', {'gpu_watchdog_fleet_prometheus_url': '10.20.3.41:9090'},
     ['gpu_watchdog_fleet_prometheus_url an http(s) URL', 'got "10.20.3.41:9090"']),
    ('gpu_watchdog', {'gpu_watchdog_fleet_prometheus_url': 'http://10.20.3.41:9090/'},
     ['gpu_watchdog_fleet_prometheus_url', '"http://10.20.3.41:9090/"', 'no trailing slash']),
    ('gpu_services', {'gpu_services_services': {'name': 'llm'}},
     ['gpu_services_services must be a list', 'the mapping {"name": "llm"}']),
    # Each service's rules that need no host (_service_specs), with the role's user prefix.
    ('gpu_services', {'gpu_services_services': [{'name': 'LLM', 'command': '/opt/llm/bin/serve'}]},
     ['gpu_services_services entry 1: name is the string "LLM"']),
    ('gpu_services', {'gpu_services_user_prefix': 'a-much-longer-user-prefix-',
                      'gpu_services_services': [{'name': 'imagegen', 'command': '/opt/imagegen/bin/serve'}]},
     ["the dedicated user 'a-much-longer-user-prefix-imagegen' is longer than 32 characters"]),
    ('gpu_services', {'gpu_services_reserved_cpus': 0}, ['gpu_services_reserved_cpus is the integer 0', '"0,32"']),
    ('gpu_services', {'gpu_services_gpu_target': 'gpufleet-gpu.service'},
     ['gpu_services_gpu_target is the string "gpufleet-gpu.service"', '.target unit']),
    ('gpu_services', {'gpu_services_numactl_command': 'numactl'}, ['gpu_services_numactl_command', '"numactl"', 'absolute']),
    ('gpu_services', {'gpu_services_device_allow': ['/dev/nvidia0', 'nvidia-caps']},
     ['gpu_services_device_allow has "nvidia-caps"']),
    ('gpu_services', {'gpu_services_user_prefix': 'GPU-'}, ['gpu_services_user_prefix is the string "GPU-"']),
    ('monitoring', {'monitoring_gpu_memory_budget_percent': '85%'},
     ['monitoring_gpu_memory_budget_percent is 85%', 'such as 85', 'the string "85%"']),
    ('monitoring', {'monitoring_scrape_interval': 30}, ['monitoring_scrape_interval', 'got 30 and "30s"']),
    ('monitoring', {'monitoring_rules_dir': '/etc/prometheus/../rules'}, ['monitoring_rules_dir', 'without ..']),
    ('monitoring', {'monitoring_extra_scrape_configs': [{'job_name': 'prometheus'}]},
     ['monitoring_extra_scrape_configs', 'other than gpufleet_dcgm_exporter']),
    ('monitoring', {'monitoring_report_wait_sec': '1h'}, ['monitoring_report_wait_sec "1h"', '0 to 3600 seconds']),
    # mig: the rules its preflight asserted, and its names, paths and time-outs
    ('mig', {'mig_layouts': []}, ['Set either mig_layouts, or mig_parted_config_file', 'got 0 layout entries']),
    ('mig', {'mig_parted_config_file': '/etc/mig.yaml'}, ['Set either mig_layouts', '"/etc/mig.yaml"']),
    ('mig', {'mig_layouts': [], 'mig_parted_config_file': '/etc/mig.yaml'},
     ['together with mig_parted_config_name', 'mig_parted_config_name is the string ""']),
    ('mig', {'mig_layouts': [{'gpus': 'all', 'profiles': ['1g.10gb']}]},
     ['mig_layouts[0] must have exactly the keys gpus and layout', 'it has no layout', 'profiles is not one of them']),
    ('mig', {'mig_layouts': ['all-1g.10gb']}, ['mig_layouts[0] is the string "all-1g.10gb"', 'each entry is a mapping']),
    ('mig', {'mig_layouts': 'all-1g.10gb'}, ['mig_layouts is the string "all-1g.10gb"', 'give a list of layout entries']),
    ('mig', {'mig_gpu_target': 'gpufleet-gpu.service'}, ['mig_gpu_target', '"gpufleet-gpu.service"', 'unit name']),
    ('mig', {'mig_boot_unit_name': 'gpufleet mig.service'}, ['mig_boot_unit_name', '"gpufleet mig.service"']),
    ('mig', {'mig_reboot_timeout': 0}, ['mig_reboot_timeout is the integer 0', '1 or more']),
    ('mig', {'mig_boot_timeout_sec': '5m'}, ['mig_boot_timeout_sec is the string "5m"', 'such as 300']),
    ('mig', {'mig_config_dir': 'etc/gpufleet'}, ['mig_config_dir is the string "etc/gpufleet"', 'absolute path']),
    ('mig', {'mig_gpu_reset_command': []}, ['mig_gpu_reset_command']),
]

# (role, variables over the defaults): each a good value for a rule above, some in the form -e or INI gives.
ACCEPTED = [
    ('nvidia_driver', {'nvidia_driver_branch': 580, 'nvidia_driver_version': '580.95.05'}),
    ('nvidia_driver', {'nvidia_driver_package_version': '570.133.20-0ubuntu1'}),
    ('nvidia_driver', {'nvidia_driver_key_fingerprints': ['EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC']}),
    ('nvidia_driver', {'nvidia_driver_repo_url': 'file:///srv/mirror/cuda', 'nvidia_driver_repo_key_url': ''}),
    ('nvidia_driver', {'nvidia_driver_packages': ['nvidia-driver-570-open'], 'nvidia_driver_reboot_timeout': '600'}),
    ('nvidia_driver', {'nvidia_driver_module_signing_key': '/var/lib/mok/MOK.priv',
                       'nvidia_driver_module_signing_cert': '/var/lib/mok/MOK.der'}),
    ('cuda', {'cuda_toolkits': [{'release': '12.8', 'version': '12.8.1-1'}, {'release': '12.10', 'version': '12.10.0-1'}],
              'cuda_default_release': '12.10'}),
    ('cuda', {'cuda_repo_url': 'https://mirror.example.com/cuda/ubuntu2204/x86_64'}),
    ('container_toolkit', {'container_toolkit_version': '1.17.4-1', 'container_toolkit_runtimes': ['docker', 'containerd']}),
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': ['10.20.0.0/24', 'FD00::/64'], 'dcgm_exporter_listen_port': '9400'}),
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': ['10.20.0.0/24'], 'dcgm_exporter_mode': 'container',
                       'dcgm_exporter_version': 'ignored in container mode', 'dcgm_exporter_cuda_major': 12}),
    ('dcgm_exporter', {'dcgm_exporter_management_cidrs': ['10.20.0.0/24'],
                       'dcgm_exporter_tls_cert_file': '/etc/ssl/exporter.pem', 'dcgm_exporter_tls_key_file': '/etc/ssl/exporter.key',
                       'dcgm_exporter_basic_auth_users': {'prometheus': '$2y$10$' + 'a' * 53}}),
    ('mps', {'mps_daemons': [dict(DAEMON, default_active_thread_percentage='50', clients=[
        {'name': 'llm', 'active_thread_percentage': 25.5}])], 'mps_time_slicing_devices': ['GPU-1']}),
    ('mps', {'mps_pipe_root': '/run/gpufleet-mps/a', 'mps_log_root': '/var/log/mps'}),
    ('gpu_watchdog', {'gpu_watchdog_memory_budget_percent': '85', 'gpu_watchdog_service_budgets': {'imagegen': 80.5}}),
    ('gpu_watchdog', {'gpu_watchdog_interval_sec': '60', 'gpu_watchdog_rate_limit_window_sec': 60,
                      'gpu_watchdog_xid_event_wait_ms': 59999, 'gpu_watchdog_max_remote_fraction': '0.5'}),
    ('gpu_watchdog', {'gpu_watchdog_fleet_max_quarantined': '2', 'gpu_watchdog_fleet_prometheus_url': 'http://10.20.3.41:9090',
                      'gpu_watchdog_mig_unit': '', 'gpu_watchdog_environment': {'CUDA_VISIBLE_DEVICES': 0}}),
    ('gpu_services', {'gpu_services_reserved_cpus': '0-1,32-33', 'gpu_services_container_command': '/opt/podman/bin/podman',
                      'gpu_services_device_allow': ['/dev/nvidia-caps', 'char-nvidia-caps'],
                      'gpu_services_mps_unit_prefix': 'nvidia-mps@'}),
    ('gpu_services', {'gpu_services_services': [
        {'name': 'llm', 'gpus': '2', 'cpus': 'all', 'command': '/opt/llm/bin/serve --port 8000'},
        {'name': 'web', 'gpus': 0, 'mode': 'container', 'image': 'registry.example.com/web:1', 'command': '--port 80'},
        {'name': 'share', 'gpus': {'mps': {'device': 'GPU-1', 'pinned_mem_limit': '20G'}}, 'command': '/opt/s'}]}),
    ('mig', {'mig_layouts': [], 'mig_parted_config_file': '/etc/gpufleet/mig.yaml', 'mig_parted_config_name': 'all-1g',
             'mig_reboot_timeout': '600', 'mig_gpu_service_units': ['gpufleet-svc-llm.service']}),
    ('mig', {'mig_layouts': [{'gpus': [0, 1], 'layout': {'3g.40gb': 2}}], 'mig_gpu_target': 'gpu.target',
             'mig_boot_unit_name': 'nvidia-mig@0.service'}),
    ('monitoring', {'monitoring_alertmanagers': ['[fd00::9]:9093'], 'monitoring_api_url': '',
                    'monitoring_install_prometheus': False, 'monitoring_scrape_config_file': '/etc/prometheus/gpufleet.yml'}),
]


def _values(role, changes):
    values = defaults(role)
    if role == 'gpu_watchdog':  # the defaults that are templates, as the role renders them without gpu_services
        values.update(gpu_watchdog_plan_file='/etc/gpufleet/placement.json', gpu_watchdog_mps_unit_prefix='gpufleet-mps@')
    if role == 'dcgm_exporter':
        values['dcgm_exporter_management_cidrs'] = ['10.20.0.0/24']
    if role == 'mig':  # the role has nothing to apply without a layout, and refuses to run so
        values['mig_layouts'] = [{'gpus': 'all', 'layout': {'1g.10gb': 7}}]
    if role == 'gpu_services':  # a default that is a template, as the role renders it without the mps role
        values['gpu_services_mps_daemons'] = []
    values.update(changes)
    return values


@pytest.mark.parametrize('role, changes, fragments', REFUSED, ids=['%s-%d' % (case[0], n) for n, case in enumerate(REFUSED)])
def test_refused_naming_the_variable_and_value(role, changes, fragments):
    problems = check_role_values(role, _values(role, changes))
    assert problems, 'accepted: %r' % (changes,)
    text = ' | '.join(problems)
    missing = [fragment for fragment in fragments if fragment not in text]
    assert not missing, 'the message lacks %r: %s' % (missing, text)
    for problem in problems:
        assert 'Traceback' not in problem and 'Error' not in problem, problem


@pytest.mark.parametrize('role, changes', ACCEPTED, ids=['%s-%d' % (case[0], n) for n, case in enumerate(ACCEPTED)])
def test_accepted(role, changes):
    assert check_role_values(role, _values(role, changes)) == []


@pytest.mark.parametrize('role', sorted(CHECKERS))
def test_the_role_defaults_pass(role):
    assert check_role_values(role, _values(role, {})) == []


# The guards that were Jinja patterns in the preflights (tests/unit/roles/test_jinja_escapes.py held them), held to
# the same values: a trailing line break fails.
@pytest.mark.parametrize('role, variable, accepted, refused', [
    ('gpu_watchdog', 'gpu_watchdog_mig_unit', ['gpufleet-mig.service', 'nvidia-mig@0:1.service'],
     ['gpufleet-mig.service\n', 'gpufleet-migXservice', 'gpufleet-mig.target', 'a b.service']),
    ('mps', 'mps_pipe_root', ['/run/gpufleet-mps', '/run/a/b.c'],
     ['/run/gpufleet-mps\n', '/run/../etc', '/run/.', '/run/a/', '/runx', '/run']),
    ('mps', 'mps_time_slicing_devices', [[], ['GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60', 'MIG-0c8d7b3e-7f1a-5a2b']],
     [['GPU-1\n'], ['gpu-1'], ['GPU-'], ['MIG-GPU-5c6f7a2e/1/0'], ['GPU-1 '], ['/dev/nvidia0']]),
    ('nvidia_driver', 'nvidia_driver_package_version', ['570.133.20-1', '1:4.2.3-1'], ['570.133.20', '570.133.20-1\n']),
    ('monitoring', 'monitoring_prometheus_service', ['prometheus', 'prometheus@main.service', ''],
     ['prometheus\n', 'prom etheus', 'prometheus;']),
    ('gpu_services', 'gpu_services_unit_prefix', ['gpufleet-svc-', 'a.b_c-1'],
     ['gpufleet-svc-\n', 'gpufleet/svc', 'svc@x', '']),
    # The path rule: a '..' component is refused, a name with dots is not.
    ('gpu_services', 'gpu_services_plan_file', ['/etc/gpufleet/placement.json', '/a', '/etc/..x/p', '/etc/a..b/p'],
     ['/etc/gpufleet/placement.json\n', 'etc/placement.json', '/etc/gpufleet/', '/etc/../x', '/etc/gpufleet/..']),
])
def test_a_guard_accepts_and_refuses_what_the_preflight_did(role, variable, accepted, refused):
    assert [value for value in accepted if check_role_values(role, _values(role, {variable: value}))] == []
    assert [value for value in refused if not check_role_values(role, _values(role, {variable: value}))] == []


def test_every_role_has_refused_and_accepted_cases():
    assert set(case[0] for case in REFUSED) == set(CHECKERS) == set(case[0] for case in ACCEPTED)


def test_a_role_without_a_checker_and_missing_variables():
    assert check_role_values('apt_pinned', {'apt_pinned_packages': 'x'}) == []
    assert check_role_values('cuda', {}) == []  # nothing given, nothing checked: the caller fills in the defaults


def test_the_monitoring_checker_knows_the_roles_own_job_names():
    with open(os.path.join(REPO, 'roles', 'monitoring', 'vars', 'main.yml')) as handle:
        found = yaml.safe_load(handle)
    assert MONITORING_JOBS == (found['_monitoring_dcgm_job'], found['_monitoring_node_job'], 'prometheus')
