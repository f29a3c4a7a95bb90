# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One host's SVG drawing in the fleet report: sockets, NUMA nodes with their CPUs and memory, GPUs with their MIG
slices and MPS shares, and one row per service under the nodes it touches.

It draws a host of the report's data (model.py's, or a previous report's JSON), never a fact.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from html import escape

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import geometry
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.canvas import PAD, SMALL, Canvas, text_width
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.words import audit_words, gib, placement_words

WIDTH = 660
GAP = 10
# The narrowest a node's column gets: a host with many nodes is drawn wider.
COLUMN_WIDTH = 160
# A service's mark at the end of its row, by its audit.
AUDIT_MARKS = {'pass': '\u2713', 'pass-remote': '\u2713', 'fail': '\u2717 FAILED', 'missing': '? not audited',
               'none': 'not audited'}


def _audit_class(service):
    return 'audit-' + service['audit']['state']


def _service_title(service):
    audit = service['audit']
    words = audit_words(audit)
    reasons = ('; ' + '; '.join(audit['reasons'])) if audit['reasons'] else ''
    return '%s: %s; audit %s%s' % (service['name'], placement_words(service), words, reasons)


def _ordered(services):
    """Services across nodes first: their links then stay short and cross no other service's row."""
    return sorted(services, key=lambda service: not service['cross_node'])


def _columns(topology):
    """One column per NUMA node, and one for GPUs whose node nobody knows."""
    columns = [{'node': node['id'], 'data': node} for node in topology['nodes']]
    if any(gpu['node'] is None for gpu in topology['gpus']):
        columns.append({'node': None, 'data': None})
    return columns


def _gpu_height(gpu):
    return 58 if gpu['mig'] else 40


def _draw_without_topology(host):
    canvas = Canvas(WIDTH)
    box = (PAD, PAD, WIDTH - 2 * PAD, 44)
    canvas.rect(box, 'missing', rx=4)
    canvas.text(PAD * 2, PAD + 18, 'No topology facts for %s' % host['name'], box[2] - 2 * PAD, box)
    canvas.text(PAD * 2, PAD + 34, '; '.join(host['missing'] + ([host['failure']] if host['failure'] else [])),
                box[2] - 2 * PAD, box, size=SMALL)
    return canvas.svg('%s: no topology facts' % host['name'],
                      {'host': escape(host['name'], True), 'nodes': 0, 'gpus': 0, 'mig-instances': 0,
                       'mps-shares': 0, 'services': 0, 'cross-links': 0})


def _draw_users(canvas, box, users, within):
    """Services on one device side by side: MPS shares by their thread percentage, services that share the device
    (exclusive: false) in equal parts. Returns the number of MPS shares drawn."""
    x, y, w, h = box
    shares = [service for service in users if service['mps_device']]
    total = float(max(100, sum(service['mps_percentage'] for service in shares)))
    cursor = x
    for service in users:
        part = w * service['mps_percentage'] / total if service['mps_device'] else w / float(len(users))
        part_box = (cursor, y, max(part - 0.5, 1), h)
        cls = 'use mps-share ' if service['mps_device'] else 'use '
        canvas.rect(part_box, cls + _audit_class(service), within, _service_title(service))
        label = service['name'] + (' %d%%' % service['mps_percentage'] if service['mps_device'] else '')
        canvas.text(cursor + 3, y + 10, label, part - 6, part_box, size=SMALL, cls='on-fill')
        cursor += part
    return len(shares)


