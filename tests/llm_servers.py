"""Loopback servers speaking each LLM provider's wire format, for the generation tests.

`FakeLLM(provider)` answers like Ollama `/api/chat`, Anthropic `/v1/messages` or an
OpenAI-compatible `/v1/chat/completions`, streamed (NDJSON / SSE, sent chunk by chunk with
chunked transfer encoding) when the request asks for it. It records every request (path,
headers, JSON body). `script` queues raw replies (status, body, headers, delay) served before
normal answers, for errors, redirects, 429 + retry-after, malformed JSON and slow responses.

The reply comes from `reply(prompt)`: a string is the model's text; a dict is a structured
answer, sent the way the provider sends one when the request asks for it (Ollama `format`,
OpenAI `response_format`: the JSON as the message text; Anthropic `tools` + `tool_choice`: a
`tool_use` block, streamed as `input_json_delta` parts), else its one value as plain text. By
default a judge prompt gets a verdict, a relevance prompt a grade.

Faults: `cut_streams` streamed answers lose their last `cut_tail` parts (the HTTP response
still ends cleanly), or with `drop_connection` the connection closes mid-body; `drip_s` sends
every answer one byte at a time (`disconnects` counts the clients that hung up meanwhile).
Run as a script (`python tests/llm_servers.py PROVIDER PORTFILE`) it serves until killed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def default_reply(prompt: str) -> str | dict:
    if "Respond with only: TRUE or FALSE" in prompt:
        return {"verdict": "FALSE" if "coffee" in prompt.lower() else "TRUE"}
    if "##final score" in prompt:
        return {"grade": 3 if "refund" in prompt.lower() else 1}
    return "The answer, from the context: " + " ".join(prompt.split()[-6:])


@dataclass
class Scripted:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def structured(provider: str, body: dict) -> bool:
    """Whether the request asks for structured output, in this provider's terms."""
    if provider == "ollama":
        return "format" in body
    if provider == "anthropic":
        return bool(body.get("tools")) and body.get("tool_choice", {}).get("type") == "tool"
    return "response_format" in body


