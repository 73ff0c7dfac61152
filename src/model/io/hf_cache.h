// A Hugging Face repo id ("HuggingFaceTB/SmolLM2-135M-Instruct") as the model argument, resolved
// in the local Hugging Face cache only, as vLLM does with HF_HUB_OFFLINE=1: Vellum downloads
// nothing.
//
// Cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (huggingface_hub's order). A repo is models--ORG--NAME/ in it, its files
// under snapshots/REV/, where REV is the commit refs/main names (or the only snapshot when there
// is no refs/main). A snapshot with config.json is a Hugging Face checkpoint (the directory is the
// model; tokenizer.json alone makes it a tokenizer directory); otherwise it must hold GGUF files:
// the one --gguf-file names, or the only one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace vellum::model {

// True for "ORG/NAME" (or "NAME"): a repo id's characters, no path syntax (no leading '/', '.'
// or '~', at most one '/', no "..").
bool looks_like_hf_repo_id(std::string_view id);

// The hub cache folder the environment selects (see above).
std::filesystem::path hf_hub_cache_dir();

// The local path of `model`: itself when it exists (a file or directory, `gguf_file` then must be
// empty or name a GGUF inside that directory), else the repo id's snapshot in the hub cache (the
// snapshot directory when it holds config.json or tokenizer.json and no GGUF is chosen, or the GGUF
// chosen in it). A missing path that is no repo id comes back as is (the loader's error names it).
// Throws vellum::Error (kIo) for a repo id not in the cache, naming the paths tried and how to
// get the files; (kNotFound) for a --gguf-file that is not there; (kInvalidArgument) when a
// snapshot holds several GGUF files and none is chosen, listing them.
std::filesystem::path resolve_model_path(const std::string& model,
                                         const std::string& gguf_file = "");

}  // namespace vellum::model
