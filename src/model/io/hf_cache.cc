#include "model/io/hf_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "common/check.h"

namespace vellum::model {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

bool is_repo_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.';
}

// The GGUF files directly in `dir`, by name.
std::vector<std::string> gguf_files_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 5 && name.ends_with(".gguf") && entry.is_regular_file(ec)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The GGUF of `dir` that `gguf_file` names, or its only one.
fs::path choose_gguf(const fs::path& dir, const std::string& gguf_file, const std::string& what) {
  std::error_code ec;
  if (!gguf_file.empty()) {
    const fs::path chosen = dir / gguf_file;
    if (fs::is_regular_file(chosen, ec)) return chosen;
    const std::vector<std::string> present = gguf_files_in(dir);
    VELLUM_THROW(ErrorCode::kNotFound, "--gguf-file '{}' is not in {} ({}); it holds: {}",
                 gguf_file, dir.string(), what,
                 present.empty() ? std::string("no GGUF files") : fmt::format("{}", fmt::join(present, ", ")));
  }
  const std::vector<std::string> present = gguf_files_in(dir);
  VELLUM_CHECK(!present.empty(), ErrorCode::kNotFound,
               "{} ({}) holds neither a config.json (a Hugging Face checkpoint) nor a GGUF file",
               dir.string(), what);
  VELLUM_CHECK(present.size() == 1, ErrorCode::kInvalidArgument,
               "{} ({}) holds {} GGUF files: {}; choose one with --gguf-file NAME (Python: "
               "gguf_file=NAME)",
               dir.string(), what, present.size(), fmt::format("{}", fmt::join(present, ", ")));
  return dir / present.front();
}

// The snapshot directory of a repo folder models--ORG--NAME: the commit refs/main names, or the
// only snapshot. Empty when there is none.
fs::path snapshot_of(const fs::path& repo_dir, std::string* tried) {
  std::error_code ec;
  const fs::path ref = repo_dir / "refs" / "main";
  if (std::ifstream in(ref); in) {
    std::string commit;
    in >> commit;
    const fs::path snapshot = repo_dir / "snapshots" / commit;
    if (!commit.empty() && fs::is_directory(snapshot, ec)) return snapshot;
    *tried += fmt::format(", {} (refs/main names {}, which is not there)", snapshot.string(), commit);
  }
  std::vector<fs::path> snapshots;
  for (const fs::directory_entry& entry : fs::directory_iterator(repo_dir / "snapshots", ec)) {
    if (entry.is_directory(ec)) snapshots.push_back(entry.path());
  }
  if (snapshots.size() == 1) return snapshots.front();
  if (snapshots.size() > 1) {
    *tried += fmt::format(", {} ({} snapshots and no refs/main to choose one)",
                          (repo_dir / "snapshots").string(), snapshots.size());
  }
  return {};
}

}  // namespace

bool looks_like_hf_repo_id(std::string_view id) {
  if (id.empty() || id.front() == '/' || id.front() == '.' || id.front() == '~') return false;
  if (id.find("..") != std::string_view::npos || id.back() == '/') return false;
  int slashes = 0;
  for (char c : id) {
    if (c == '/') {
      ++slashes;
    } else if (!is_repo_char(c)) {
      return false;
    }
  }
  return slashes <= 1;
}

fs::path hf_hub_cache_dir() {
  if (std::string dir = env("HF_HUB_CACHE"); !dir.empty()) return dir;
  if (std::string home = env("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    return fs::path(xdg) / "huggingface" / "hub";
  }
  return fs::path(env("HOME")) / ".cache" / "huggingface" / "hub";
}

fs::path resolve_model_path(const std::string& model, const std::string& gguf_file) {
  std::error_code ec;
  const fs::path path(model);
  if (fs::exists(path, ec)) {
    if (gguf_file.empty()) return path;
    VELLUM_CHECK(fs::is_directory(path, ec), ErrorCode::kInvalidArgument,
                 "--gguf-file chooses a GGUF inside a directory or a Hugging Face repo, but the "
                 "model '{}' is a file; pass that file alone",
                 model);
    return choose_gguf(path, gguf_file, "the model directory");
  }
  // Not a repo id: the caller's own "does not exist" error names the path.
  if (!looks_like_hf_repo_id(model)) return path;
  const fs::path cache = hf_hub_cache_dir();
  // models--ORG--NAME: the slash becomes two dashes.
  std::string repo_folder = "models--" + model;
  if (const size_t slash = repo_folder.find('/'); slash != std::string::npos) {
    repo_folder.replace(slash, 1, "--");
  }
  const fs::path repo_dir = cache / repo_folder;
  std::string tried = path.string() + " (no such file or directory), " + repo_dir.string();
  if (fs::is_directory(repo_dir, ec)) {
    if (fs::path snapshot = snapshot_of(repo_dir, &tried); !snapshot.empty()) {
      const bool hf_files = fs::is_regular_file(snapshot / "config.json", ec) ||
                            fs::is_regular_file(snapshot / "tokenizer.json", ec);
      if (hf_files && gguf_file.empty()) return snapshot;
      return choose_gguf(snapshot, gguf_file,
                         fmt::format("the Hugging Face cache's snapshot of {}", model));
    }
  } else {
    tried += " (not there)";
  }
  VELLUM_THROW(ErrorCode::kIo,
               "'{}' does not exist as a local path or in the local Hugging Face cache; tried {}. "
               "Vellum downloads nothing: fetch it first (e.g. `huggingface-cli download {}`), set "
               "HF_HUB_CACHE or HF_HOME to the cache that holds it, or pass a file or directory",
               model, tried, model);
}

}  // namespace vellum::model
