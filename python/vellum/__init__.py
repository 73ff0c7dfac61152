"""Vellum: an LLM inference engine with vLLM's Python API.

    from vellum import LLM, SamplingParams
    llm = LLM(model="path/to/model.gguf")
    outputs = llm.generate(["Hello, my name is"], SamplingParams(temperature=0.8, top_p=0.95))
    print(outputs[0].outputs[0].text)
"""

from .async_llm import AsyncLLM, AsyncLLMEngine, EngineDeadError
from .beam_search import BeamSearchOutput, BeamSearchSequence
from .engine_args import AsyncEngineArgs, EngineArgs
from .inputs import PromptType, TextPrompt, TokensPrompt
from .llm import LLM
from .llm_engine import LLMEngine
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling_params import (
    BeamSearchParams,
    RepetitionDetectionParams,
    RequestOutputKind,
    SamplingParams,
    SamplingType,
    StructuredOutputsParams,
)
from .tokenizer import Tokenizer

__version__ = "0.1.0"

__all__ = [
    "LLM",
    "LLMEngine",
    "AsyncLLM",
    "AsyncLLMEngine",
    "EngineArgs",
    "AsyncEngineArgs",
    "EngineDeadError",
    "SamplingParams",
    "StructuredOutputsParams",
    "BeamSearchParams",
    "RepetitionDetectionParams",
    "RequestOutputKind",
    "SamplingType",
    "RequestOutput",
    "CompletionOutput",
    "RequestMetrics",
    "Logprob",
    "BeamSearchOutput",
    "BeamSearchSequence",
    "PromptType",
    "TextPrompt",
    "TokensPrompt",
    "Tokenizer",
]
