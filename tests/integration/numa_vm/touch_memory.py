# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in inference service: allocates MIB MiB, writes every page, tells systemd it is ready, then sleeps.

usage: touch_memory.py MIB   (in a Type=notify unit, so starting it returns once every page is placed)
"""

from __future__ import absolute_import, division, print_function

import mmap
import os
import socket
import sys
import time


def notify_ready():
    address = os.environ.get('NOTIFY_SOCKET')
    if not address:
        return
    if address.startswith('@'):
        address = '\0' + address[1:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.connect(address)
        sock.sendall(b'READY=1')
    finally:
        sock.close()


def main(argv):
    size = int(argv[1]) * 1024 * 1024
    memory = mmap.mmap(-1, size)  # anonymous: each page is placed at first touch, by the NUMA policy
    for offset in range(0, size, mmap.PAGESIZE):
        memory[offset] = 1
    notify_ready()
    while True:
        time.sleep(3600)


if __name__ == '__main__':
    main(sys.argv)
