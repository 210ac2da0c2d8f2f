"""Loopback servers speaking each LLM provider's wire format, for the generation tests.

`FakeLLM(provider)` answers like Ollama `/api/chat`, Anthropic `/v1/messages` or an
OpenAI-compatible `/v1/chat/completions`, streamed (NDJSON / SSE, sent chunk by chunk with
chunked transfer encoding) when the request asks for it. It records every request (path,
headers, JSON body). `script` queues raw replies (status, body, headers, delay) served before
normal answers, for errors, 429 + retry-after, malformed JSON and slow responses. The reply text
comes from `reply(prompt)`; by default a judge prompt gets TRUE, a relevance prompt a grade.
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


def default_reply(prompt: str) -> str:
    if "Respond with only: TRUE or FALSE" in prompt:
        return "TRUE" if "coffee" not in prompt.lower() else "**False.**"
    if "##final score" in prompt:
        return "##final score: 3" if "refund" in prompt.lower() else "##final score: 1"
    return "The answer, from the context: " + " ".join(prompt.split()[-6:])


@dataclass
class Scripted:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class FakeLLM:
    provider: str
    reply: Callable[[str], str] = default_reply
    script: list[Scripted] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    url: str = ""
    delay_s: float = 0.0  # every normal answer waits this long (to observe concurrency)
    in_flight: int = 0
    max_in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, port: int = 0) -> FakeLLM:
        state = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                state.requests.append(dict(path=self.path, headers=dict(self.headers), body=body))
                if state.script:
                    step = state.script.pop(0)
                    time.sleep(step.delay_s)
                    self._send(step.status, step.body, step.headers)
                    return
                prompt = body["messages"][-1]["content"]
                with state._lock:
                    state.in_flight += 1
                    state.max_in_flight = max(state.max_in_flight, state.in_flight)
                time.sleep(state.delay_s)
                with state._lock:
                    state.in_flight -= 1
                text = state.reply(prompt)
                if body.get("stream", state.provider == "ollama"):
                    self._stream(state.stream_parts(body, prompt, text))
                else:
                    self._send(200, json.dumps(state.whole(body, prompt, text)).encode())

            def _send(self, status, data, headers=None):
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, parts):
                self.send_response(200)
                kind = "application/x-ndjson" if state.provider == "ollama" else "text/event-stream"
                self.send_header("content-type", kind)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for part in parts:
                    data = part.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def whole(self, body: dict, prompt: str, text: str) -> dict:
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
            return {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": n_in, "output_tokens": n_out},
            }
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out},
        }

    def stream_parts(self, body: dict, prompt: str, text: str) -> list[str]:
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
            start = {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "model": body["model"],
                    "content": [],
                    "usage": {"input_tokens": n_in, "output_tokens": 1},
                },
            }
            events = [
                ("message_start", start),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                ("ping", {"type": "ping"}),
            ]
            events += [
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": w},
                    },
                )
                for w in words
            ]
            events += [
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": n_out},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
            return [f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events]
        chunks = [
            {"model": body["model"], "choices": [{"index": 0, "delta": {"content": w}}]}
            for w in words
        ]
        chunks.append(
            {
                "model": body["model"],
                "choices": [],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out},
            }
        )
        return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


if __name__ == "__main__":
    server = FakeLLM(sys.argv[1]).start()
    Path(sys.argv[2]).write_text(server.url)
    threading.Event().wait()
