# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""An SVG canvas for the fleet report's drawings: each element with its box, text cut to the room it has.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from html import escape

from ansible_collections.gpufleet.core.plugins.plugin_utils._report.words import text as as_text

FONT = 11
SMALL = 9
# The drawing's text is monospace, so its width is known here: DejaVu Sans Mono's advance is 0.602 em. Each text
# also gets textLength, so a browser with another font still keeps it inside its box.
CHAR = 0.61
PAD = 10


def text_width(text, size):
    return len(text) * size * CHAR


def _fit(text, size, room):
    """TEXT cut with an ellipsis to fit ROOM pixels at SIZE."""
    most = int(room // (size * CHAR))
    if len(text) <= most:
        return text
    return text[:max(most - 1, 0)] + '\u2026' if most > 0 else ''


def _n(value):
    return ('%.2f' % value).rstrip('0').rstrip('.')


class Canvas:
    """An SVG drawing that knows each element's box, so that it can say whether all of them fit where they belong."""

    def __init__(self, width):
        self.width = width
        self.height = 0
        self.parts = []
        self.overflows = []

    def _check(self, box, within, what):
        x, y, w, h = box
        self.height = max(self.height, y + h)
        if x < -0.01 or y < -0.01 or x + w > self.width + 0.01:
            self.overflows.append(what + ' (outside the drawing)')
        if within is not None:
            bx, by, bw, bh = within
            if x < bx - 0.01 or y < by - 0.01 or x + w > bx + bw + 0.01 or y + h > by + bh + 0.01:
                self.overflows.append(what)

    def open(self, cls, box=None, **data):
        attrs = ''.join(' data-%s="%s"' % (key.replace('_', '-'), escape(as_text(value), True)) for key, value in sorted(data.items()))
        if box is not None:
            attrs += ' data-box="%s"' % ' '.join(_n(value) for value in box)
        self.parts.append('<g class="%s"%s>' % (cls, attrs))

    def close(self):
        self.parts.append('</g>')

    def rect(self, box, cls, within=None, title=None, rx=0):
        x, y, w, h = box
        self._check(box, within, 'rect %s' % cls)
        tip = '<title>%s</title>' % escape(title) if title else ''
        corner = ' rx="%s"' % _n(rx) if rx else ''
        self.parts.append('<rect class="%s" x="%s" y="%s" width="%s" height="%s"%s>%s</rect>' % (
            cls, _n(x), _n(y), _n(w), _n(h), corner, tip))

    def text(self, x, y, text, room, within=None, size=FONT, cls='', anchor='start'):
        """TEXT with its baseline at y, cut to ROOM pixels; x is its start, middle or end by ANCHOR."""
        text = _fit(text, size, room)
        if not text:
            return
        width = text_width(text, size)
        left = {'start': x, 'middle': x - width / 2.0, 'end': x - width}[anchor]
        self._check((left, y - size * 0.8, width, size), within, 'text %r' % text)
        self.parts.append('<text class="%s" x="%s" y="%s" font-size="%s" text-anchor="%s" textLength="%s" '
                          'lengthAdjust="spacingAndGlyphs">%s</text>'
                          % (cls, _n(x), _n(y), size, anchor, _n(width), escape(text)))

    def line(self, points, cls, within=None):
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        self._check((min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)), within, 'path %s' % cls)
        self.parts.append('<path class="%s" d="M%s"/>' % (cls, ' L'.join('%s %s' % (_n(x), _n(y)) for x, y in points)))

    def svg(self, label, counts):
        height = math.ceil(self.height + PAD)
        view = (0, 0, self.width, height)
        data = ''.join(' data-%s="%s"' % (key.replace('_', '-'), value) for key, value in sorted(counts.items()))
        return ('<svg class="topology" viewBox="0 0 %d %d" width="%d" height="%d" '
                'role="img" aria-label="%s"%s data-overflows="%d">%s</svg>' % (
                    view[2], view[3], view[2], view[3], escape(label), data, len(self.overflows), ''.join(self.parts)))
