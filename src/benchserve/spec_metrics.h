// Speculative decoding figures for `vellum bench serve`: the server's cumulative
// spec_decode_* counters (vLLM's names, under any metric prefix: "vllm:", "vellum:") read from
// its Prometheus /metrics before and after the run, so the report can show the draft
// acceptance rate and mean acceptance length of the benchmark's traffic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "benchserve/client.h"

namespace vellum::benchserve {

struct SpecDecodeCounts {
  double num_drafts = 0;
  double num_draft_tokens = 0;
  double num_accepted_tokens = 0;
};

// The counters in a Prometheus text exposition (summed over label sets); nullopt when the
// server exports none (speculation off, or not a vLLM-style server).
std::optional<SpecDecodeCounts> parse_spec_decode_counts(std::string_view exposition);

// GET <prefix>/metrics and parse_spec_decode_counts; nullopt when unreachable or absent.
std::optional<SpecDecodeCounts> fetch_spec_decode_counts(const ClientConfig& config);

// "Spec decode: draft acceptance rate X %, mean acceptance length Y (N drafts, D draft tokens,
// A accepted)" for the counts between two snapshots.
std::string format_spec_decode_line(const SpecDecodeCounts& before, const SpecDecodeCounts& after);

}  // namespace vellum::benchserve
