#include "core/host_block_pool.h"

#include "common/check.h"

namespace vellum::core {

HostBlockPool::HostBlockPool(int num_blocks) {
  VELLUM_CHECK(num_blocks >= 0, ErrorCode::kInvalidArgument,
               "num_host_blocks must be >= 0, got {}", num_blocks);
  ref_cnts_.assign(static_cast<size_t>(num_blocks), 0);
  for (BlockId id = 0; id < num_blocks; ++id) free_ids_.push_back(id);
}

int HostBlockPool::ref_cnt(BlockId id) const {
  VELLUM_CHECK(id >= 0 && id < num_blocks(), ErrorCode::kInvalidArgument,
               "host block id {} is out of range [0, {})", id, num_blocks());
  return ref_cnts_[static_cast<size_t>(id)];
}

std::vector<BlockId> HostBlockPool::allocate(int n) {
  VELLUM_CHECK(n >= 0 && n <= num_free_blocks(), ErrorCode::kOutOfMemory,
               "cannot allocate {} host blocks, {} free; raise num_host_blocks (swap space)", n,
               num_free_blocks());
  std::vector<BlockId> ids(free_ids_.begin(), free_ids_.begin() + n);
  free_ids_.erase(free_ids_.begin(), free_ids_.begin() + n);
  for (BlockId id : ids) ref_cnts_[static_cast<size_t>(id)] = 1;
  return ids;
}

void HostBlockPool::incref(BlockId id) {
  VELLUM_CHECK(ref_cnt(id) > 0, ErrorCode::kInvalidArgument,
               "incref of free host block {}", id);
  ++ref_cnts_[static_cast<size_t>(id)];
}

void HostBlockPool::free(BlockId id) {
  VELLUM_CHECK(ref_cnt(id) > 0, ErrorCode::kInvalidArgument,
               "double free: host block {} is already free", id);
  if (--ref_cnts_[static_cast<size_t>(id)] == 0) free_ids_.push_back(id);
}

void HostBlockPool::check_invariants() const {
  std::vector<bool> is_free(ref_cnts_.size(), false);
  for (BlockId id : free_ids_) {
    VELLUM_CHECK(id >= 0 && id < num_blocks() && !is_free[static_cast<size_t>(id)],
                 ErrorCode::kInternal, "host free list holds block {} twice or out of range", id);
    is_free[static_cast<size_t>(id)] = true;
  }
  for (size_t i = 0; i < ref_cnts_.size(); ++i) {
    VELLUM_CHECK(ref_cnts_[i] >= 0 && is_free[i] == (ref_cnts_[i] == 0), ErrorCode::kInternal,
                 "host block {} has ref_cnt {} but is {}in the free list", i, ref_cnts_[i],
                 is_free[i] ? "" : "not ");
  }
}

}  // namespace vellum::core
