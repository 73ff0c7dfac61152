// Chat-template family table: each template under templates/ is our own, written with the Jinja
// constructs the published template of that family uses. The expected prompts are the family's
// exact format (role markers, special tokens, whitespace); they were cross-checked against
// Jinja2 3.1 configured like transformers' apply_chat_template (tools/hf_reference.py).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "jinja_test_util.h"
#include "test_util.h"
#include "tokenizer/jinja/chat_template.h"
#include "vellum/status.h"

namespace vellum::jinja {
namespace {

using testing::read_test_template;

const nlohmann::json kConversation = nlohmann::json::parse(R"([
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "Hi there"},
  {"role": "assistant", "content": "Hello! How can I help?"},
  {"role": "user", "content": "What is 2+2?"}
])");

struct FamilyCase {
  const char* name;
  const char* file;
  const char* bos;
  const char* eos;
  const char* without_generation_prompt;
  const char* with_generation_prompt;
};

const FamilyCase kFamilies[] = {
    {"Llama2", "llama2.jinja", "<s>", "</s>",
     "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! How can I help? "
     "</s><s>[INST] What is 2+2? [/INST]",
     // Llama 2's template ignores add_generation_prompt: the prompt already ends in [/INST].
     "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! How can I help? "
     "</s><s>[INST] What is 2+2? [/INST]"},
    {"Llama3", "llama3.jinja", "<|begin_of_text|>", "<|eot_id|>",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
     "December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|><|start_header_id|>user"
     "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
     "Hello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?"
     "<|eot_id|>",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
     "December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|><|start_header_id|>user"
     "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
     "Hello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?"
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"MistralV3", "mistral_v3.jinja", "<s>", "</s>",
     "<s>[INST] Hi there[/INST] Hello! How can I help?</s>[INST] You are terse.\n\nWhat is 2+2?"
     "[/INST]",
     "<s>[INST] Hi there[/INST] Hello! How can I help?</s>[INST] You are terse.\n\nWhat is 2+2?"
     "[/INST]"},
    {"MistralV7", "mistral_v7.jinja", "<s>", "</s>",
     "<s>[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]Hi there[/INST]Hello! How can I "
     "help?</s>[INST]What is 2+2?[/INST]",
     "<s>[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]Hi there[/INST]Hello! How can I "
     "help?</s>[INST]What is 2+2?[/INST]"},
    {"Qwen25", "qwen25.jinja", "", "<|im_end|>",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"Qwen3", "qwen3.jinja", "", "<|im_end|>",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"ChatML", "chatml.jinja", "", "",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"Phi3", "phi3.jinja", "<s>", "<|endoftext|>",
     "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How "
     "can I help?<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|endoftext|>",
     "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How "
     "can I help?<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n"},
    {"Gemma", "gemma.jinja", "<bos>", "<eos>",
     "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n<start_of_turn>model\n"
     "Hello! How can I help?<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n",
     "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n<start_of_turn>model\n"
     "Hello! How can I help?<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
     "<start_of_turn>model\n"},
    {"SmolLM", "smollm.jinja", "", "<|im_end|>",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"DeepSeek", "deepseek.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
     "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hi there<｜Assistant｜>Hello! How can I "
     "help?<｜end▁of▁sentence｜><｜User｜>What is 2+2?",
     "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hi there<｜Assistant｜>Hello! How can I "
     "help?<｜end▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜>"},
};

// Names the case in test output instead of dumping its bytes.
void PrintTo(const FamilyCase& family, std::ostream* os) { *os << family.name; }

ChatTemplateOptions family_options(const FamilyCase& family, bool add_generation_prompt) {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = family.bos;
  options.eos_token = family.eos;
  options.local_time = testing::fixed_local_time;
  return options;
}