@dataclass
class FakeLLM:
    provider: str
    reply: Callable[[str], str | dict] = default_reply
    script: list[Scripted] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    url: str = ""
    delay_s: float = 0.0  # every normal answer waits this long (to observe concurrency)
    drip_s: float = 0.0  # > 0: every normal answer is sent one byte per drip_s
    cut_streams: int = 0  # this many streamed answers are cut...
    cut_tail: int = 1  # ...losing their last cut_tail parts
    drop_connection: bool = False  # ...by closing the connection mid-body
    in_flight: int = 0
    max_in_flight: int = 0
    disconnects: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, port: int = 0) -> FakeLLM:
        state = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # what a 301/302/303 turns a POST into: scripted replies only
                state.requests.append(dict(path=self.path, headers=dict(self.headers), body=None))
                self._scripted() or self._send(405, b'{"error": "method not allowed"}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                state.requests.append(dict(path=self.path, headers=dict(self.headers), body=body))
                if self._scripted():
                    return
                prompt = body["messages"][-1]["content"]
                with state._lock:
                    state.in_flight += 1
                    state.max_in_flight = max(state.max_in_flight, state.in_flight)
                time.sleep(state.delay_s)
                with state._lock:
                    state.in_flight -= 1
                answer = state.answer(body, state.reply(prompt))
                if state.drip_s:
                    self._drip(json.dumps(state.whole(body, prompt, answer)).encode())
                elif body.get("stream", state.provider == "ollama"):
                    self._stream(state.stream_parts(body, prompt, answer))
                else:
                    self._send(200, json.dumps(state.whole(body, prompt, answer)).encode())

            def _scripted(self) -> bool:
                if not state.script:
                    return False
                step = state.script.pop(0)
                time.sleep(step.delay_s)
                self._send(step.status, step.body, step.headers)
                return True

            def _send(self, status, data, headers=None):
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _drip(self, data):
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(state.drip_s)
                except OSError:  # the client hung up
                    with state._lock:
                        state.disconnects += 1
                    self.close_connection = True

            def _stream(self, parts):
                cut = False
                with state._lock:
                    if state.cut_streams:
                        state.cut_streams -= 1
                        cut = True
                if cut and not state.drop_connection:
                    parts = parts[: -state.cut_tail]
                self.send_response(200)
                kind = "application/x-ndjson" if state.provider == "ollama" else "text/event-stream"
                self.send_header("content-type", kind)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for part in parts[:-1] if cut and state.drop_connection else parts:
                    data = part.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                if cut and state.drop_connection:
                    self.close_connection = True  # no last chunk: the body is incomplete
                    return
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict, reply: str | dict) -> str | dict:
        """What the model sends: a dict only where the request asked for structured output."""
        if isinstance(reply, dict) and not structured(self.provider, body):
            return str(next(iter(reply.values())))
        if isinstance(reply, dict) and self.provider != "anthropic":
            return json.dumps(reply)
        return reply

    def whole(self, body: dict, prompt: str, answer: str | dict) -> dict:
        text = answer if isinstance(answer, str) else json.dumps(answer)
        n_in, n_out = len(prompt.split()), len(text.split())
        if self.provider == "ollama":
            return {
                "model": body["model"],
                "message": {"role": "assistant", "content": text},
                "done": True,
                "prompt_eval_count": n_in,
                "eval_count": n_out,
            }
        if self.provider == "anthropic":
            tool = isinstance(answer, dict)
            block = (
                {"type": "tool_use", "id": "toolu_1", "name": body["tool_choice"]["name"]}
                | {"input": answer}
                if tool
                else {"type": "text", "text": text}
            )
            return {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [block],
                "stop_reason": "tool_use" if tool else "end_turn",
                "usage": {"input_tokens": n_in, "output_tokens": n_out},
            }
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out},
        }

    def stream_parts(self, body: dict, prompt: str, answer: str | dict) -> list[str]:
        text = answer if isinstance(answer, str) else json.dumps(answer)
        words = [w + " " for w in text.split(" ")]
        words[-1] = words[-1].rstrip(" ")
        n_in, n_out = len(prompt.split()), len(text.split())
        if self.provider == "ollama":
            lines = [
                {"model": body["model"], "message": {"content": w}, "done": False} for w in words
            ]
            lines.append(
                {
                    "model": body["model"],
                    "message": {"content": ""},
                    "done": True,
                    "prompt_eval_count": n_in,
                    "eval_count": n_out,
                }
            )
            return [json.dumps(line) + "\n" for line in lines]
        if self.provider == "anthropic":
            return self._anthropic_events(body, answer, words, n_in, n_out)
        chunks = [
            {"model": body["model"], "choices": [{"index": 0, "delta": {"content": w}}]}
            for w in words
        ]
        chunks.append(
            {
                "model": body["model"],
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        )
        chunks.append(
            {
                "model": body["model"],
                "choices": [],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out},
            }
        )
        return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]

    def _anthropic_events(self, body, answer, words, n_in, n_out) -> list[str]:
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": body["model"],
                "content": [],
                "usage": {"input_tokens": n_in, "output_tokens": 1},
            },
        }
        if isinstance(answer, dict):  # a forced tool call: its input as JSON fragments
            block = {"type": "tool_use", "id": "toolu_1", "name": body["tool_choice"]["name"]}
            block |= {"input": {}}
            encoded = json.dumps(answer)
            pieces = [encoded[i : i + 5] for i in range(0, len(encoded), 5)]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            stop_reason = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": w} for w in words]
            stop_reason = "end_turn"
        events = [
            ("message_start", start),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            ("ping", {"type": "ping"}),
        ]
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
            for d in deltas
        ]
        events += [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason},
                    "usage": {"output_tokens": n_out},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return [f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events]


if __name__ == "__main__":
    server = FakeLLM(sys.argv[1]).start()
    Path(sys.argv[2]).write_text(server.url)
    threading.Event().wait()
