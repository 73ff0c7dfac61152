#include "fidelity_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace vellum::testing::fidelity {
namespace {

std::vector<TopLogprobs> read_tops(const nlohmann::json& steps) {
  std::vector<TopLogprobs> tops;
  for (const auto& step : steps) {
    TopLogprobs& top = tops.emplace_back();
    for (const auto& entry : step) top.emplace_back(entry[0].get<int32_t>(), entry[1].get<float>());
  }
  return tops;
}

// Vellum's logprob of `token_id` in a position's entry, if it is the entry's token or listed.
std::optional<float> listed_logprob(const TokenLogprobs& entry, int32_t token_id) {
  if (entry.token_id == token_id) return entry.logprob;
  for (const auto& [id, logprob] : entry.top) {
    if (id == token_id) return logprob;
  }
  return std::nullopt;
}

}  // namespace

std::vector<int32_t> ReferenceCase::forced_prompt() const {
  std::vector<int32_t> ids = prompt_token_ids;
  ids.insert(ids.end(), generated_token_ids.begin(), generated_token_ids.end());
  return ids;
}

ReferenceModel load_reference(const std::string& json_name, const std::string& key) {
  const std::filesystem::path path = model_file("real/" + json_name);
  if (path.empty()) {
    throw std::runtime_error("reference " + json_name +
                             " not found under ../shared/models/real (or $VELLUM_TEST_MODELS)");
  }
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& model = doc.at("models").at(key);
  ReferenceModel ref;
  ref.key = key;
  ref.file = model.at("file").get<std::string>();
  for (const auto& c : model.at("cases")) {
    ReferenceCase& rc = ref.cases.emplace_back();
    rc.name = c.at("name").get<std::string>();
    if (c.contains("messages")) rc.messages_json = c.at("messages").dump();
    rc.prompt_text = c.at("prompt_text").get<std::string>();
    rc.prompt_token_ids = c.at("prompt_token_ids").get<std::vector<int32_t>>();
    rc.generated_token_ids = c.at("generated_token_ids").get<std::vector<int32_t>>();
    rc.top5 = read_tops(c.at("top5"));
    rc.top1_top2_gap = c.at("top1_top2_gap").get<std::vector<double>>();
    if (c.contains("f32_forced_top5")) rc.f32_forced_top5 = read_tops(c.at("f32_forced_top5"));
    const auto num_steps = static_cast<size_t>(rc.num_steps());
    if (rc.top5.size() != num_steps || rc.top1_top2_gap.size() != num_steps ||
        (!rc.f32_forced_top5.empty() && rc.f32_forced_top5.size() != num_steps)) {
      throw std::runtime_error("reference case " + rc.name + " has per-step lists of unequal size");
    }
    for (size_t s = 0; s < num_steps; ++s) {
      if (rc.top5[s].empty() || rc.top5[s][0].first != rc.generated_token_ids[s]) {
        throw std::runtime_error(
            fmt::format("reference case {}: step {}'s top-1 is not its generated token", rc.name, s));
      }
    }
  }
  return ref;
}

EngineConfig reference_engine_config(const std::filesystem::path& model) {
  EngineConfig config = tiny_engine_config(model);  // n_ctx 512, blocks of 16, f32 K/V, 2 threads
  config.cache.kv_cache_memory_bytes = int64_t{256} << 20;
  return config;
}

SamplingParams greedy_with_logprobs(int64_t max_tokens) {
  SamplingParams p = greedy(max_tokens);
  p.logprobs = 5;
  return p;
}

SamplingParams forced_scoring(int64_t num_top) {
  SamplingParams p = greedy(1);
  p.prompt_logprobs = num_top;
  return p;
}

void Agreement::merge(const Agreement& other) {
  num_steps_compared += other.num_steps_compared;
  num_steps_argmax_checked += other.num_steps_argmax_checked;
  max_chosen_logprob_diff = std::max(max_chosen_logprob_diff, other.max_chosen_logprob_diff);
  max_top5_logprob_diff = std::max(max_top5_logprob_diff, other.max_top5_logprob_diff);
  departures.insert(departures.end(), other.departures.begin(), other.departures.end());
}

std::string Agreement::summary() const {
  std::string text = fmt::format(
      "{} steps compared ({} with argmax checked), max |chosen logprob diff| {:.5f}, max |top-5 "
      "logprob diff| {:.5f}",
      num_steps_compared, num_steps_argmax_checked, max_chosen_logprob_diff,
      max_top5_logprob_diff);
  if (departures.empty()) return text + ", no departures";
  text += ", departed at";
  for (const std::string& d : departures) text += " [" + d + "]";
  return text;
}

