#include "engine/model_runner.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "common/check.h"
#include "common/logging.h"

namespace vellum::engine {

ModelRunner::ModelRunner(model::Model& model, const model::KvCacheShape& shape, int64_t num_blocks,
                         int64_t num_host_blocks, Communicator* control, int pipeline_stages)
    : model_(model), cache_(shape, num_blocks), control_(control) {
  if (num_host_blocks > 0) host_cache_.emplace(shape, num_host_blocks);
  in_flight_.resize(drives() ? static_cast<size_t>(std::max(pipeline_stages, 1)) : 1);
}

ModelRunner::~ModelRunner() {
  if (!drives() || control_failed_) return;
  try {
    while (num_in_flight_ > 0) collect();
    broadcast_op(Op::kShutdown, {});
  } catch (const std::exception& e) {
    VELLUM_LOG_WARN("could not tell the other ranks to stop: {}", e.what());
  }
}

namespace {
void split(std::span<const BlockMove> moves, std::vector<int32_t>& src, std::vector<int32_t>& dst) {
  src.clear();
  dst.clear();
  for (const BlockMove& m : moves) {
    src.push_back(m.src);
    dst.push_back(m.dst);
  }
}

// Runs f; a failure marks the runner's peers as possibly gone (no shutdown message is sent).
template <typename F>
auto guarded(bool& failed, F&& f) {
  try {
    return f();
  } catch (...) {
    failed = true;
    throw;
  }
}
}  // namespace

// ---- the wire format (int32 words) --------------------------------------------------------------
//   header (broadcast first): {op, payload words} as two int64
//   moves:     num_moves, then (src, dst) pairs
//   sequences: num_seqs, num_groups, then per sequence (num_new, num_computed, num_logits, and
//              num_blocks of each KV cache group), then every sequence's new tokens, then every
//              sequence's block ids, group after group

void ModelRunner::broadcast_op(Op op, std::span<const int32_t> payload) {
  std::array<int64_t, 2> header = {static_cast<int64_t>(op), static_cast<int64_t>(payload.size())};
  control_->broadcast(header.data(), sizeof(header), 0);
  if (!payload.empty()) {
    control_->broadcast(const_cast<int32_t*>(payload.data()),
                        static_cast<int64_t>(payload.size_bytes()), 0);
  }
}

void ModelRunner::encode_moves(std::span<const BlockMove> moves) {
  payload_.clear();
  payload_.push_back(static_cast<int32_t>(moves.size()));
  for (const BlockMove& m : moves) {
    payload_.push_back(m.src);
    payload_.push_back(m.dst);
  }
}

void ModelRunner::encode_sequences(std::span<const RunnerSequence> sequences) {
  const auto num_groups = static_cast<size_t>(cache_.shape().layout.num_groups());
  payload_.clear();
  payload_.push_back(static_cast<int32_t>(sequences.size()));
  payload_.push_back(static_cast<int32_t>(num_groups));
  for (const RunnerSequence& s : sequences) {
    VELLUM_CHECK(s.group_block_ids.size() == num_groups, ErrorCode::kInternal,
                 "a sequence has block tables for {} KV cache groups, the cache {}",
                 s.group_block_ids.size(), num_groups);
    payload_.push_back(static_cast<int32_t>(s.new_tokens.size()));
    payload_.push_back(s.num_computed_tokens);
    payload_.push_back(s.num_logits);
    for (const std::vector<int32_t>& table : s.group_block_ids) {
      payload_.push_back(static_cast<int32_t>(table.size()));
    }
  }
  for (const RunnerSequence& s : sequences) {
    payload_.insert(payload_.end(), s.new_tokens.begin(), s.new_tokens.end());
  }
  for (const RunnerSequence& s : sequences) {
    for (const std::vector<int32_t>& table : s.group_block_ids) {
      payload_.insert(payload_.end(), table.begin(), table.end());
    }
  }
}

void ModelRunner::apply_block_copies(std::span<const BlockMove> copies) {
  if (copies.empty()) return;
  guarded(control_failed_, [&] {
    if (drives()) {
      encode_moves(copies);
      broadcast_op(Op::kCopy, payload_);
    }
    do_apply_block_copies(copies);
  });
}

void ModelRunner::swap_out(std::span<const BlockMove> moves) {
  if (moves.empty()) return;
  guarded(control_failed_, [&] {
    if (drives()) {
      encode_moves(moves);
      broadcast_op(Op::kSwapOut, payload_);
    }
    do_swap_out(moves);
  });
}

void ModelRunner::swap_in(std::span<const BlockMove> moves) {
  if (moves.empty()) return;
  guarded(control_failed_, [&] {
    if (drives()) {
      encode_moves(moves);
      broadcast_op(Op::kSwapIn, payload_);
    }
    do_swap_in(moves);
  });
}

void ModelRunner::launch(std::span<const RunnerSequence> sequences) {
  VELLUM_CHECK(num_in_flight_ < max_in_flight(), ErrorCode::kInternal,
               "launch() with {} steps in flight: collect() one first", num_in_flight_);
  InFlight& slot =
      in_flight_[static_cast<size_t>((oldest_in_flight_ + num_in_flight_) % max_in_flight())];
  guarded(control_failed_, [&] {
    if (drives()) {
      encode_sequences(sequences);
      // The header now; the step itself without waiting for the later stages to take it (they
      // may still be busy with the previous step): collect() makes sure it went out.
      std::array<int64_t, 2> header = {static_cast<int64_t>(Op::kExecute),
                                       static_cast<int64_t>(payload_.size())};
      control_->broadcast(header.data(), sizeof(header), 0);
      slot.payload.swap(payload_);
      slot.payload_sent = control_->start_broadcast(
          slot.payload.data(), static_cast<int64_t>(slot.payload.size() * sizeof(int32_t)), 0);
    }
    do_launch(sequences, slot);
  });
  ++num_in_flight_;
}

std::span<float> ModelRunner::collect() {
  VELLUM_CHECK(num_in_flight_ > 0, ErrorCode::kInternal, "collect() without a step in flight");
  InFlight& slot = in_flight_[static_cast<size_t>(oldest_in_flight_)];
  oldest_in_flight_ = (oldest_in_flight_ + 1) % max_in_flight();
  --num_in_flight_;
  guarded(control_failed_, [&] {
    model_.finish_forward();
    if (slot.payload_sent) {
      const Communicator::Ticket ticket = *slot.payload_sent;
      slot.payload_sent.reset();
      control_->wait(ticket);
    }
  });
  return {slot.logits.data(), slot.num_logits_floats};
}

void ModelRunner::do_apply_block_copies(std::span<const BlockMove> copies) {
  split(copies, src_ids_, dst_ids_);
  cache_.copy_blocks(src_ids_.data(), dst_ids_.data(), static_cast<int64_t>(copies.size()));
}

void ModelRunner::do_swap_out(std::span<const BlockMove> moves) {
  VELLUM_CHECK(host_cache_.has_value(), ErrorCode::kInternal, "swap-out without a swap space");
  split(moves, src_ids_, dst_ids_);
  model::KvCache::swap_blocks(*host_cache_, cache_, src_ids_.data(), dst_ids_.data(),
                              static_cast<int64_t>(moves.size()));
}

void ModelRunner::do_swap_in(std::span<const BlockMove> moves) {
  VELLUM_CHECK(host_cache_.has_value(), ErrorCode::kInternal, "swap-in without a swap space");
  split(moves, src_ids_, dst_ids_);
  model::KvCache::swap_blocks(cache_, *host_cache_, src_ids_.data(), dst_ids_.data(),
                              static_cast<int64_t>(moves.size()));
}

void ModelRunner::do_launch(std::span<const RunnerSequence> sequences, InFlight& slot) {
  batch_.clear();
  const auto block_size = static_cast<int32_t>(cache_.shape().block_size);
  for (const RunnerSequence& s : sequences) {
    tables_.assign(s.group_block_ids.begin(), s.group_block_ids.end());
    batch_.add_sequence(s.new_tokens.data(), static_cast<int32_t>(s.new_tokens.size()),
                        s.num_computed_tokens, tables_, block_size, s.num_logits);
  }
  batch_.finalize();
  slot.num_logits_floats = static_cast<size_t>(batch_.num_logits() * vocab_size());
  if (slot.logits.size() < slot.num_logits_floats) slot.logits.resize(slot.num_logits_floats);
  model_.start_forward(batch_, cache_, slot.logits.data());
}

double ModelRunner::probe_all_reduce(int64_t count, int rounds) {
  if (!drives()) return 0.0;
  return guarded(control_failed_, [&] {
    const std::array<int32_t, 2> payload = {static_cast<int32_t>(count), rounds};
    broadcast_op(Op::kProbeAllReduce, payload);
    return do_probe_all_reduce(count, rounds);
  });
}

double ModelRunner::do_probe_all_reduce(int64_t count, int rounds) {
  std::vector<float> data(static_cast<size_t>(count), 1.0f);
  std::vector<double> seconds;
  for (int i = 0; i < rounds; ++i) {
    control_->all_min(0);  // every rank is here
    const auto start = std::chrono::steady_clock::now();
    control_->all_reduce_sum(data.data(), count);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds.empty() ? 0.0 : seconds[seconds.size() / 2];
}

void ModelRunner::keep_alive() {
  if (!drives()) return;
  guarded(control_failed_, [&] { broadcast_op(Op::kKeepAlive, {}); });
}

void ModelRunner::run_worker_loop(double first_wait_seconds, double idle_timeout_seconds) {
  VELLUM_CHECK(control_ != nullptr && control_->rank() != 0, ErrorCode::kInternal,
               "run_worker_loop() runs on ranks other than 0");
  double wait_seconds = first_wait_seconds;
  while (true) {
    std::array<int64_t, 2> header{};
    control_->wait_for_broadcast(header.data(), sizeof(header), 0, wait_seconds);
    wait_seconds = idle_timeout_seconds;
    const auto op = static_cast<Op>(header[0]);
    payload_.resize(static_cast<size_t>(header[1]));
    if (header[1] > 0) {
      control_->broadcast(payload_.data(), header[1] * static_cast<int64_t>(sizeof(int32_t)), 0);
    }
    if (op == Op::kShutdown) return;
    if (op == Op::kKeepAlive) continue;
    if (op == Op::kProbeAllReduce) {
      do_probe_all_reduce(payload_.at(0), payload_.at(1));
      continue;
    }
    if (op == Op::kExecute) {
      const auto num_seqs = static_cast<size_t>(payload_.at(0));
      const auto num_groups = static_cast<size_t>(payload_.at(1));
      VELLUM_CHECK(static_cast<int64_t>(num_groups) == cache_.shape().layout.num_groups(),
                   ErrorCode::kInternal,
                   "rank 0 sent block tables for {} KV cache groups, this rank's cache has {}",
                   num_groups, cache_.shape().layout.num_groups());
      const size_t meta_words = 3 + num_groups;
      sequences_.resize(num_seqs);
      worker_tables_.resize(num_seqs);
      size_t cursor = 2 + meta_words * num_seqs;
      VELLUM_CHECK(cursor <= payload_.size(), ErrorCode::kInternal,
                   "malformed step message from rank 0");
      for (size_t i = 0; i < num_seqs; ++i) {
        const int32_t* meta = payload_.data() + 2 + meta_words * i;
        sequences_[i].new_tokens = {payload_.data() + cursor, static_cast<size_t>(meta[0])};
        sequences_[i].num_computed_tokens = meta[1];
        sequences_[i].num_logits = meta[2];
        cursor += static_cast<size_t>(meta[0]);
      }
      for (size_t i = 0; i < num_seqs; ++i) {
        const int32_t* meta = payload_.data() + 2 + meta_words * i;
        worker_tables_[i].resize(num_groups);
        for (size_t g = 0; g < num_groups; ++g) {
          const auto n = static_cast<size_t>(meta[3 + g]);
          VELLUM_CHECK(cursor + n <= payload_.size(), ErrorCode::kInternal,
                       "malformed step message from rank 0");
          worker_tables_[i][g].assign(payload_.data() + cursor, payload_.data() + cursor + n);
          cursor += n;
        }
        sequences_[i].group_block_ids = worker_tables_[i];
      }
      VELLUM_CHECK(cursor == payload_.size(), ErrorCode::kInternal,
                   "malformed step message from rank 0 ({} words, {} decoded)", payload_.size(),
                   cursor);
      do_launch(sequences_, in_flight_[0]);
      model_.finish_forward();
      continue;
    }
    const auto num_moves = static_cast<size_t>(payload_.at(0));
    VELLUM_CHECK(payload_.size() == 1 + 2 * num_moves, ErrorCode::kInternal,
                 "malformed block-move message from rank 0");
    moves_.resize(num_moves);
    for (size_t i = 0; i < num_moves; ++i) {
      moves_[i] = {payload_[1 + 2 * i], payload_[2 + 2 * i]};
    }
    switch (op) {
      case Op::kCopy: do_apply_block_copies(moves_); break;
      case Op::kSwapOut: do_swap_out(moves_); break;
      case Op::kSwapIn: do_swap_in(moves_); break;
      default:
        VELLUM_THROW(ErrorCode::kInternal, "unknown step message {} from rank 0", header[0]);
    }
  }
}

}  // namespace vellum::engine
