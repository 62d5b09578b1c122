#!/usr/bin/env python3
"""A hostile ferry/1 peer over a real WebSocket (python3-websockets, a strict third-party
client that masks its frames as RFC 6455 requires): it connects to a listener and tries one
attack, then prints one JSON line saying what the listener answered.

    hostile-peer.py --url ws://127.0.0.1:PORT/DB --attack NAME

Frames are written by hand from docs/protocol.md, and ferry's revision ids are computed from
docs/format.md, so this is also a check of those documents against the listener.
"""
import argparse
import asyncio
import hashlib
import json
import sys

import websockets


def ferry_rev(parent, deleted, body_hex, merged=None):
    """A ferry revision id, as docs/format.md defines it."""
    text = "ferry-rev-1\0" + (parent or "") + "\0" + ("1" if deleted else "0") + "\0" + (body_hex or "")
    if merged:
        text += "\0" + merged
    generation = int(parent.split("-")[0]) + 1 if parent else 1
    return "%d-%s" % (generation, hashlib.sha256(text.encode()).hexdigest()[:32])


def canonical(value):
    """RFC 8785 for the plain bodies used here (ASCII keys and strings, small integers)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class Peer:
    def __init__(self, ws):
        self.ws = ws
        self.number = 0

    async def request(self, fields, raw_tail=None):
        """Sends a request (optionally with raw JSON text spliced in as its last member) and
        returns the answer to it, answering whatever the listener asks meanwhile."""
        self.number += 1
        fields = dict(fields, n=self.number)
        text = json.dumps(fields, separators=(",", ":"))
        if raw_tail is not None:
            text = text[:-1] + "," + raw_tail + "}"
        await self.ws.send(text)
        return await self.answer_to(self.number)

    async def answer_to(self, number):
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if frame.get("re") == number:
                return frame
            if "n" in frame and not frame.get("noreply"):
                await self.ws.send(json.dumps({"re": frame["n"], "type": "error", "status": 404, "message": "no"}))

    async def hello(self, peer="hostile-peer", db=None):
        return await self.request({"type": "hello", "versions": [1], "peer": peer, "db": db, "features": []})

    async def rev(self, doc, rev, history=(), body=None, blob=None, deleted=False, raw_body=None):
        fields = {"type": "rev", "doc": doc, "rev": rev, "history": list(history), "sequence": self.number + 1}
        if deleted:
            fields["deleted"] = True
        if body is not None:
            fields["body"] = body
        if blob is not None:
            fields["blob"] = blob
        return await self.request(fields, raw_tail=None if raw_body is None else '"body":' + raw_body)

    async def pull(self):
        """Subscribes once; returns the revisions announced (declining each)."""
        self.number += 1
        await self.ws.send(json.dumps({"type": "subChanges", "n": self.number, "since": 0, "continuous": False}))
        announced = []
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if frame.get("type") == "changes":
                if not frame["changes"]:
                    return announced
                announced += [c[2] for c in frame["changes"]]
                await self.ws.send(json.dumps({"re": frame["n"], "type": "response", "answer": [0] * len(frame["changes"])}))
            elif "n" in frame and not frame.get("noreply"):
                await self.ws.send(json.dumps({"re": frame["n"], "type": "response"}))


def outcome(answer):
    return {"status": answer.get("status", 200), "message": answer.get("message", "")}


async def attack(url, db, name):
    async with websockets.connect(url, subprotocols=["ferry-1"], max_size=None) as ws:
        peer = Peer(ws)
        if name == "peer-id-local":
            return outcome(await peer.hello(peer="local", db=db))
        if name == "peer-id-huge":
            return outcome(await peer.hello(peer="x" * (1 << 20), db=db))
        # Posing as the peer `victim`: what it plants must still reach the real `victim`.
        hello = await peer.hello(peer="victim" if name == "impersonate" else "hostile-peer", db=db)
        assert hello.get("type") == "response", hello
        body = {"v": 1}
        good = ferry_rev(None, False, hashlib.sha256(canonical(body).encode()).hexdigest())
        if name == "history":
            return outcome(await peer.rev("a.json", "2-" + "ab" * 16, [], body=body))
        if name == "generation":
            top = (1 << 40) - 1
            return outcome(await peer.rev("a.json", "%d-%s" % (top, "ab" * 16), ["%d-%s" % (top - 1, "cd" * 16)], body=body))
        if name == "ferryignore":
            blob = {"@type": "blob", "digest": "sha256-" + hashlib.sha256(b"*\n").hexdigest(), "length": 2}
            return outcome(await peer.rev(".ferryignore", "1-" + "ab" * 16, [], blob=blob))
        if name == "number-bomb":
            raw = '{"x":123456789012345678e100000000}'
            digest = hashlib.sha256(b'{"x":1.23456789012345678e+100000017}').hexdigest()
            return outcome(await peer.rev("bomb.json", ferry_rev(None, False, digest), [], raw_body=raw))
        if name == "same-id":
            lie = outcome(await peer.rev("same.json", good, [], body={"v": 2}))
            truth = outcome(await peer.rev("same.json", good, [], body=body))
            return {"lie": lie, "truth": truth, "rev": good}
        if name == "checkpoint-flood":
            statuses = set()
            for i in range(1500):
                answer = await peer.request({"type": "setCheckpoint", "client": "flood-%d" % i, "checkpoint": {"local": 1, "remote": 1}})
                statuses.add(answer.get("status", 200))
            huge = await peer.request({"type": "setCheckpoint", "client": "x" * 200, "checkpoint": {"local": 1, "remote": 1}})
            return {"statuses": sorted(statuses), "huge": outcome(huge)}
        if name == "impersonate":
            planted = {"planted": True}
            rev = ferry_rev(None, False, hashlib.sha256(canonical(planted).encode()).hexdigest())
            stored = outcome(await peer.rev("planted.json", rev, [], body=planted))
            async with websockets.connect(url, subprotocols=["ferry-1"], max_size=None) as ws2:
                victim = Peer(ws2)
                await victim.hello(peer="victim", db=db)
                return {"stored": stored, "announced_to_victim": rev in await victim.pull(), "rev": rev}
        raise SystemExit("unknown attack " + name)


async def run(url, name):
    db = url.rstrip("/").rsplit("/", 1)[1]
    try:
        result = await attack(url, db, name)
    except websockets.ConnectionClosed as closed:
        result = {"closed": closed.code, "reason": closed.reason}
    print(json.dumps({"attack": name, "result": result}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--attack", required=True)
    args = parser.parse_args()
    asyncio.run(run(args.url, args.attack))


if __name__ == "__main__":
    sys.exit(main())
