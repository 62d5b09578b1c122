#!/usr/bin/env python3
"""Peers that test ferry's network edge from the outside (issue 18), with python3-websockets
(a strict third-party implementation: it refuses unmasked frames from a client and masked
frames from a server, RFC 6455 section 5.1) or plain sockets.

    edge-peers.py proxy --listen PORTFILE --to ws://127.0.0.1:P/DB
        A strict WebSocket server for ferry's dialer that relays every message to ferry's
        listener through a strict WebSocket client; prints one JSON line per closed session.
    edge-peers.py silent --listen PORTFILE [--tls]
        Accepts TCP and never answers (with --tls: never finishes a handshake either).
    edge-peers.py status --listen PORTFILE --code 503
        Answers every HTTP request with this status; counts the requests.
    edge-peers.py unmasked --url ws://127.0.0.1:P/DB
        Upgrades, then sends one unmasked text frame; prints the close code it gets.
    edge-peers.py flood --url ws://127.0.0.1:P/DB --attempts N --concurrency C --user U
        N upgrade requests with a wrong password, C at a time, each given up after 0.3 s.
    edge-peers.py deaf --url ws://127.0.0.1:P/DB --seconds S
        Upgrades, then reads nothing for S seconds (a close frame is never answered).
    edge-peers.py requests --url ws://127.0.0.1:P/DB --count N
        After hello, sends N getCheckpoint requests as fast as ferry takes them and reads no
        answer; prints how many went out and how the connection ended.
    edge-peers.py slowblob --url ws://127.0.0.1:P/DB --digest sha256-HEX --seconds S
        After hello, asks for a whole blob and reads none of it for S seconds.
    edge-peers.py idle --url ws://127.0.0.1:P/DB --connections N --seconds S
        Opens N TCP connections that send nothing, holds them S seconds.

A PORTFILE receives the bound port once the server listens.
"""
import argparse
import asyncio
import base64
import json
import os
import socket
import struct
import sys
import time
from urllib.parse import urlparse

import websockets


def bound(port_file, server_socket):
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server_socket.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)


async def proxy(args):
    async def session(client, path):
        target = args.to.rsplit("/", 1)[0] + path
        try:
            async with websockets.connect(target, subprotocols=["ferry-1"], max_size=None,
                                          extra_headers=[("Authorization", h) for h in client.request_headers.get_all("Authorization")]) as server:
                async def pump(source, sink):
                    async for message in source:
                        await sink.send(message)
                done, pending = await asyncio.wait([asyncio.ensure_future(pump(client, server)),
                                                    asyncio.ensure_future(pump(server, client))],
                                                   return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                errors = [repr(t.exception()) for t in done if t.exception()]
        except Exception as error:  # a refused upgrade, a protocol error
            errors = [repr(error)]
        print(json.dumps({"session": path, "errors": errors, "client_close": client.close_code}), flush=True)

    server = await websockets.serve(session, "127.0.0.1", 0, subprotocols=["ferry-1"], max_size=None)
    bound(args.listen, server.sockets[0])
    await asyncio.sleep(args.seconds)


def silent(args):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    bound(args.listen, s)
    held = []
    deadline = time.time() + args.seconds
    s.settimeout(0.5)
    while time.time() < deadline:
        try:
            conn, _ = s.accept()
            held.append(conn)
            print(json.dumps({"accepted": len(held)}), flush=True)
        except socket.timeout:
            pass


def status(args):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    bound(args.listen, s)
    s.settimeout(0.5)
    count = 0
    deadline = time.time() + args.seconds
    while time.time() < deadline:
        try:
            conn, _ = s.accept()
        except socket.timeout:
            continue
        conn.settimeout(2)
        data = b""
        try:
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        count += 1
        body = b'{"error":"unavailable"}'
        conn.sendall(b"HTTP/1.1 %d Unavailable\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (args.code, len(body), body))
        conn.close()
        print(json.dumps({"requests": count}), flush=True)


def upgrade_request(url, authorization=None):
    u = urlparse(url)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET %s HTTP/1.1" % u.path, "Host: %s:%d" % (u.hostname, u.port), "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13",
             "Sec-WebSocket-Protocol: ferry-1"]
    if authorization:
        lines.append("Authorization: " + authorization)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def raw_upgrade(url):
    """A plain socket through the upgrade: the socket and the answer's status line."""
    u = urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    s.sendall(upgrade_request(url))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    return s, head.split(b"\r\n")[0]


def unmasked(args):
    u = urlparse(args.url)
    s, status = raw_upgrade(args.url)
    if b" 101 " not in status:
        print(json.dumps({"error": status.decode()}))
        return 1
    data = json.dumps({"type": "hello", "n": 1, "versions": [1], "peer": "unmasked", "db": u.path[1:]}).encode()
    s.sendall(bytes([0x81, 126]) + struct.pack(">H", len(data)) + data if len(data) >= 126 else bytes([0x81, len(data)]) + data)
    received = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
    except socket.timeout:
        pass
    i = received.find(b"\x88")
    code = struct.unpack(">H", received[i + 2:i + 4])[0] if i >= 0 and len(received) >= i + 4 else None
    reason = received[i + 4:i + 2 + received[i + 1]].decode(errors="replace") if code else ""
    print(json.dumps({"close": code, "reason": reason}))
    return 0


async def flood(args):
    u = urlparse(args.url)
    wrong = "Basic " + base64.b64encode(("%s:wrong-%s" % (args.user, os.urandom(4).hex())).encode()).decode()
    answers = {}
    queue = asyncio.Queue()
    for _ in range(args.attempts):
        queue.put_nowait(None)

    async def worker():
        while not queue.empty():
            queue.get_nowait()
            status = "timeout"
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(u.hostname, u.port), 2)
                writer.write(upgrade_request(args.url, wrong))
                await writer.drain()
                line = await asyncio.wait_for(reader.readline(), args.wait)
                status = line.split(b" ")[1].decode() if line.startswith(b"HTTP/1.1 ") else "closed"
                writer.close()
            except (asyncio.TimeoutError, OSError):
                pass
            answers[status] = answers.get(status, 0) + 1

    start = time.time()
    await asyncio.gather(*[worker() for _ in range(args.concurrency)])
    print(json.dumps({"answers": answers, "seconds": round(time.time() - start, 2)}))


