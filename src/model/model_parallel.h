// ModelParallel: this process's place in a tensor- and pipeline-parallel layout
// (model/tensor_parallel.h says how the model is cut).
#pragma once

#include "common/communicator.h"

namespace vellum::model {

// This rank's place in the parallel layout. The communicators are owned by the engine and outlive
// the model; null means a group of one.
struct ModelParallel {
  Communicator* tp = nullptr;  // the ranks of this pipeline stage (all-reduce, logits gather)
  Communicator* pp = nullptr;  // one rank per stage with this rank's tp index (activations)

  int tp_rank() const { return tp ? tp->rank() : 0; }
  int tp_size() const { return tp ? tp->size() : 1; }
  int pp_rank() const { return pp ? pp->rank() : 0; }
  int pp_size() const { return pp ? pp->size() : 1; }
};

}  // namespace vellum::model
