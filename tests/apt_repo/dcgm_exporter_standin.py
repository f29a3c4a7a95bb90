# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for dcgm-exporter VERSION (tests/apt_repo/build.py packages it as /usr/bin/dcgm-exporter).

Takes the real flags (-a/--address, -f/--collectors, --web-config-file, -r/--remote-hostengine-info,
-c/--collect-interval) and serves the counters of the CSV at /metrics, over TLS and with basic auth when the web
configuration asks for them (basic auth: any password; the real one checks bcrypt).

On a host whose GPUs are the NVML simulator's (a lab host: /etc/gpufleet-nvml-sim/host.json), each scrape reads the
simulator's files, as DCGM reads the driver: one series per GPU with dcgm-exporter's labels (gpu, UUID, pci_bus_id,
device, modelName, Hostname); frame buffer used and free from the processes' memory (simctl set-process-memory); the
last Xid and, as DCGM_EXP_XID_ERRORS_COUNT{xid=...}, how many of each Xid the driver logged in the last 5 minutes
(simctl inject-xid, lose-gpu); DCGM_FI_DEV_ROW_REMAP_FAILURE from the GPU's `row_remap_failure` in the state (a
test sets it, as a GPU that ran out of spare rows). Counters the simulator has no value for read 0. Without the simulator: one series,
gpu="0", at 0. Only files are read: the exporter runs unprivileged on a read-only system (ProtectSystem=strict).
"""
import argparse
import base64
import http.server
import json
import os
import socket
import ssl
import sys
import time

SIM_HOST = os.environ.get('GPUFLEET_NVML_SIM_HOST') or '/etc/gpufleet-nvml-sim/host.json'
SIM_STATE = os.environ.get('GPUFLEET_NVML_SIM_STATE') or '/var/lib/gpufleet-nvml-sim/state.json'
SIM_MODELS = '/opt/gpufleet-nvml-sim/gpu_models.json'
XID_WINDOW_MS = 300000  # dcgm-exporter's default xid-count window

parser = argparse.ArgumentParser()
parser.add_argument('-a', '--address', default=':9400')
parser.add_argument('-f', '--collectors', default='/etc/dcgm-exporter/default-counters.csv')
parser.add_argument('--web-config-file', default='')
parser.add_argument('-r', '--remote-hostengine-info', default='')
parser.add_argument('-c', '--collect-interval', type=int, default=30000)
parser.add_argument('--version', action='store_true')
args = parser.parse_args()
if args.version:
    print('dcgm-exporter version VERSION (stand-in)')
    sys.exit(0)

counters = []
with open(args.collectors) as handle:
    for line in handle:
        line = line.strip()
        if line and not line.startswith('#'):
            counters.append([field.strip() for field in line.split(',', 2)])


def load(path, default):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def xid_records():
    # As tests/nvml_sim/pynvml.py's xid_log_path: the simulated driver's Xid record beside its state.
    try:
        with open(os.path.splitext(SIM_STATE)[0] + '.xid.jsonl') as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except (OSError, ValueError):
        return []


def gpus():
    """[(labels, {counter: value}, {xid: count in the window})] for each GPU the simulator has."""
    host = load(SIM_HOST, None)
    if not host or not host.get('gpus'):
        return [({'gpu': '0'}, {}, {})]
    models = load(SIM_MODELS, {}).get('models', {})
    state = load(SIM_STATE, {}) or {}
    memory = state.get('process_memory', {})
    records = xid_records()
    since = time.time() - XID_WINDOW_MS / 1000.0
    found = []
    for index, gpu in enumerate(host['gpus']):
        if (state.get('gpus', {}).get(gpu['uuid']) or {}).get('broken'):
            continue  # off the bus for good (simctl break-gpu): DCGM lists no such GPU
        model = models.get(gpu['model'], {})
        total = model.get('memory_mb', 0)
        used = min(total, sum(memory.get(str(process['pid']), process.get('used_memory_mb', 0))
                              for process in state.get('processes', []) if process.get('gpu_uuid') == gpu['uuid']))
        # DCGM starts again with the host: an Xid of an earlier boot is not this one's.
        own = [record for record in records if record.get('gpu_uuid') == gpu['uuid']
               and record.get('time', 0) >= state.get('booted_at', 0)]
        counts = {}
        for record in own:
            if record.get('time', 0) >= since:
                counts[record['xid']] = counts.get(record['xid'], 0) + 1
        labels = {'gpu': str(index), 'UUID': gpu['uuid'], 'pci_bus_id': gpu['pci_bus_id'],
                  'device': 'nvidia%d' % index, 'modelName': model.get('name', gpu['model']),
                  'Hostname': socket.gethostname()}
        values = {'DCGM_FI_DEV_FB_USED': used, 'DCGM_FI_DEV_FB_FREE': total - used,
                  'DCGM_FI_DEV_XID_ERRORS': own[-1]['xid'] if own else 0,
                  'DCGM_FI_DEV_ROW_REMAP_FAILURE': 1 if (state.get('gpus', {}).get(gpu['uuid']) or {}).get(
                      'row_remap_failure') else 0}
        found.append((labels, values, counts))
    return found


def series(name, labels, value):
    return '%s{%s} %s\n' % (name, ','.join('%s="%s"' % item for item in sorted(labels.items())), value)


def body():
    out = []
    devices = gpus()
    for field, kind, *rest in counters:
        out.append('# HELP %s %s\n# TYPE %s %s\n' % (field, rest[0] if rest else '', field, kind))
        for labels, values, counts in devices:
            if field == 'DCGM_EXP_XID_ERRORS_COUNT':
                for xid in sorted(counts):
                    out.append(series(field, dict(labels, xid=str(xid), window_size_in_ms=str(XID_WINDOW_MS)),
                                      counts[xid]))
            else:
                out.append(series(field, labels, values.get(field, 0)))
    return ''.join(out).encode()


tls, users = {}, []
if args.web_config_file:
    section = None
    with open(args.web_config_file) as handle:
        for line in handle:
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            if not line.startswith(' '):
                section = line.split(':')[0].strip()
            elif section == 'tls_server_config':
                key, _, value = line.strip().partition(':')
                tls[key.strip()] = value.strip().strip('"')
            elif section == 'basic_auth_users':
                users.append(line.split(':')[0].strip().strip('"'))


class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get('Authorization', '')
        if users and not (auth.startswith('Basic ') and
                          base64.b64decode(auth[6:]).decode().split(':')[0] in users):
            self.send_response(401)
            self.send_header('WWW-Authenticate', 'Basic')
            self.end_headers()
            return
        self.send_response(200 if self.path == '/metrics' else 404)
        self.send_header('Content-Type', 'text/plain; version=0.0.4')
        self.end_headers()
        if self.path == '/metrics':
            self.wfile.write(body())

    def log_message(self, *_):  # a scrape every few seconds would fill the journal
        pass


host, _, port = args.address.rpartition(':')
server = http.server.HTTPServer((host.strip('[]'), int(port)), Metrics)
if tls:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls['cert_file'], tls['key_file'])
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