def deaf(args):
    s, status = raw_upgrade(args.url)
    print(json.dumps({"upgraded": b" 101 " in status}), flush=True)
    time.sleep(args.seconds)
    s.close()
    return 0


async def hello(args):
    """A strict client (python3-websockets) past ferry's hello; it reads only that answer."""
    database = urlparse(args.url).path[1:]
    ws = await websockets.connect(args.url, subprotocols=["ferry-1"], max_size=None, max_queue=4)
    await ws.send(json.dumps({"type": "hello", "n": 1, "versions": [1], "peer": "edge-peer", "db": database, "features": []}))
    await ws.recv()
    return ws


async def requests(args):
    ws = await hello(args)
    sent = 0
    started = time.time()
    try:
        for n in range(1, args.count + 1):
            await asyncio.wait_for(ws.send(json.dumps({"type": "getCheckpoint", "n": n + 1, "client": "flood"})), 10)
            sent += 1
    except (websockets.ConnectionClosed, asyncio.TimeoutError, OSError):
        pass
    print(json.dumps({"sent": sent, "close": ws.close_code, "reason": ws.close_reason,
                      "seconds": round(time.time() - started, 2)}), flush=True)
    ws.transport.abort()


async def slowblob(args):
    ws = await hello(args)
    await ws.send(json.dumps({"type": "getAttachment", "n": 2, "digest": args.digest}))
    print(json.dumps({"asked": args.digest}), flush=True)
    await asyncio.sleep(args.seconds)
    ws.transport.abort()


def idle(args):
    u = urlparse(args.url)
    held = []
    for _ in range(args.connections):
        try:
            held.append(socket.create_connection((u.hostname, u.port), timeout=2))
        except OSError:
            break
    print(json.dumps({"opened": len(held)}), flush=True)
    time.sleep(args.seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["proxy", "silent", "status", "unmasked", "flood", "deaf", "requests", "slowblob", "idle"])
    parser.add_argument("--listen")
    parser.add_argument("--to")
    parser.add_argument("--url")
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--code", type=int, default=503)
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--wait", type=float, default=0.3)
    parser.add_argument("--user", default="alice")
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("--digest")
    args = parser.parse_args()
    if args.mode == "proxy":
        asyncio.run(proxy(args))
    elif args.mode == "silent":
        silent(args)
    elif args.mode == "status":
        status(args)
    elif args.mode == "unmasked":
        return unmasked(args)
    elif args.mode == "flood":
        asyncio.run(flood(args))
    elif args.mode == "deaf":
        return deaf(args)
    elif args.mode == "requests":
        asyncio.run(requests(args))
    elif args.mode == "slowblob":
        asyncio.run(slowblob(args))
    else:
        idle(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