class ChatTemplateFamilyTest : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(ChatTemplateFamilyTest, RendersTheFamilyPromptFormat) {
  const FamilyCase& family = GetParam();
  const ChatTemplate tmpl = ChatTemplate::parse(read_test_template(family.file));
  EXPECT_EQ(tmpl.apply(kConversation, family_options(family, false)),
            family.without_generation_prompt);
  EXPECT_EQ(tmpl.apply(kConversation, family_options(family, true)), family.with_generation_prompt);
  // The one-shot helper parses and renders the same way.
  EXPECT_EQ(apply_chat_template(read_test_template(family.file), kConversation,
                                family_options(family, true)),
            family.with_generation_prompt);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatTemplateFamilyTest, ::testing::ValuesIn(kFamilies),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

std::string apply_file(const char* file, const nlohmann::json& messages, ChatTemplateOptions options) {
  options.local_time = testing::fixed_local_time;
  return apply_chat_template(read_test_template(file), messages, options);
}

std::string error_of(const char* file, const nlohmann::json& messages) {
  try {
    apply_file(file, messages, {});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << file << " rendered without an error";
  return "";
}

TEST(ChatTemplateTest, Qwen25AddsItsDefaultSystemPrompt) {
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": "Hi"}])");
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  EXPECT_EQ(apply_file("qwen25.jinja", messages, options),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Qwen25RendersToolsAsJsonLines) {
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": "Weather?"}])");
  ChatTemplateOptions options;
  options.tools = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
  const std::string prompt = apply_file("qwen25.jinja", messages, options);
  EXPECT_NE(prompt.find("<tools>\n{\"function\": {\"name\": \"get_weather\", \"parameters\": "
                        "{\"type\": \"object\"}}, \"type\": \"function\"}\n</tools>"),
            std::string::npos)
      << prompt;
}

TEST(ChatTemplateTest, OrderedJsonKeepsToolSchemaKeyOrder) {
  // Python's json.dumps keeps insertion order; so does ordered_json (type before function here).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "Weather?"}});
  ChatTemplateOptions options;
  options.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
  const std::string prompt = apply_chat_template(read_test_template("qwen25.jinja"), messages, options);
  EXPECT_NE(prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                        "\"parameters\": {\"type\": \"object\"}}}\n</tools>"),
            std::string::npos)
      << prompt;
  EXPECT_EQ(ChatTemplate::parse("{{ messages[0] | tojson }}").apply(messages, {}),
            R"({"role": "user", "content": "Weather?"})");
}

TEST(ChatTemplateTest, Qwen3StripsHistoricalThinkingAndKeepsTheLatest) {
  const auto messages = nlohmann::json::parse(R"([
    {"role": "user", "content": "A"},
    {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nB"},
    {"role": "user", "content": "C"},
    {"role": "assistant", "content": "<think>\nnew reasoning\n</think>\n\nD"}
  ])");
  EXPECT_EQ(apply_file("qwen3.jinja", messages, {}),
            "<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\nB<|im_end|>\n"
            "<|im_start|>user\nC<|im_end|>\n<|im_start|>assistant\n<think>\nnew reasoning\n"
            "</think>\n\nD<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3EnableThinkingFalseAddsAnEmptyThinkBlock) {
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": "Hi"}])");
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.extra_context = {{"enable_thinking", false}};
  EXPECT_EQ(apply_file("qwen3.jinja", messages, options),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  options.extra_context = {{"enable_thinking", true}};
  EXPECT_EQ(apply_file("qwen3.jinja", messages, options),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Llama3RendersToolCallsAndToolResults) {
  const auto messages = nlohmann::json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": {"temp_c": 21}}
  ])");
  EXPECT_EQ(apply_file("llama3.jinja", messages, {}),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp_c\": 21}<|eot_id|>");
}

TEST(ChatTemplateTest, MistralRejectsRolesThatDoNotAlternate) {
  const auto messages = nlohmann::json::parse(
      R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  const std::string message = error_of("mistral_v3.jinja", messages);
  EXPECT_NE(message.find("conversation roles must alternate user/assistant"), std::string::npos) << message;
  EXPECT_NE(message.find("template raised an error at line 12, column 13"), std::string::npos) << message;
}

TEST(ChatTemplateTest, GemmaRejectsASystemMessageAfterTheFirst) {
  const auto messages = nlohmann::json::parse(
      R"([{"role": "user", "content": "a"}, {"role": "system", "content": "late"}])");
  const std::string message = error_of("gemma.jinja", messages);
  EXPECT_NE(message.find("System role is only supported as the first message"), std::string::npos) << message;
  EXPECT_NE(message.find("line 11"), std::string::npos) << message;
}

TEST(ChatTemplateTest, GemmaRendersMultimodalContentParts) {
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": [
      {"type": "image"}, {"type": "text", "text": "  What is this?  "}]}])");
  EXPECT_EQ(apply_file("gemma.jinja", messages, {}),
            "<start_of_turn>user\n<start_of_image>What is this?<end_of_turn>\n");
}