void expect_forced_agreement(const ReferenceCase& c, const std::vector<TokenLogprobs>& forced,
                             double gap_threshold, double logprob_tol, Agreement* agreement) {
  ASSERT_EQ(forced.size(), c.forced_prompt().size() - 1) << c.name << ": prompt_logprobs entries";
  Agreement a;
  for (int64_t s = 0; s < c.num_steps(); ++s) {
    const TokenLogprobs& entry = forced[c.forced_entry(s)];
    ASSERT_EQ(entry.token_id, c.generated_token_ids[static_cast<size_t>(s)]);
    ASSERT_FALSE(entry.top.empty()) << c.name << " step " << s << ": no top logprobs";
    const double gap = c.top1_top2_gap[static_cast<size_t>(s)];
    const double diff = std::abs(double{entry.logprob} - c.top5[static_cast<size_t>(s)][0].second);
    ++a.num_steps_compared;
    a.max_chosen_logprob_diff = std::max(a.max_chosen_logprob_diff, diff);
    for (const auto& [id, logprob] : c.top5[static_cast<size_t>(s)]) {
      if (const auto got = listed_logprob(entry, id)) {
        a.max_top5_logprob_diff = std::max(a.max_top5_logprob_diff, std::abs(double{*got} - logprob));
      }
    }
    if (logprob_tol >= 0.0) {
      EXPECT_LE(diff, logprob_tol) << c.name << " step " << s << " (teacher-forced): logprob of "
                                   << entry.token_id << " is " << entry.logprob
                                   << ", reference " << c.top5[static_cast<size_t>(s)][0].second;
    }
    if (gap >= gap_threshold) {
      ++a.num_steps_argmax_checked;
      EXPECT_EQ(entry.top[0].first, entry.token_id)
          << c.name << " step " << s << " (teacher-forced): Vellum's argmax "
          << entry.top[0].first << " (" << entry.top[0].second << ") is not the reference's "
          << entry.token_id << " (" << entry.logprob << "), whose top1-top2 gap is " << gap;
    }
  }
  agreement->merge(a);
}

void expect_generation_agreement(const ReferenceCase& c, const CompletionOutput& out,
                                 double gap_threshold, double logprob_tol, Agreement* agreement) {
  ASSERT_EQ(out.token_ids.size(), c.generated_token_ids.size()) << c.name << ": generated tokens";
  ASSERT_TRUE(out.logprobs.has_value()) << c.name << ": no logprobs";
  ASSERT_EQ(out.logprobs->size(), out.token_ids.size()) << c.name;
  Agreement a;
  for (int64_t s = 0; s < c.num_steps(); ++s) {
    const auto step = static_cast<size_t>(s);
    const double gap = c.top1_top2_gap[step];
    if (out.token_ids[step] != c.generated_token_ids[step]) {
      EXPECT_LT(gap, gap_threshold)
          << c.name << " step " << s << " (generation): Vellum chose " << out.token_ids[step]
          << " (" << (*out.logprobs)[step].logprob << "), the reference "
          << c.generated_token_ids[step] << " (" << c.top5[step][0].second
          << ") with a top1-top2 gap of " << gap;
      a.departures.push_back(fmt::format("{}: step {} (gap {:.5f})", c.name, s, gap));
      break;
    }
    const TokenLogprobs& entry = (*out.logprobs)[step];
    const double diff = std::abs(double{entry.logprob} - c.top5[step][0].second);
    ++a.num_steps_compared;
    if (gap >= gap_threshold) ++a.num_steps_argmax_checked;
    a.max_chosen_logprob_diff = std::max(a.max_chosen_logprob_diff, diff);
    for (const auto& [id, logprob] : c.top5[step]) {
      if (const auto got = listed_logprob(entry, id)) {
        a.max_top5_logprob_diff = std::max(a.max_top5_logprob_diff, std::abs(double{*got} - logprob));
      }
    }
    if (logprob_tol >= 0.0) {
      EXPECT_LE(diff, logprob_tol) << c.name << " step " << s << " (generation): logprob of "
                                   << entry.token_id << " is " << entry.logprob
                                   << ", reference " << c.top5[step][0].second;
    }
  }
  agreement->merge(a);
}

void expect_argmax_checked(const Agreement& agreement, const std::string& what) {
  EXPECT_GT(agreement.num_steps_argmax_checked, 0)
      << what << ": no step's greedy token was checked (" << agreement.summary() << ")";
}

}  // namespace vellum::testing::fidelity
