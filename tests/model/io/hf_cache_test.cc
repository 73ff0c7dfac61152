// A Hugging Face repo id as the model argument: resolved in the local hub cache only.
#include "model/io/hf_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"
#include "vellum/status.h"

namespace vellum::model {
namespace {

namespace fs = std::filesystem;

void touch(const fs::path& path, const std::string& text = "x") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A hub cache with models--ORG--NAME/{refs/main, snapshots/REV/...}, as huggingface_hub lays it.
class HfCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = vellum::testing::temp_dir() /
             ("hub-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(cache_);
    fs::create_directories(cache_);
  }
  void TearDown() override { fs::remove_all(cache_); }

  fs::path add_repo(const std::string& folder, const std::string& rev) {
    const fs::path repo = cache_ / folder;
    touch(repo / "refs" / "main", rev + "\n");
    fs::create_directories(repo / "snapshots" / rev);
    return repo / "snapshots" / rev;
  }

  fs::path cache_;
};

TEST(HfRepoId, ShapeOfAnId) {
  EXPECT_TRUE(looks_like_hf_repo_id("HuggingFaceTB/SmolLM2-135M-Instruct"));
  EXPECT_TRUE(looks_like_hf_repo_id("gpt2"));
  EXPECT_TRUE(looks_like_hf_repo_id("org/model.v1_2"));
  EXPECT_FALSE(looks_like_hf_repo_id("/abs/path"));
  EXPECT_FALSE(looks_like_hf_repo_id("./rel"));
  EXPECT_FALSE(looks_like_hf_repo_id("~/m.gguf"));
  EXPECT_FALSE(looks_like_hf_repo_id("a/b/c"));
  EXPECT_FALSE(looks_like_hf_repo_id("a/../b"));
  EXPECT_FALSE(looks_like_hf_repo_id("org/"));
  EXPECT_FALSE(looks_like_hf_repo_id("org/with space"));
  EXPECT_FALSE(looks_like_hf_repo_id(""));
}

TEST(HfRepoId, CacheFolderFollowsHuggingFaceHubsOrder) {
  ScopedEnv hub("HF_HUB_CACHE", "/hub-cache");
  ScopedEnv home("HF_HOME", "/hf-home");
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hub-cache"));
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hf-home/hub"));
  ::unsetenv("HF_HOME");
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/xdg/huggingface/hub"));
  ::unsetenv("XDG_CACHE_HOME");
  ScopedEnv user_home("HOME", "/home/u");
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/home/u/.cache/huggingface/hub"));
}

TEST_F(HfCacheTest, ExistingPathsAreKeptAsGiven) {
  const fs::path file = cache_ / "m.gguf";
  touch(file);
  EXPECT_EQ(resolve_model_path(file.string()), file);
  // A missing path that is no repo id comes back for the loader to name in its error.
  EXPECT_EQ(resolve_model_path("/no/such/model.gguf"), fs::path("/no/such/model.gguf"));
}

TEST_F(HfCacheTest, CheckpointSnapshotIsTheModelDirectory) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.string());
  const fs::path snapshot = add_repo("models--Org--Model", "abc123");
  touch(snapshot / "config.json", "{}");
  touch(snapshot / "model.safetensors");
  // Another snapshot that refs/main does not name is ignored.
  touch(cache_ / "models--Org--Model" / "snapshots" / "old" / "config.json", "{}");
  EXPECT_EQ(resolve_model_path("Org/Model"), snapshot);
}

TEST_F(HfCacheTest, OnlyGgufOfASnapshotIsChosen) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.string());
  const fs::path snapshot = add_repo("models--Org--Model-GGUF", "r1");
  touch(snapshot / "model-Q4_1.gguf");
  touch(snapshot / "README.md");
  EXPECT_EQ(resolve_model_path("Org/Model-GGUF"), snapshot / "model-Q4_1.gguf");
}

TEST_F(HfCacheTest, SeveralGgufsNeedGgufFile) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.string());
  const fs::path snapshot = add_repo("models--Org--Many", "r1");
  touch(snapshot / "a-Q4_0.gguf");
  touch(snapshot / "a-Q8_0.gguf");
  try {
    resolve_model_path("Org/Many");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("a-Q4_0.gguf, a-Q8_0.gguf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--gguf-file"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolve_model_path("Org/Many", "a-Q8_0.gguf"), snapshot / "a-Q8_0.gguf");
  try {
    resolve_model_path("Org/Many", "a-F16.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("a-Q4_0.gguf, a-Q8_0.gguf"), std::string::npos) << e.what();
  }
}

TEST_F(HfCacheTest, GgufFileInsideALocalDirectory) {
  touch(cache_ / "local" / "x.gguf");
  EXPECT_EQ(resolve_model_path((cache_ / "local").string(), "x.gguf"), cache_ / "local" / "x.gguf");
  EXPECT_THROW(resolve_model_path((cache_ / "local" / "x.gguf").string(), "x.gguf"), Error);
}

TEST_F(HfCacheTest, SnapshotWithoutRefsIsUsedWhenItIsTheOnlyOne) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.string());
  touch(cache_ / "models--gpt2" / "snapshots" / "only" / "config.json", "{}");
  EXPECT_EQ(resolve_model_path("gpt2"), cache_ / "models--gpt2" / "snapshots" / "only");
}

TEST_F(HfCacheTest, MissingRepoNamesThePathsTried) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.string());
  try {
    resolve_model_path("Org/Absent");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(message.find("'Org/Absent' does not exist"), std::string::npos) << message;
    EXPECT_NE(message.find((cache_ / "models--Org--Absent").string()), std::string::npos)
        << message;
    EXPECT_NE(message.find("HF_HUB_CACHE"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace vellum::model
