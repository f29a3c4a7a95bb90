# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading the fleet report's page back: a small element tree (the standard library's HTML parser), the drawings
and their counts, and a geometry check of every drawing made from the elements' own attributes.

The same code reads the renderer's HTML in the unit tests and the DOM headless Chromium dumps
(tests/integration/report_chromium.py). Attribute names come lowercased (viewbox, textlength), as the parser gives
them.
"""

from __future__ import absolute_import, division, print_function

import re
from html.parser import HTMLParser

VOID = ('meta', 'br', 'hr', 'img', 'input', 'link', 'source', 'wbr', 'area', 'base', 'col', 'embed', 'param', 'track')
# What would make a browser fetch something, in the page's text.
FETCHES = re.compile(r'https?://|\bsrc\s*=|url\(|@import|<script|<link|<iframe|<object|<embed|<img', re.I)


class Element(object):
    def __init__(self, tag, attrs, parent=None):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, dict(attrs), parent, [], ''

    def classes(self):
        return (self.attrs.get('class') or '').split()

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag=None, cls=None):
        return [element for element in self.iter() if (tag is None or element.tag == tag)
                and (cls is None or cls in element.classes())]

    def all_text(self):
        return self.text + ''.join(child.all_text() for child in self.children)


class _Parser(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.root = self.current = Element('#document', {})

    def handle_starttag(self, tag, attrs):
        element = Element(tag, attrs, self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, attrs, self.current))

    def handle_endtag(self, tag):
        element = self.current
        while element is not None and element.tag != tag:
            element = element.parent
        if element is not None and element.parent is not None:
            self.current = element.parent

    def handle_data(self, data):
        self.current.text += data


def parse(text):
    parser = _Parser()
    parser.feed(text)
    parser.close()
    return parser.root


def drawings(root):
    """Host name -> its <svg> drawing."""
    return dict((svg.attrs.get('data-host'), svg) for svg in root.find_all('svg', 'topology'))


def counts(svg):
    """What a drawing holds, counted from its elements (not from its data-* claims)."""
    return {
        'nodes': len([g for g in svg.find_all('g', 'numa-node') if 'unknown' not in g.classes()]),
        'gpus': len(svg.find_all('g', 'gpu')),
        'mig-instances': len(svg.find_all('rect', 'mig-instance')),
        'mps-shares': len(svg.find_all('rect', 'mps-share')),
        'services': len(svg.find_all('g', 'service')),
        'cross-links': len(svg.find_all('path', 'cross-link')),
    }


def claimed(svg):
    """The same counts as the drawing's data-* attributes say them."""
    return dict((key, int(svg.attrs['data-' + key])) for key in counts(svg))


def _float(value):
    return float(value or 0)


def box_of(element):
    """(x, y, width, height) of a rect, text or path, from its attributes; None for other elements."""
    attrs = element.attrs
    if element.tag == 'rect':
        return (_float(attrs.get('x')), _float(attrs.get('y')), _float(attrs.get('width')), _float(attrs.get('height')))
    if element.tag == 'text':
        size, width = _float(attrs.get('font-size')), _float(attrs.get('textlength'))
        x = _float(attrs.get('x'))
        left = {'start': x, 'middle': x - width / 2.0, 'end': x - width}[attrs.get('text-anchor', 'start')]
        return (left, _float(attrs.get('y')) - size * 0.8, width, size)
    if element.tag == 'path':
        numbers = [float(number) for number in re.findall(r'-?\d+(?:\.\d+)?', attrs.get('d', ''))]
        xs, ys = numbers[0::2], numbers[1::2]
        return (min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys))
    return None


def _inside(box, outer, slack=0.05):
    x, y, w, h = box
    ox, oy, ow, oh = outer
    return x >= ox - slack and y >= oy - slack and x + w <= ox + ow + slack and y + h <= oy + oh + slack


def geometry_problems(svg):
    """Every element outside the drawing's viewBox, or outside the box of a group it belongs to (data-box); links
    between nodes (paths) are held to the viewBox only. Text without textLength counts as a problem: its width
    would be the browser's guess."""
    problems = []
    view = [float(number) for number in svg.attrs.get('viewbox', '').split()]
    if len(view) != 4:
        return ['no viewBox']
    for element in svg.iter():
        box = box_of(element)
        if box is None:
            continue
        label = '%s %s %r' % (element.tag, element.attrs.get('class', ''), element.all_text()[:30])
        if element.tag == 'text' and 'textlength' not in element.attrs:
            problems.append('%s has no textLength' % label)
        if not _inside(box, view):
            problems.append('%s at %r is outside the viewBox %r' % (label, box, view))
        if element.tag == 'path':
            continue
        group = element.parent
        while group is not None and group is not svg:
            if group.tag == 'g' and 'data-box' in group.attrs:
                outer = [float(number) for number in group.attrs['data-box'].split()]
                if not _inside(box, outer):
                    problems.append('%s at %r is outside its %s box %r' % (label, box, group.attrs.get('class'), outer))
            group = group.parent
    return problems


def fetches(text):
    """What in the page's text could make a browser fetch something: a crude check of the raw text, for a page whose
    texts hold no such words (escaped text from inventory can)."""
    return sorted(set(match.group(0) for match in FETCHES.finditer(text)))


FETCHING_TAGS = ('script', 'link', 'img', 'iframe', 'object', 'embed', 'video', 'audio', 'source', 'image', 'use',
                 'frame', 'base', 'form', 'input')
FETCHING_ATTRIBUTES = ('src', 'href', 'xlink:href', 'srcset', 'data', 'poster', 'action', 'background')


def fetching_elements(root):
    """Elements and attributes that could make a browser fetch something, or run something: the parsed page's
    markup, whatever its texts say."""
    found = []
    for element in root.iter():
        if element.tag in FETCHING_TAGS:
            found.append('<%s>' % element.tag)
        for name, value in element.attrs.items():
            if name in FETCHING_ATTRIBUTES or name.startswith('on'):
                found.append('%s attribute on <%s>' % (name, element.tag))
            elif value and re.search(r'url\(|https?:|@import', value, re.I):
                found.append('%s=%r on <%s>' % (name, value, element.tag))
        if element.tag == 'style' and re.search(r'url\(|https?:|@import', element.text, re.I):
            found.append('a fetch in <style>')
    return found
