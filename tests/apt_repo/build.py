# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build signed local apt repositories of stand-in NVIDIA packages, for the install roles' tests.

usage: python3 build.py DEST

Writes DEST/mirror-a and DEST/mirror-b (the same repository, to test switching mirrors), DEST/impostor (the same
packages signed with another key), and DEST/repo.json with the good key's fingerprint. Each mirror is laid out
as NVIDIA's Container Toolkit repository is: a flat repository in deb/<arch>/ and the key as gpgkey. The stand-in packages have the real
names, versions, dependencies and file layout; their programs only pretend. Needs dpkg-deb, dpkg-scanpackages, gpg.
"""

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from gnupg_home import gnupg_home  # next to this script, which is run as a program

VERSIONS = ['1.17.4-1', '1.17.5-1']
# CUDA toolkits install side by side under /usr/local/cuda-X.Y, as NVIDIA's cuda-toolkit-X-Y packages do.
CUDA_TOOLKITS = [('12-6', '12.6.3-1'), ('12-8', '12.8.1-1')]
NVIDIA_CTK = r'''#!/bin/sh
# Stand-in for nvidia-ctk VERSION: `cdi generate --output=FILE` writes a CDI spec naming this host's GPUs.
case "$1 $2" in
  "cdi generate")
    out=/dev/stdout
    for arg in "$@"; do case "$arg" in --output=*) out="${arg#--output=}";; esac; done
    mkdir -p "$(dirname "$out")"
    cat > "$out" <<'SPEC'
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: all
    containerEdits:
      deviceNodes:
        - path: /dev/nvidiactl
containerEdits:
  env:
    - NVIDIA_VISIBLE_DEVICES=void
SPEC
    ;;
  "runtime configure")
    # Like the real one: read FILE, add the nvidia runtime unless present, keep everything else; --dry-run prints.
    runtime= config= dry=
    for arg in "$@"; do case "$arg" in
      --runtime=*) runtime="${arg#--runtime=}";; --config=*) config="${arg#--config=}";; --dry-run) dry=1;; esac; done
    [ "$runtime" = containerd ] || { echo "stand-in configures containerd only" >&2; exit 2; }
    merged=$( { [ -f "$config" ] && cat "$config"
                grep -qF 'runtimes.nvidia]' "$config" 2>/dev/null || printf '%s\n' \
                  '' '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' \
                  '  runtime_type = "io.containerd.runc.v2"' \
                  '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]' \
                  '  BinaryName = "/usr/bin/nvidia-container-runtime"'; } )
    if [ -n "$dry" ]; then printf '%s\n' "$merged"; else printf '%s\n' "$merged" > "$config"; fi
    ;;
  "--version "*) echo "NVIDIA Container Toolkit CLI version VERSION" ;;
  *) echo "nvidia-ctk stand-in: $*" >&2; exit 2 ;;
esac
'''


# The driver as NVIDIA's CUDA repository for Debian 12 ships it: unversioned package names, one version for all.
DRIVER_VERSIONS = ['570.133.20-1', '570.148.08-1']
DRIVER_BRANCH = '570'
# DCGM 4.x package names; the epoch is part of the version apt shows.
DCGM_VERSIONS = ['1:4.2.3-1', '1:4.4.1-1']
EXPORTER_VERSIONS = ['4.1.3-1', '4.2.0-1']
DAEMON = """#!/bin/sh
# Stand-in for PROGRAM: stays up like the real daemon, doing nothing.
exec sleep infinity
"""
NV_HOSTENGINE = """#!/usr/bin/python3
# Stand-in for nv-hostengine: listens where DCGM's host engine does (127.0.0.1:5555), accepts and closes.
import socket
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(('127.0.0.1', 5555))
server.listen(8)
while True:
    server.accept()[0].close()
