# Type stub of the compiled module vellum._C (python/src/*.cc). The public API is the pure-Python
# package around it (vellum.LLM, vellum.SamplingParams, ...); this module is its engine room.
# tests/python/test_stub.py checks that this stub and the module name the same things.

import enum
from typing import Optional, Union

Prompt = Union[str, list[int]]

class ModelConfig:
    model: str
    gguf_file: str
    dtype: str
    max_model_len: int
    chat_template: str
    served_model_name: str
    load_format: str
    tokenizer: str
    skip_tokenizer_init: bool
    generation_config: str
    batch_invariant: bool
    max_logprobs: int
    def __init__(self) -> None: ...

class CacheConfig:
    block_size: int
    cache_dtype: str
    cache_type_k: str
    cache_type_v: str
    kv_cache_rotate_k: str
    kv_cache_memory_bytes: int
    kv_cache_fraction: float
    enable_prefix_caching: bool
    disable_hybrid_kv_cache_manager: bool
    swap_space_bytes: int
    num_blocks_override: int
    def __init__(self) -> None: ...

class SchedulerConfig:
    max_num_batched_tokens: int
    max_num_seqs: int
    enable_chunked_prefill: bool
    long_prefill_token_threshold: int
    policy: str
    preemption_mode: str
    def __init__(self) -> None: ...

class ParallelConfig:
    num_threads: int
    def __init__(self) -> None: ...

class EngineConfig:
    model: ModelConfig
    cache: CacheConfig
    scheduler: SchedulerConfig
    parallel: ParallelConfig
    speculative_config: str
    def __init__(self) -> None: ...

class RequestOutputKind(enum.Enum):
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2

class RepetitionDetectionParams:
    max_pattern_size: int
    min_pattern_size: int
    min_count: int
    def __init__(self) -> None: ...

class StructuredOutputsParams:
    json: Optional[str]
    regex: Optional[str]
    choice: Optional[list[str]]
    grammar: Optional[str]
    json_object: bool
    disable_any_whitespace: bool
    def __init__(self) -> None: ...

class SamplingParams:
    n: int
    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    seed: Optional[int]
    stop: list[str]
    stop_token_ids: list[int]
    ignore_eos: bool
    max_tokens: Optional[int]
    min_tokens: int
    logprobs: Optional[int]
    prompt_logprobs: Optional[int]
    logprob_token_ids: Optional[list[int]]
    detokenize: bool
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    include_stop_str_in_output: bool
    output_kind: RequestOutputKind
    logit_bias: dict[int, float]
    allowed_token_ids: Optional[list[int]]
    bad_words: list[str]
    repetition_detection: Optional[RepetitionDetectionParams]
    truncate_prompt_tokens: Optional[int]
    use_beam_search: bool
    length_penalty: float
    structured_outputs: Optional[StructuredOutputsParams]
    def __init__(self) -> None: ...
    def is_greedy(self) -> bool: ...
    def output_text_buffer_length(self) -> int: ...
    def validate(self) -> Optional[tuple[str, str]]:
        """(param, vLLM's message) of the first broken rule; None when valid."""
    def normalize(self) -> None: ...

class TokenLogprobs:
    @property
    def token_id(self) -> int: ...
    @property
    def logprob(self) -> float: ...
    @property
    def rank(self) -> int: ...
    @property
    def top(self) -> list[tuple[int, float]]: ...

