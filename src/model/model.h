// The model seam. One decoder (model/decoder.h) runs every supported architecture, described by
// data (ModelConfig / ArchSpec); the registry maps GGUF architecture names to those descriptions.
//
// A Model owns its packed weights and activation workspace. forward() runs one flat varlen batch
// (ForwardBatch) against the paged KV cache and returns logits only for the rows asked for.
// Thread-safety: forward() is called by the engine core thread only; kernels parallelise inside.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/forward_batch.h"
#include "model/io/model_config.h"
#include "model/io/model_files.h"
#include "model/kv_cache.h"
#include "model/model_parallel.h"

namespace vellum::gguf {
class GgufFile;
}

namespace vellum::model {

struct ModelLoadOptions {
  // vLLM's --dtype: auto keeps the weights' own type, bfloat16 converts f32/f16 weights once at
  // load (AMX where present), float32 computes everything in f32.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::kAuto;
  // Tensor / pipeline parallelism: this rank loads and runs only its share (its heads, FFN
  // columns, vocabulary rows and layers). Default: the whole model in one process.
  ModelParallel parallel;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;

  // Runs the batch. Writes the K/V of every batch token into kv_cache at its slot, then returns
  // logits: (batch.num_logits(), vocab_size) f32, row i for token batch.logits_indices[i].
  // Under tensor / pipeline parallelism every rank calls forward() with the same batch, and the
  // logits are written on the first rank only (the others' `logits` is not touched).
  virtual void forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) = 0;

  // forward() in two halves, for a first pipeline stage that keeps several batches in flight:
  // start_forward() runs this stage's layers, hands the activations to the next stage and begins
  // receiving the logits into `logits` (which must stay valid and untouched until they are in);
  // finish_forward() waits for the logits of the oldest batch started and not yet finished.
  // Batches finish in the order they started; every start_forward() needs one finish_forward().
  // Without pipeline stages start_forward() is forward() and finish_forward() returns at once.
  virtual void start_forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) {
    forward(batch, kv_cache, logits);
  }
  virtual void finish_forward() {}

  // Shape of the KV cache this model needs, for a given block size and storage type. hybrid:
  // one KV cache group per attention type when full and sliding-window layers are mixed
  // (KvCacheLayout::hybrid); otherwise one group of all layers. Under tensor / pipeline
  // parallelism: this rank's KV heads and layers (the groups stay the model's).
  virtual KvCacheShape kv_cache_shape(int64_t block_size, KvCacheDtype dtype,
                                      bool hybrid = false) const {
    const ModelConfig& c = config();
    KvCacheShape shape{c.num_kv_heads, c.head_dim, block_size, dtype,
                       hybrid ? KvCacheLayout::hybrid(c.layer_is_sliding, c.sliding_window)
                              : KvCacheLayout::single_group(c.layer_is_sliding, c.sliding_window)};
    shape.check_dtype();  // before anything divides by its bytes
    return shape;
  }

  // Bytes of weights one forward pass of one token reads (for bandwidth reports; with
  // Mixture-of-Experts layers, the router and num_experts_used experts per layer).
  virtual size_t weight_bytes() const = 0;
  // Bytes of weights all forward() calls so far have read: every dense weight once per call, and
  // of each MoE layer the router and the experts that at least one token was routed to.
  virtual size_t weight_bytes_read() const = 0;
  // Bytes of all experts' weights (0 without MoE layers).
  virtual size_t expert_weight_bytes() const { return 0; }
  // A one-line description: architecture, sizes and the types weights are held in.
  virtual std::string describe() const = 0;
};

// Supported architectures ("llama", "qwen2", ...), for error messages.
std::vector<std::string> supported_architectures();

// Builds the model for file's general.architecture. The model keeps `file` alive (it may read
// tensors such as the embedding table straight from the mapping). Throws vellum::Error naming the
// file and the problem (unknown architecture, missing tensor, unsupported tensor type).
std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> file,
                                  const ModelLoadOptions& options);
// Builds the model of already opened files (a GGUF file or a Hugging Face directory); the model
// keeps files.weights alive.
std::unique_ptr<Model> load_model(const ModelFiles& files, const ModelLoadOptions& options);

}  // namespace vellum::model
