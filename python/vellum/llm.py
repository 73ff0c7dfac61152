"""LLM: offline batch generation with vLLM's Python API (vllm.LLM)."""

from __future__ import annotations

import itertools
from typing import Any, Optional, Sequence, Union

from .beam_search import BeamSearchOutput, BeamSearchSequence
from .engine_args import EngineArgs
from .inputs import PromptType, is_single_prompt
from .llm_engine import LLMEngine
from .outputs import RequestOutput
from .progress import Progress, UseTqdm
from .sampling_params import BeamSearchParams, RequestOutputKind, SamplingParams
from .tokenizer import Tokenizer, render_chat

ChatMessages = list[dict[str, Any]]


class LLM:
    """Loads a GGUF model and generates for batches of prompts, as vllm.LLM does.

    ``LLM(model="path/to/model.gguf", max_model_len=..., kv_cache_memory_bytes=..., seed=...)``
    takes EngineArgs' options by their vLLM names. Generation runs the engine's continuous
    batching over all prompts at once; Ctrl-C aborts the batch, raises KeyboardInterrupt and
    leaves the LLM ready for the next call.
    """

    def __init__(self, model: str, **kwargs: Any) -> None:
        unknown = set(kwargs) - EngineArgs.field_names()
        if unknown:
            raise TypeError(
                f"LLM() got unexpected keyword arguments {sorted(unknown)}; supported: "
                f"{sorted(EngineArgs.field_names() - {'model'})}"
            )
        self.llm_engine = LLMEngine.from_engine_args(EngineArgs(model=model, **kwargs))
        self.request_counter = itertools.count()

    def get_tokenizer(self) -> Tokenizer:
        return self.llm_engine.get_tokenizer()

    def get_default_sampling_params(self) -> SamplingParams:
        """SamplingParams() with the model's generation_config.json fields applied (vLLM's)."""
        return SamplingParams(**self.llm_engine.get_diff_sampling_param())

    # ---- generate ------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Union[PromptType, Sequence[PromptType]],
        sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None,
        *,
        use_tqdm: UseTqdm = True,
        lora_request: None = None,
        priority: Optional[list[int]] = None,
    ) -> list[RequestOutput]:
        """Generates for every prompt; returns one finished RequestOutput per prompt, in order.

        A prompt is a str, {"prompt": str} or {"prompt_token_ids": [...]}. One SamplingParams
        applies to all prompts, or give one per prompt; None means SamplingParams().
        """
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported by Vellum; remove lora_request")
        prompt_list = [prompts] if is_single_prompt(prompts) else list(prompts)
        params_list = self._params_per_prompt(prompt_list, sampling_params)
        if priority is not None and len(priority) != len(prompt_list):
            raise ValueError(
                f"The lengths of prompts ({len(prompt_list)}) and priority ({len(priority)}) "
                f"must be the same."
            )
        requests = []
        final_only: dict[int, SamplingParams] = {}  # one copy per distinct params object
        for i, (prompt, params) in enumerate(zip(prompt_list, params_list)):
            if not isinstance(params, SamplingParams):
                raise TypeError(
                    f"sampling_params must be vellum.SamplingParams, got {type(params).__name__}"
                )
            if id(params) not in final_only:
                # Only the final output of each request is needed here.
                copy = params.clone()
                copy.output_kind = RequestOutputKind.FINAL_ONLY
                final_only[id(params)] = copy
            requests.append((prompt, final_only[id(params)], priority[i] if priority else 0,
                             params.n))
        return self._run(requests, use_tqdm)

    def _params_per_prompt(
        self, prompts: list[Any], sampling_params: Any
    ) -> list[SamplingParams]:
        if sampling_params is None:
            return [self.get_default_sampling_params()] * len(prompts)
        if isinstance(sampling_params, (SamplingParams, BeamSearchParams)):
            return [sampling_params] * len(prompts)
        params = list(sampling_params)
        if len(params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        return params

    # ---- chat ----------------------------------------------------------------------------------

    def chat(
        self,
        messages: Union[ChatMessages, list[ChatMessages]],
        sampling_params: Optional[Union[SamplingParams, list[SamplingParams]]] = None,
        use_tqdm: UseTqdm = True,
        lora_request: None = None,
        chat_template: Optional[str] = None,
        chat_template_content_format: str = "auto",
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: Optional[list[dict[str, Any]]] = None,
        chat_template_kwargs: Optional[dict[str, Any]] = None,
        mm_processor_kwargs: Optional[dict[str, Any]] = None,
    ) -> list[RequestOutput]:
        """Generates replies to conversations rendered by the model's chat template (or
        `chat_template`, a Jinja template source). One conversation or a list of them."""
        if chat_template_content_format not in ("auto", "string"):
            raise ValueError(
                f"chat_template_content_format={chat_template_content_format!r} is not "
                f"supported; use 'auto' or 'string'"
            )
        if mm_processor_kwargs:
            raise ValueError("multi-modal inputs are not supported by Vellum")
        if not isinstance(messages, (list, tuple)):
            raise TypeError("messages must be a list of message dicts, or a list of such lists")
        conversations = (
            [messages] if not messages or isinstance(messages[0], dict) else list(messages)
        )
        engine = self.llm_engine._cpp_engine()
        prompts = []
        for conversation in conversations:
            text = render_chat(
                engine,
                conversation,
                chat_template=chat_template,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                tools=tools,
                chat_template_kwargs=chat_template_kwargs,
            )
            # The template writes BOS and the role markers itself (vLLM: add_special_tokens=False).
            prompts.append({"prompt_token_ids": engine.encode(text, False, True), "prompt": text})
        return self.generate(prompts, sampling_params, use_tqdm=use_tqdm, lora_request=lora_request)

    # ---- beam search ---------------------------------------------------------------------------

    def beam_search(
        self,
        prompts: Sequence[PromptType],
        params: BeamSearchParams,
        lora_request: None = None,
        use_tqdm: UseTqdm = False,
        concurrency_limit: Optional[int] = None,
    ) -> list[BeamSearchOutput]:
        """Beam search over each prompt; the best `params.beam_width` beams per prompt."""
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported by Vellum; remove lora_request")
        if not isinstance(params, BeamSearchParams):
            raise TypeError(f"params must be a BeamSearchParams, got {type(params).__name__}")
        prompt_list = [prompts] if is_single_prompt(prompts) else list(prompts)
        requests = [(p, params, 0, params.beam_width) for p in prompt_list]
        outputs = self._run(requests, use_tqdm, raw=True)
        results = []
        for out in outputs:
            sequences = [
                BeamSearchSequence(
                    tokens=list(out.prompt_token_ids) + list(c.token_ids),
                    cum_logprob=c.cumulative_logprob,
                    text=c.text,
                    finish_reason=c.finish_reason,
                    stop_reason=c.stop_reason_text
                    if c.stop_reason_text is not None
                    else c.stop_reason_token,
                )
                for c in out.outputs
            ]
            results.append(BeamSearchOutput(sequences=sequences))
        return results

    # ---- the engine loop -----------------------------------------------------------------------

    def _run(self, requests: list[tuple], use_tqdm: UseTqdm, raw: bool = False) -> list[Any]:
        """Adds the requests, steps the engine until they finish, returns their final outputs in
        order. On any exception (Ctrl-C included) aborts what it added and re-raises."""
        engine = self.llm_engine
        request_ids: list[str] = []
        finished: dict[str, Any] = {}
        progress = None
        try:
            for prompt, params, priority, _ in requests:
                request_id = str(next(self.request_counter))
                engine.add_request(request_id, prompt, params, priority=priority)
                request_ids.append(request_id)
            progress = Progress(use_tqdm, sum(r[3] for r in requests))
            while engine.has_unfinished_requests():
                for out in engine._step(raw):
                    if out.finished:
                        finished[out.request_id] = out
                        progress.finished(out)
        except BaseException:
            self._abort_and_drain([r for r in request_ids if r not in finished])
            raise
        finally:
            if progress is not None:
                progress.close()
        return [finished[r] for r in request_ids]

    def _abort_and_drain(self, request_ids: list[str]) -> None:
        """Aborts the requests and steps until the engine has let go of them (one step frees an
        aborted request's blocks). A second Ctrl-C meanwhile does not cut this short."""
        engine = self.llm_engine
        engine.abort_request(request_ids)
        interrupted = None
        while True:
            try:
                if not engine.has_unfinished_requests():
                    break
                engine._step(True)
            except KeyboardInterrupt as e:
                interrupted = e
        if interrupted is not None:
            raise interrupted