class CompletionOutput:
    @property
    def index(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def token_ids(self) -> list[int]: ...
    @property
    def cumulative_logprob(self) -> float: ...
    @property
    def logprobs(self) -> Optional[list[TokenLogprobs]]: ...
    @property
    def finish_reason(self) -> Optional[str]: ...
    @property
    def stop_reason_text(self) -> Optional[str]: ...
    @property
    def stop_reason_token(self) -> Optional[int]: ...

class RequestMetrics:
    @property
    def arrival_time(self) -> float: ...
    @property
    def first_scheduled_time(self) -> float: ...
    @property
    def first_token_time(self) -> float: ...
    @property
    def last_token_time(self) -> float: ...
    @property
    def finished_time(self) -> float: ...
    @property
    def inter_token_latencies(self) -> list[float]: ...
    @property
    def num_generation_tokens(self) -> int: ...

class RequestOutput:
    @property
    def request_id(self) -> str: ...
    @property
    def prompt(self) -> str: ...
    @property
    def prompt_token_ids(self) -> list[int]: ...
    @property
    def prompt_logprobs(self) -> Optional[list[TokenLogprobs]]: ...
    @property
    def outputs(self) -> list[CompletionOutput]: ...
    @property
    def finished(self) -> bool: ...
    @property
    def num_cached_tokens(self) -> int: ...
    @property
    def metrics(self) -> RequestMetrics: ...

class EngineStats:
    @property
    def num_running(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    @property
    def kv_cache_usage(self) -> float: ...
    @property
    def prefix_cache_queries(self) -> int: ...
    @property
    def prefix_cache_hits(self) -> int: ...
    @property
    def num_preemptions(self) -> int: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def generation_tokens(self) -> int: ...
    @property
    def scheduled_tokens(self) -> int: ...
    @property
    def spec_num_drafts(self) -> int: ...
    @property
    def spec_num_draft_tokens(self) -> int: ...
    @property
    def spec_num_accepted_tokens(self) -> int: ...
    @property
    def spec_num_accepted_tokens_per_pos(self) -> list[int]: ...
    @property
    def num_kv_blocks(self) -> int: ...
    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def block_size(self) -> int: ...

class _EngineQueries:
    # The tokenizer and limits of a loaded engine (shared by LLMEngine and EngineClient).
    def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]: ...
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...
    def token_text(self, id: int) -> str: ...
    def bos_token_id(self) -> Optional[int]: ...
    def eos_token_id(self) -> Optional[int]: ...
    def max_model_len(self) -> int: ...
    def vocab_size(self) -> int: ...
    def has_chat_template(self) -> bool: ...
    def apply_chat_template(
        self,
        messages_json: str,
        tools_json: str = "",
        kwargs_json: str = "",
        chat_template: str = "",
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str: ...
    def diff_sampling_params(self) -> dict[str, Union[int, float]]:
        """The sampling fields generation_config.json sets (vLLM's get_diff_sampling_param)."""
    def config(self) -> EngineConfig: ...

class LLMEngine(_EngineQueries):
    """One thread drives it; step() releases the GIL."""
    @staticmethod
    def create(config: EngineConfig) -> LLMEngine: ...
    def add_request(
        self,
        request_id: str,
        prompt: Prompt,
        params: SamplingParams,
        priority: int = 0,
        cache_salt: str = "",
    ) -> Optional[str]:
        """None when queued, else why not (vLLM's message)."""
    def abort_request(self, request_id: str) -> bool: ...
    def step(self) -> list[RequestOutput]: ...
    def has_unfinished_requests(self) -> bool: ...
    def stats(self) -> EngineStats: ...

class EventNotifier:
    """An eventfd that request streams signal from the engine thread."""
    def __init__(self) -> None: ...
    def fileno(self) -> int: ...
    def notify(self) -> None: ...
    def drain(self) -> bool: ...

class RequestStream:
    @property
    def request_id(self) -> str: ...
    def wait(self, timeout_s: float = 0.0) -> list[RequestOutput]: ...
    def done(self) -> bool: ...
    def error(self) -> Optional[str]: ...
    def set_notifier(self, notifier: EventNotifier) -> None: ...

class EngineClient(_EngineQueries):
    """The engine on its own thread behind thread-safe queues."""
    class State(enum.Enum):
        LOADING = 0
        READY = 1
        FAILED = 2
        STOPPED = 3
    def __init__(self, config: EngineConfig) -> None: ...
    def state(self) -> EngineClient.State: ...
    def failure(self) -> str: ...
    def wait_until_ready(self) -> bool: ...
    def submit(
        self,
        request_id: str,
        prompt: Prompt,
        params: SamplingParams,
        priority: int = 0,
        cache_salt: str = "",
    ) -> RequestStream: ...
    def abort(self, request_id: str) -> None: ...
    def stats(self) -> EngineStats: ...
    def num_unfinished(self) -> int: ...
    def shutdown(self, grace_s: float = 0.0) -> None: ...