TEST(ChatTemplateTest, SmolLmAddsItsDefaultSystemPrompt) {
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": "Hi"}])");
  EXPECT_EQ(apply_file("smollm.jinja", messages, {}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateTest, DeepSeekDropsReasoningFromHistory) {
  const auto messages = nlohmann::json::parse(R"([
    {"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>hmm</think>A"}])");
  EXPECT_EQ(apply_file("deepseek.jinja", messages, {}), "<｜User｜>Q<｜Assistant｜>A<｜end▁of▁sentence｜>");
}

TEST(ChatTemplateTest, ContinueFinalMessageLeavesTheLastTurnOpen) {
  const auto messages = nlohmann::json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is "}])");
  ChatTemplateOptions options;
  options.continue_final_message = true;
  // ChatML keeps the trailing space; Gemma trims content, so the cut follows the trimmed text.
  EXPECT_EQ(apply_file("chatml.jinja", messages, options),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nThe answer is ");
  EXPECT_EQ(apply_file("gemma.jinja", messages, options),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nThe answer is");
  options.add_generation_prompt = true;
  EXPECT_THROW(apply_file("chatml.jinja", messages, options), Error);
  options.add_generation_prompt = false;
  // DeepSeek drops the reasoning from history, so the final message is not in the prompt.
  const auto dropped = nlohmann::json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>r</think>gone"}])");
  EXPECT_THROW(apply_file("deepseek.jinja", dropped, options), Error);
}

TEST(ChatTemplateTest, RendersConcurrentlyFromOneParsedTemplate) {
  const ChatTemplate tmpl = ChatTemplate::parse(read_test_template("qwen3.jinja"));
  const FamilyCase& qwen3 = kFamilies[5];
  ASSERT_STREQ(qwen3.name, "Qwen3");
  std::atomic<int> num_mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (tmpl.apply(kConversation, family_options(qwen3, true)) != qwen3.with_generation_prompt) {
          ++num_mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(num_mismatches.load(), 0);
}

TEST(ChatTemplateTest, RejectsMessagesThatAreNotAnArray) {
  EXPECT_THROW(apply_chat_template("{{ messages }}", nlohmann::json::object(), {}), Error);
  ChatTemplateOptions options;
  options.tools = "not a list";
  EXPECT_THROW(apply_chat_template("x", nlohmann::json::array(), options), Error);
}

TEST(ChatTemplateTest, ToolsIsDefinedButNoneWithoutTools) {
  EXPECT_EQ(apply_chat_template("{{ tools is defined }} {{ tools is none }}", nlohmann::json::array(), {}),
            "True True");
}

TEST(ChatTemplateTest, SelectsANamedTemplateFromAList) {
  const auto field = nlohmann::json::parse(
      R"([{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}])");
  EXPECT_EQ(select_chat_template(field, false), "D");
  EXPECT_EQ(select_chat_template(field, true), "T");
  EXPECT_EQ(select_chat_template(nlohmann::json("S"), true), "S");
  EXPECT_THROW(select_chat_template(nlohmann::json::parse(R"([{"name": "rag", "template": "R"}])"), false), Error);
  EXPECT_THROW(select_chat_template(nlohmann::json(3), false), Error);
}

TEST(ChatTemplateTest, LoadsATemplateFileAndNamesAMissingOne) {
  const auto path = vellum::testing::temp_dir() / "chat-template.jinja";
  {
    std::ofstream file(path);
    file << "{{ messages | length }}";
  }
  EXPECT_EQ(apply_chat_template(load_chat_template_file(path.string()), nlohmann::json::array({1, 2}), {}), "2");
  std::filesystem::remove(path);
  try {
    load_chat_template_file("/nonexistent/chat.jinja");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/chat.jinja"), std::string::npos);
  }
}

}  // namespace
}  // namespace vellum::jinja