class _HostDrawing:
    """The drawing of a host with a topology, drawn part by part onto one canvas; ``counts`` what it drew."""

    def __init__(self, host):
        self.host = host
        self.topology = host['topology']
        self.services = host['services']
        self.columns = _columns(self.topology)
        self.width = max(WIDTH, len(self.columns) * COLUMN_WIDTH + 2 * PAD)
        self.canvas = Canvas(self.width)
        self.col_w = (self.width - 2 * PAD - (len(self.columns) - 1) * GAP) / float(len(self.columns))
        for position, column in enumerate(self.columns):
            column['x'] = PAD + position * (self.col_w + GAP)
        self.owner = {}
        for service in self.services:
            for cpu in service['cpus']:
                self.owner.setdefault(cpu, service)
        # Devices -> the services on them (MPS shares share one device).
        self.on_device = {}
        for service in self.services:
            for device in service['devices']:
                self.on_device.setdefault(device['uuid'], []).append(service)
        self.counts = {'nodes': 0, 'gpus': 0, 'mig-instances': 0, 'mps-shares': 0, 'services': len(self.services),
                       'cross-links': 0}

    def draw(self):
        top = PAD
        self._place_sockets(top)
        node_top = top + 18
        layout = [self._column_layout(column) for column in self.columns]
        node_height = max(item['height'] for item in layout)
        self._draw_sockets(node_height)
        for item in layout:
            self._draw_column(item, node_top, node_height)
        self._draw_services(node_top, node_height)
        counts = dict(self.counts, host=escape(self.host['name'], True))
        return self.canvas.svg('%s: %d NUMA nodes, %d GPUs, %d services' % (
            self.host['name'], counts['nodes'], counts['gpus'], len(self.services)), counts)

    def _place_sockets(self, top):
        """Sockets: the fact counts them; nodes go to sockets in order when the count divides evenly (one or more
        nodes per socket), which is how the kernel numbers them. Otherwise the count is only written."""
        cpu_columns = [column for column in self.columns if column['data'] and column['data']['cpus']]
        sockets = self.topology['sockets'] or 0
        if sockets and cpu_columns and len(cpu_columns) % sockets == 0:
            per = len(cpu_columns) // sockets
            for socket in range(sockets):
                group = cpu_columns[socket * per:(socket + 1) * per]
                group[0]['socket_start'] = socket
                group[0]['socket_box'] = (group[0]['x'] - 4, top, group[-1]['x'] + self.col_w - group[0]['x'] + 8, 0)
        else:
            self.canvas.text(PAD, top + 11, '%s socket(s); which node is on which is not in the facts' % (sockets or '?'),
                             self.width - 2 * PAD, (0, 0, self.width, 10000), size=SMALL, cls='note')

    def _column_layout(self, column):
        """A column's parts and height: header (2 lines), CPU grid, memory bar, then its GPUs."""
        node = column['data']
        cpus = node['cpus'] if node else []
        per_row = max(1, min(32, len(cpus))) if cpus else 1
        cell = min(12.0, (self.col_w - 12) / per_row)
        rows = int(math.ceil(len(cpus) / float(per_row))) if cpus else 0
        gpus = [gpu for gpu in self.topology['gpus'] if gpu['node'] == column['node']]
        height = 36 + (rows * cell + 6 if rows else 14) + (16 if node else 0) + sum(_gpu_height(gpu) + 6 for gpu in gpus) + 4
        return {'column': column, 'node': node, 'cpus': cpus, 'per_row': per_row, 'cell': cell, 'rows': rows,
                'gpus': gpus, 'height': height}

    def _draw_sockets(self, node_height):
        for column in self.columns:
            if 'socket_box' in column:
                x, y, w, _h = column['socket_box']
                box = (x, y, w, node_height + 22)
                self.canvas.rect(box, 'socket', rx=6)
                self.canvas.text(x + 6, y + 12, 'socket %d' % column['socket_start'], w - 12, box, size=SMALL, cls='label')

    def _draw_column(self, item, node_top, node_height):
        node, cpus, x = item['node'], item['cpus'], item['column']['x']
        box = (x, node_top, self.col_w, node_height)
        self._draw_node_header(node, cpus, x, node_top, box)
        y = node_top + 36
        if cpus:
            self._draw_cpus(item, x, y, box)
            y += item['rows'] * item['cell'] + 6
        elif node is not None:
            y += 14
        inner = self.col_w - 12
        if node is not None:
            # Free memory is left out: it changes from run to run, and the report must not when the fleet does not.
            self.canvas.rect((x + 6, y, inner, 8), 'memory', box, 'memory of node %d: %s' % (node['id'], gib(node['memory_mb'])))
            y += 16
        for gpu in item['gpus']:
            self._draw_gpu(gpu, (x + 6, y, inner, _gpu_height(gpu)), box)
            y += _gpu_height(gpu) + 6
        self.canvas.close()

    def _draw_node_header(self, node, cpus, x, node_top, box):
        """Opens the node's group: its frame, its name and memory, its CPU list."""
        canvas, inner = self.canvas, self.col_w - 12
        if node is None:
            canvas.open('numa-node unknown', box, node='unknown')
            canvas.rect(box, 'node unknown', rx=4)
            canvas.text(x + 6, node_top + 14, 'node unknown', inner, box, cls='title')
            canvas.text(x + 6, node_top + 28, 'GPUs whose NUMA node no one reports', inner, box, size=SMALL)
            return
        self.counts['nodes'] += 1
        canvas.open('numa-node', box, node=node['id'], cpus=len(cpus), reserved=len(node['reserved']))
        canvas.rect(box, 'node' if cpus else 'node memory-only', rx=4)
        canvas.text(x + 6, node_top + 14, 'node %d' % node['id'], inner / 2.0, box, cls='title')
        canvas.text(x + self.col_w - 6, node_top + 14, '%s' % gib(node['memory_mb']), inner / 2.0, box, anchor='end')
        reserved = ' (reserved %s)' % format_cpulist(node['reserved']) if node['reserved'] else ''
        canvas.text(x + 6, node_top + 28, ('CPUs %s%s' % (node['cpulist'], reserved)) if cpus else 'no CPUs (memory only)',
                    inner, box, size=SMALL)

    def _draw_cpus(self, item, x, y, box):
        """One cell per CPU: a service's in its audit colour, reserved dark, free grey."""
        per_row, cell = item['per_row'], item['cell']
        for position, cpu in enumerate(item['cpus']):
            cx = x + 6 + (position % per_row) * cell
            cy = y + (position // per_row) * cell
            service = self.owner.get(cpu)
            if service is not None:
                cls, title = 'cpu ' + _audit_class(service), 'CPU %d: %s' % (cpu, service['name'])
            elif cpu in item['node']['reserved']:
                cls, title = 'cpu reserved', 'CPU %d: reserved' % cpu
            else:
                cls, title = 'cpu free', 'CPU %d: free' % cpu
            self.canvas.rect((cx, cy, cell - 1, cell - 1), cls, box, title)

    def _draw_gpu(self, gpu, gbox, box):
        canvas = self.canvas
        x, y, inner, _height = gbox
        self.counts['gpus'] += 1
        canvas.open('gpu', gbox, uuid=gpu['uuid'], index=gpu['index'] if gpu['index'] is not None else '',
                    mig_instances=len(gpu['instances']))
        canvas.rect(gbox, 'gpu', box, '%s %s %s (%s)' % (gpu['label'], gpu['model'], gpu['uuid'], gib(gpu['memory_mb'])), rx=3)
        canvas.text(x + 5, y + 13, '%s %s %s' % (gpu['label'], gpu['model'].replace('NVIDIA ', ''), gib(gpu['memory_mb'])),
                    inner - 10, gbox)
        bar_w = inner - 10
        if gpu['mig']:
            # By the model's name: the report's JSON, which a later run draws again, has no profile table.
            shape = geometry(gpu['model'])
            compute, memory = shape.compute_slices, shape.memory_slices
            self._draw_slice_bar(gpu, gbox, y + 19, bar_w, compute, 'compute')
            self._draw_slice_bar(gpu, gbox, y + 37, bar_w, memory, 'memory')
            self.counts['mig-instances'] += len(gpu['instances'])
        else:
            users = self.on_device.get(gpu['uuid'], [])
            ibox = (x + 5, y + 19, bar_w, 14)
            canvas.rect(ibox, 'whole-gpu', gbox)
            self.counts['mps-shares'] += _draw_users(canvas, ibox, users, gbox)
            if not users:
                canvas.text(ibox[0] + 4, y + 29, 'free', bar_w - 8, ibox, size=SMALL, cls='label')
        canvas.close()

    def _draw_slice_bar(self, gpu, gbox, by, bar_w, slices, word):
        """A MIG GPU's compute (upper) or memory (lower) slices, with its instances to scale on them; the services on
        an instance are drawn on its compute span."""
        start_key, size_key = word + '_start', word + '_slices'
        slot = bar_w / float(slices)
        for number in range(slices):
            self.canvas.rect((gbox[0] + 5 + number * slot, by, slot - 1, 14), 'slot', gbox,
                             '%s slice %d of %d' % (word, number + 1, slices))
        for instance in gpu['instances']:
            ibox = (gbox[0] + 5 + instance[start_key] * slot, by, instance[size_key] * slot - 1, 14)
            self.canvas.rect(ibox, 'mig-instance' if word == 'compute' else 'mig-memory', gbox,
                             '%s@%d (%s slices %d-%d)' % (instance['profile'], instance['memory_start'], word,
                                                          instance[start_key] + 1, instance[start_key] + instance[size_key]))
            users = [s for uuid in instance['uuids'] for s in self.on_device.get(uuid, [])] if word == 'compute' else []
            if users:
                self.counts['mps-shares'] += _draw_users(self.canvas, ibox, users, gbox)
            else:
                self.canvas.text(ibox[0] + ibox[2] / 2.0, by + 10, instance['profile'], ibox[2] - 2, ibox,
                                 size=SMALL, anchor='middle', cls='on-fill')

    def _draw_services(self, node_top, node_height):
        """One row per service, under the columns it touches; a cross-node link joins the nodes it spans."""
        y = node_top + node_height + 30
        for service in _ordered(self.services):
            self._draw_service(service, y, node_top + node_height)
            y += 24
        if not self.services:
            self.canvas.text(PAD, y + 10, 'no services planned on this host', self.width - 2 * PAD,
                             (0, 0, self.width, y + 20), size=SMALL, cls='note')

    def _draw_service(self, service, y, nodes_bottom):
        canvas, col_w = self.canvas, self.col_w
        index = dict((column['node'], column) for column in self.columns)
        touched = [index[node] for node in service['nodes'] if node in index] or [self.columns[0]]
        left = min(column['x'] for column in touched)
        right = max(column['x'] + col_w for column in touched)
        sbox = (left, y, right - left, 18)
        canvas.open('service', sbox, service=service['name'], audit=service['audit']['state'],
                    nodes=format_cpulist(service['nodes']), cross_node=str(service['cross_node']).lower())
        canvas.rect(sbox, 'service-chip ' + _audit_class(service), None, _service_title(service), rx=9)
        fraction = service['audit']['remote_fraction']
        tail = '%s%s' % (AUDIT_MARKS[service['audit']['state']], ' %.1f%% remote' % (fraction * 100) if fraction is not None else '')
        devices = ' '.join(device['label'] for device in service['devices']) or 'no GPU'
        share = ' MPS %d%%' % service['mps_percentage'] if service['mps_device'] else ''
        tail_room = min(text_width(tail, SMALL) + 2, sbox[2] / 2.0)
        canvas.text(left + 9, y + 13, '%s  CPUs %s  %s%s' % (service['name'], service['cpulist'] or '-', devices, share),
                    sbox[2] - tail_room - 22, sbox, size=SMALL, cls='on-fill')
        canvas.text(right - 9, y + 13, tail, tail_room, sbox, size=SMALL, cls='on-fill', anchor='end')
        if service['cross_node'] and len(touched) > 1:
            self.counts['cross-links'] += 1
            points = []
            for column in sorted(touched, key=lambda item: item['x']):
                cx = column['x'] + col_w / 2.0
                points.extend([(cx, nodes_bottom), (cx, y), (cx, nodes_bottom)])
            canvas.line(points, 'cross-link', (0, 0, self.width, y + 18))
        canvas.close()


def draw_host(host):
    """The host's SVG: sockets, NUMA nodes with CPUs and memory, GPUs with MIG slices and MPS shares, services."""
    if host['topology'] is None:
        return _draw_without_topology(host)
    return _HostDrawing(host).draw()
