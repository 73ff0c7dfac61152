"""AsyncLLM: asyncio streaming generation (vllm.v1.engine.async_llm.AsyncLLM).

The engine runs on its own C++ thread (EngineClient) and never takes the GIL. Each request's
outputs queue in its C++ stream, which signals an eventfd that the running event loop watches
(loop.add_reader); the loop's callback moves the outputs into per-request asyncio queues. So the
event loop is never blocked and no thread waits per request.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncGenerator, Optional, Union

from . import _C
from .engine_args import AsyncEngineArgs, EngineArgs
from .llm_engine import RequestPreparer, TokenTexts
from .outputs import RequestOutput, convert_request_output
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer


class EngineDeadError(RuntimeError):
    """The engine failed (or was shut down); no request can run on it any more."""


class _Request:
    __slots__ = ("stream", "queue", "text")

    def __init__(self, stream: _C.RequestStream, text: Optional[str]) -> None:
        self.stream = stream
        self.queue: asyncio.Queue = asyncio.Queue()
        self.text = text


class AsyncLLM:
    """``async for output in engine.generate(prompt, params, request_id): ...``

    Outputs follow params.output_kind: CUMULATIVE (default) carries everything so far, DELTA only
    what is new, FINAL_ONLY one output at the end. Leaving the loop early (break, an exception,
    a cancelled task) aborts the request.
    """

    def __init__(self, engine_args: EngineArgs) -> None:
        config = engine_args.create_engine_config()
        self.engine_args = engine_args
        self._client = _C.EngineClient(config)
        if not self._client.wait_until_ready():  # the GIL is released while the model loads
            failure = self._client.failure()
            self._client.shutdown(0.0)
            raise ValueError(failure)
        self._prepare = RequestPreparer(self._client, engine_args.seed)
        self._token_texts = TokenTexts(self._client)
        self._tokenizer = Tokenizer(self._client)
        self._notifier = _C.EventNotifier()
        self._requests: dict[str, _Request] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._closed = False

    @classmethod
    def from_engine_args(cls, engine_args: EngineArgs, **_: Any) -> "AsyncLLM":
        return cls(engine_args)

    # ---- requests ------------------------------------------------------------------------------

    async def generate(
        self,
        prompt: Any,
        sampling_params: SamplingParams,
        request_id: str,
        *,
        lora_request: None = None,
        trace_headers: Optional[dict[str, str]] = None,
        priority: int = 0,
    ) -> AsyncGenerator[RequestOutput, None]:
        """Streams the request's RequestOutputs; the last one has finished == True.

        Raises ValueError with vLLM's message for invalid parameters or prompts, and
        EngineDeadError when the engine has failed.
        """
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported by Vellum; remove lora_request")
        self._check_alive()
        if request_id in self._requests:
            raise ValueError(f"Request id {request_id} already running.")
        self._watch(asyncio.get_running_loop())
        parsed, cpp = self._prepare.prepare(prompt, sampling_params)
        stream = self._client.submit(
            request_id, parsed.engine_prompt, cpp, priority, parsed.cache_salt
        )
        request = _Request(stream, parsed.text)
        self._requests[request_id] = request
        stream.set_notifier(self._notifier)
        finished = False
        try:
            while not finished:
                item = await request.queue.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = item.finished
                yield item
        finally:
            self._requests.pop(request_id, None)
            if not finished:
                self._client.abort(request_id)

    async def abort(self, request_id: Union[str, list[str]]) -> None:
        """Aborts requests; their generate() ends with a final output (finish_reason "abort")."""
        for rid in [request_id] if isinstance(request_id, str) else request_id:
            self._client.abort(rid)

    # ---- outputs from the engine thread --------------------------------------------------------

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is self._loop:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._notifier.fileno())
        loop.add_reader(self._notifier.fileno(), self._on_outputs)
        self._loop = loop

    def _on_outputs(self) -> None:
        self._notifier.drain()
        for request_id, request in list(self._requests.items()):
            for out in request.stream.wait(0.0):
                request.queue.put_nowait(convert_request_output(out, self._token_texts, request.text))
            if request.stream.done():
                error = request.stream.error()
                if error is not None:
                    request.queue.put_nowait(self._error(error))

    def _error(self, message: str) -> BaseException:
        if self._client.state() == _C.EngineClient.State.FAILED:
            return EngineDeadError(message)
        if self._closed:
            return EngineDeadError(message)
        return ValueError(message)

    def _check_alive(self) -> None:
        if self._closed:
            raise EngineDeadError("the engine has been shut down")
        if self._client.state() == _C.EngineClient.State.FAILED:
            raise EngineDeadError(f"the engine failed: {self._client.failure()}")

    # ---- state and tokenizer -------------------------------------------------------------------

    async def get_tokenizer(self, lora_request: None = None) -> Tokenizer:
        return self._tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def is_running(self) -> bool:
        return not self._closed and self._client.state() == _C.EngineClient.State.READY

    @property
    def errored(self) -> bool:
        return self._client.state() == _C.EngineClient.State.FAILED

    @property
    def dead_error(self) -> BaseException:
        return EngineDeadError(self._client.failure() or "the engine is not running")

    async def check_health(self) -> None:
        self._check_alive()

    async def get_stats(self) -> _C.EngineStats:
        return self._client.stats()

    def get_num_unfinished_requests(self) -> int:
        return self._client.num_unfinished()

    def shutdown(self) -> None:
        """Aborts what is running and stops the engine thread."""
        if self._closed:
            return
        self._closed = True
        self._client.shutdown(0.0)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._notifier.fileno())
            # Deliver the final (aborted) outputs to whoever still iterates.
            self._on_outputs()
        self._loop = None

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass


# vLLM V1's name for the same class.
AsyncLLMEngine = AsyncLLM

__all__ = ["AsyncEngineArgs", "AsyncLLM", "AsyncLLMEngine", "EngineDeadError"]