"""
# Stand-in for dcgm-exporter: next to this script (it reads the NVML simulator's files on a lab host).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'dcgm_exporter_standin.py')) as _standin:
    DCGM_EXPORTER = '#!/usr/bin/python3\n' + _standin.read()


# The stand-in kernel module package's postinst. DKMS builds the module; loading it is the role's (modprobe on a host
# with none loaded) or the next boot's. A lab host (tests/lab) has no nvidia module in its kernel: its stand-in for one,
# /usr/local/lib/gpufleet-lab/nvidia-module, "loads" this version if none is loaded yet, as modprobe would; a loaded one
# of another version stays until the next boot, where the lab's boot script loads the installed one. Elsewhere (the
# molecule scenarios) it does nothing.
MODULE_POSTINST = """#!/bin/sh
set -e
hook=/usr/local/lib/gpufleet-lab/nvidia-module
if [ "$1" = configure ] && [ -x "$hook" ]; then
  "$hook" installed UPSTREAM
fi
exit 0
"""


def unit(description, exec_start):
    return ('[Unit]\nDescription=%s (stand-in)\n\n[Service]\nExecStart=%s\n\n[Install]\nWantedBy=multi-user.target\n'
            % (description, exec_start), 0o644)


def driver_packages(work, arch):
    debs = []
    libdir = '/usr/lib/%s-linux-gnu' % {'amd64': 'x86_64', 'arm64': 'aarch64'}.get(arch, arch)
    for version in DRIVER_VERSIONS:
        upstream = version.split('-', maxsplit=1)[0]
        for flavour in ('nvidia-kernel-open-dkms', 'nvidia-kernel-dkms'):
            debs.append(package(work, flavour, version, arch, '', {
                '/usr/src/nvidia-%s/dkms.conf' % upstream: ('PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\n' % upstream, 0o644)},
                scripts={'postinst': MODULE_POSTINST.replace('UPSTREAM', upstream)}))
        debs.append(package(work, 'nvidia-smi', version, arch, '', {
            '/usr/bin/nvidia-smi': ('#!/bin/sh\necho "NVIDIA-SMI %s (stand-in)"\n' % upstream, 0o755)}))
        debs.append(package(work, 'nvidia-persistenced', version, arch, '', {
            '/usr/bin/nvidia-persistenced': (DAEMON.replace('PROGRAM', 'nvidia-persistenced'), 0o755),
            '/lib/systemd/system/nvidia-persistenced.service': unit(
                'NVIDIA Persistence Daemon', '/usr/bin/nvidia-persistenced --user nvidia-persistenced')}))
        debs.append(package(work, 'nvidia-driver', version, arch,
                            'nvidia-kernel-open-dkms (= {0}) | nvidia-kernel-dkms (= {0}), nvidia-smi (= {0}), '
                            'nvidia-persistenced (= {0})'.format(version),
                            {libdir + '/libnvidia-ml.so.%s' % upstream: ('stand-in\n', 0o644)}))
        debs.append(package(work, 'libnvidia-nscq-%s' % DRIVER_BRANCH, version, arch, '', {
            libdir + '/libnvidia-nscq.so.%s' % upstream: ('stand-in\n', 0o644)}))
        debs.append(package(work, 'nvidia-fabricmanager-%s' % DRIVER_BRANCH, version, arch, '', {
            '/usr/bin/nv-fabricmanager': (DAEMON.replace('PROGRAM', 'nv-fabricmanager'), 0o755),
            '/lib/systemd/system/nvidia-fabricmanager.service': unit(
                'NVIDIA fabric manager service', '/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg')}))
    for version in DCGM_VERSIONS:
        debs.append(package(work, 'datacenter-gpu-manager-4-core', version, arch, '', {
            '/usr/bin/nv-hostengine': (NV_HOSTENGINE, 0o755),
            '/usr/bin/dcgmi': ('#!/bin/sh\necho "dcgmi %s (stand-in)"\n' % version, 0o755),
            '/lib/systemd/system/nvidia-dcgm.service': unit('NVIDIA DCGM service', '/usr/bin/nv-hostengine -n --service-account nvidia-dcgm')}))
        debs.append(package(work, 'datacenter-gpu-manager-4-cuda12', version, arch,
                            'datacenter-gpu-manager-4-core (= %s)' % version,
                            {'/usr/lib/%s-linux-gnu/libdcgm_cublas_proxy12.so.4' % {'amd64': 'x86_64'}.get(arch, arch): ('stand-in\n', 0o644)}))
    for version in EXPORTER_VERSIONS:
        debs.append(package(work, 'datacenter-gpu-manager-exporter', version, arch, 'datacenter-gpu-manager-4-core', {
            '/usr/bin/dcgm-exporter': (DCGM_EXPORTER.replace('VERSION', version), 0o755),
            '/etc/dcgm-exporter/default-counters.csv': ('DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n', 0o644)}))
    return debs


def run(*args, **kwargs):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs).stdout


def package(workdir, name, version, arch, depends, files, scripts=None):
    """A .deb of FILES ({path: (content, mode)}) and maintainer SCRIPTS ({'postinst': text, ...})."""
    root = os.path.join(workdir, '%s_%s' % (name, version))
    os.makedirs(os.path.join(root, 'DEBIAN'))
    for script, content in (scripts or {}).items():
        with open(os.path.join(root, 'DEBIAN', script), 'w') as handle:
            handle.write(content)
        os.chmod(os.path.join(root, 'DEBIAN', script), 0o755)
    for path, (content, mode) in files.items():
        target = os.path.join(root, path.lstrip('/'))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, 'w') as handle:
            handle.write(content)
        os.chmod(target, mode)
    control = ['Package: %s' % name, 'Version: %s' % version, 'Architecture: %s' % arch,
               'Maintainer: gpufleet.core tests <tests@gpufleet.invalid>', 'Section: utils', 'Priority: optional',
               'Description: stand-in for NVIDIA\'s %s (tests only)' % name]
    if depends:
        control.insert(3, 'Depends: %s' % depends)
    with open(os.path.join(root, 'DEBIAN', 'control'), 'w') as handle:
        handle.write('\n'.join(control) + '\n')
    # Repositories leave the epoch out of file names, as dpkg-name does.
    deb = os.path.join(workdir, 'debs', '%s_%s_%s.deb' % (name, version.split(':')[-1], arch))
    os.makedirs(os.path.dirname(deb), exist_ok=True)
    run('dpkg-deb', '--root-owner-group', '-Zgzip', '--build', root, deb)
    return deb


def sign_repository(repo, gnupghome, uid):
    packages = run('dpkg-scanpackages', '--multiversion', '.', cwd=repo)
    with open(os.path.join(repo, 'Packages'), 'wb') as handle:
        handle.write(packages)
    with gzip.open(os.path.join(repo, 'Packages.gz'), 'wb') as handle:
        handle.write(packages)
    lines = ['Origin: gpufleet-test', 'Label: gpufleet-test', 'Suite: stable', 'Codename: stable',
             'Date: Sat, 01 Nov 2025 00:00:00 UTC', 'SHA256:']
    for name in ('Packages', 'Packages.gz'):
        with open(os.path.join(repo, name), 'rb') as handle:
            data = handle.read()
        lines.append(' %s %d %s' % (hashlib.sha256(data).hexdigest(), len(data), name))
    with open(os.path.join(repo, 'Release'), 'w') as handle:
        handle.write('\n'.join(lines) + '\n')
    env = dict(os.environ, GNUPGHOME=gnupghome)
    run('gpg', '--batch', '--yes', '--local-user', uid, '--clearsign', '-o', 'InRelease', 'Release', cwd=repo, env=env)
    run('gpg', '--batch', '--yes', '--local-user', uid, '-abs', '-o', 'Release.gpg', 'Release', cwd=repo, env=env)
    with open(os.path.join(repo, 'gpgkey'), 'wb') as handle:
        handle.write(run('gpg', '--batch', '--armor', '--export', uid, env=env))


def main(argv):
    # argparse, so that --help is help and not a destination called --help, and an option it does not know is refused.
    parser = argparse.ArgumentParser(prog='build.py', description=__doc__.strip().splitlines()[0])
    parser.add_argument('dest', metavar='DEST', help='where to write mirror-a, mirror-b, impostor and repo.json')
    dest = os.path.abspath(parser.parse_args(argv[1:]).dest)
    # Both are removed however the build ends; the GnuPG home only after its agent has stopped (see gnupg_home).
    with tempfile.TemporaryDirectory(prefix='gpufleet-apt-') as work, gnupg_home() as gnupghome:
        build(dest, work, gnupghome)


def build(dest, work, gnupghome):
    env = dict(os.environ, GNUPGHOME=gnupghome)
    fingerprints = {}
    for uid in ('good@gpufleet.invalid', 'impostor@gpufleet.invalid'):
        run('gpg', '--batch', '--passphrase', '', '--quick-gen-key', uid, 'rsa2048', 'sign', 'never', env=env)
        listing = run('gpg', '--batch', '--with-colons', '--fingerprint', uid, env=env).decode()
        fingerprints[uid] = [line.split(':')[9] for line in listing.splitlines() if line.startswith('fpr:')][0]
    arch = run('dpkg', '--print-architecture').decode().strip()
    debs = []
    for version in VERSIONS:
        debs.append(package(work, 'libnvidia-container1', version, arch, '',
                            {'/usr/lib/x86_64-linux-gnu/libnvidia-container.so.1': ('stand-in\n', 0o644)}))
        debs.append(package(work, 'libnvidia-container-tools', version, arch, 'libnvidia-container1 (= %s)' % version,
                            {'/usr/bin/nvidia-container-cli': ('#!/bin/sh\necho stand-in\n', 0o755)}))
        debs.append(package(work, 'nvidia-container-toolkit-base', version, arch, '',
                            {'/usr/bin/nvidia-ctk': (NVIDIA_CTK.replace('VERSION', version), 0o755),
                             '/usr/bin/nvidia-container-runtime': ('#!/bin/sh\nexec runc "$@"\n', 0o755)}))
        debs.append(package(work, 'nvidia-container-toolkit', version, arch,
                            'nvidia-container-toolkit-base (= %s), libnvidia-container-tools (>= %s)'
                            % (version, version),
                            {'/usr/bin/nvidia-container-runtime-hook': ('#!/bin/sh\nexit 0\n', 0o755)}))
    for series, version in CUDA_TOOLKITS:
        dotted = series.replace('-', '.')
        prefix = '/usr/local/cuda-%s' % dotted
        debs.append(package(work, 'cuda-toolkit-%s' % series, version, arch, '', {
            prefix + '/bin/nvcc': ('#!/bin/sh\necho "Cuda compilation tools, release %s (stand-in)"\n' % dotted, 0o755),
            prefix + '/lib64/libcudart.so.%s' % series.split('-', maxsplit=1)[0]: ('stand-in\n', 0o644),
            prefix + '/version.json': ('{"cuda": {"version": "%s"}}\n' % version.split('-', maxsplit=1)[0], 0o644),
        }))
    debs.extend(driver_packages(work, arch))
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    for mirror, uid in (('mirror-a', 'good@gpufleet.invalid'), ('mirror-b', 'good@gpufleet.invalid'),
                        ('impostor', 'impostor@gpufleet.invalid')):
        repo = os.path.join(dest, mirror, 'deb', arch)
        os.makedirs(repo)
        for deb in debs:
            shutil.copy(deb, repo)
        sign_repository(repo, gnupghome, uid)
        shutil.move(os.path.join(repo, 'gpgkey'), os.path.join(dest, mirror, 'gpgkey'))
    with open(os.path.join(dest, 'repo.json'), 'w') as handle:
        json.dump({'good_fingerprint': fingerprints['good@gpufleet.invalid'],
                   'impostor_fingerprint': fingerprints['impostor@gpufleet.invalid'],
                   'versions': VERSIONS, 'driver_versions': DRIVER_VERSIONS, 'dcgm_versions': DCGM_VERSIONS,
                   'exporter_versions': EXPORTER_VERSIONS, 'architecture': arch}, handle, indent=1)


if __name__ == '__main__':
    main(sys.argv)
