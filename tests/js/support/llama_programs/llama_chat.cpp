// llama.cpp's own rendering of chat requests, as its server renders them: each line of stdin is
// one OpenAI-style request {messages, tools?, tool_choice?, enable_thinking?}; each line of stdout
// is {"prompt": the text common_chat_templates_apply renders, "tokens": that text tokenized as
// the server tokenizes a chat prompt (BOS by the vocabulary's rule, control-token texts parsed)}.
// Built at test time against the oracle's libllama-common (tests/js/support/llama_chat.mjs).
//   llama_chat VOCAB.gguf [TEMPLATE.jinja] < requests.jsonl
#include "chat.h"
#include "common.h"
#include "llama.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char ** argv) {
    if (argc < 2) {
        std::cerr << "usage: llama_chat VOCAB.gguf [TEMPLATE.jinja] < requests.jsonl\n";
        return 2;
    }
    std::string template_source;
    if (argc > 2) {
        std::ifstream in(argv[2], std::ios::binary);
        if (!in) {
            std::cerr << "cannot read " << argv[2] << "\n";
            return 2;
        }
        std::stringstream text;
        text << in.rdbuf();
        template_source = text.str();
    }
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_params mparams = llama_model_default_params();
    mparams.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mparams);
    if (!model) {
        std::cerr << "cannot load " << argv[1] << "\n";
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    common_chat_templates_ptr templates = common_chat_templates_init(model, template_source);

    std::string line;
    while (std::getline(std::cin, line)) {
        common_json request = common_json::parse(line);
        common_chat_templates_inputs inputs;
        inputs.messages = common_chat_msgs_parse_oaicompat(request.at("messages"));
        if (request.contains("tools")) inputs.tools = common_chat_tools_parse_oaicompat(request.at("tools"));
        if (request.contains("tool_choice")) {
            inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(request.at("tool_choice").get<std::string>());
        }
        inputs.enable_thinking = request.contains("enable_thinking") && request.at("enable_thinking").get<bool>();
        common_json out = common_json::object();
        try {
            common_chat_params params = common_chat_templates_apply(templates.get(), inputs);
            // The server's chat prompt: add_special and parse_special on.
            std::vector<llama_token> tokens = common_tokenize(vocab, params.prompt, true, true);
            common_json ids = common_json::array();
            for (llama_token id : tokens) ids.push_back(common_json(id));
            out["prompt"] = params.prompt;
            out["tokens"] = ids;
        } catch (const std::exception & error) {
            out["error"] = std::string(error.what());
        }
        std::cout << out.dump() << "\n" << std::flush;
    }
    llama_model_free(model);
    return 0;
}
