# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Just enough OpenPGP (RFC 4880 / RFC 9580) to dearmor a public key and compute its fingerprints.

Repository keys are verified against pinned fingerprints before apt ever trusts them, on targets
that may have no gpg. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

_PUBLIC_KEY = 6
_PUBLIC_SUBKEY = 14


class OpenPgpError(GpufleetError, ValueError):
    """Data that is not an OpenPGP public key."""


def dearmor(data):
    """Binary key data from ASCII armor; binary data is returned as it is."""
    if not data.lstrip().startswith(b'-----BEGIN PGP PUBLIC KEY BLOCK-----'):
        return data
    lines = data.decode('ascii', 'replace').splitlines()
    body = []
    in_headers = True
    for line in lines[1:]:
        line = line.strip()
        if line.startswith('-----END PGP'):
            break
        if in_headers:
            # Armor headers ("Version: ...") end at the first blank line.
            if not line or ':' not in line:
                in_headers = False
                if not line:
                    continue
            else:
                continue
        if line.startswith('='):
            break  # CRC24 checksum line
        body.append(line)
    try:
        return base64.b64decode(''.join(body), validate=True)
    except (binascii.Error, ValueError):
        raise OpenPgpError('the armored key block is not valid base64')


def packets(binary):
    """(tag, body) for each packet, old and new header formats."""
    position = 0
    while position < len(binary):
        header = binary[position]
        if not header & 0x80:
            raise OpenPgpError('byte %d is not an OpenPGP packet header' % position)
        if header & 0x40:  # new format
            tag = header & 0x3F
            if position + 2 > len(binary):
                raise OpenPgpError('the key data is truncated (%d bytes end inside a packet header)' % len(binary))
            first = binary[position + 1]
            if first < 192:
                length, skip = first, 2
            elif first < 224:
                if position + 3 > len(binary):
                    raise OpenPgpError('the key data is truncated (%d bytes end inside a packet header)'
                                       % len(binary))
                length, skip = ((first - 192) << 8) + binary[position + 2] + 192, 3
            elif first == 255:
                length, skip = int.from_bytes(binary[position + 2:position + 6], 'big'), 6
            else:
                raise OpenPgpError('partial body lengths do not occur in public keys')
        else:
            tag = (header >> 2) & 0x0F
            kind = header & 0x03
            if kind == 3:
                raise OpenPgpError('indeterminate packet lengths do not occur in public keys')
            size = (1, 2, 4)[kind]
            length, skip = int.from_bytes(binary[position + 1:position + 1 + size], 'big'), 1 + size
        if position + skip > len(binary):
            raise OpenPgpError('the key data is truncated (%d bytes end inside a packet header)' % len(binary))
        body = binary[position + skip:position + skip + length]
        if len(body) != length:
            raise OpenPgpError('the key data is truncated')
        yield tag, body
        position += skip + length


def fingerprint(body):
    """Fingerprint of a public-key packet body, in upper-case hex."""
    if not body:
        raise OpenPgpError('a public-key packet is empty')
    version = body[0]
    if version == 4:
        if len(body) > 0xFFFF:
            raise OpenPgpError('a version 4 public-key packet cannot be longer than 65535 bytes')
        return hashlib.sha1(b'\x99' + len(body).to_bytes(2, 'big') + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b'\x9b' + len(body).to_bytes(4, 'big') + body).hexdigest().upper()
    if version == 5:
        return hashlib.sha256(b'\x9a' + len(body).to_bytes(4, 'big') + body).hexdigest().upper()
    raise OpenPgpError('OpenPGP key version %d is not supported' % version)


def primary_fingerprints(data):
    """Dearmored key data and the fingerprints of its primary keys (subkeys are bound to them)."""
    binary = dearmor(data)
    found = [fingerprint(body) for tag, body in packets(binary) if tag == _PUBLIC_KEY]
    if not found:
        raise OpenPgpError('no OpenPGP public key found')
    return binary, found


def normalise(fingerprint_text):
    return ''.join(str(fingerprint_text).split()).upper()
