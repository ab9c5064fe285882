// llama.cpp's reading of Gemma 4 output, for tests/js/chat/: the request's chat parameters made by
// its common chat layer from Google's template (common_chat_templates_apply), then
// common_chat_parse on each output, whole and, with "prefixes", on every byte prefix as its
// server parses a stream. Built against the oracle's libllama-common (support/llama_gemma4_parse.mjs).
//   llama_gemma4_parse TEMPLATE.jinja < {"tools": [names], "required": bool, "parallel": bool,
//                                         "thinking": bool, "prefixes": bool, "outputs": [text]}
// prints [{"whole": MSG, "prefixes": [MSG per prefix of 0..n bytes]}], MSG {content,
// reasoning_content, tool_calls: [{name, arguments}]} or {error} where the parse throws.
#include "chat.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

static common_json parsed(const std::string & text, bool partial, const common_chat_parser_params & params) {
    try {
        const common_chat_msg msg = common_chat_parse(text, partial, params);
        common_json calls = common_json::array();
        for (const auto & call : msg.tool_calls) {
            calls.push_back(common_json::object({ { "name", call.name }, { "arguments", call.arguments } }));
        }
        return common_json::object({ { "content", msg.content }, { "reasoning_content", msg.reasoning_content }, { "tool_calls", calls } });
    } catch (const std::exception & e) {
        return common_json::object({ { "error", std::string(e.what()) } });
    }
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::cerr << "usage: llama_gemma4_parse TEMPLATE.jinja < request.json\n";
        return 2;
    }
    std::ifstream file(argv[1]);
    const std::string source((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const common_json request = common_json::parse(body);

    auto templates = common_chat_templates_init(nullptr, source);
    common_chat_templates_inputs inputs;
    common_chat_msg user;
    user.role    = "user";
    user.content = "Hi";
    inputs.messages = { user };
    const common_json & names = request.at("tools");
    for (size_t i = 0; i < names.size(); i++) {
        inputs.tools.push_back({ names.at(i).get<std::string>(), "", R"({"type":"object","properties":{}})" });
    }
    inputs.tool_choice         = request.value("required", false) ? COMMON_CHAT_TOOL_CHOICE_REQUIRED : COMMON_CHAT_TOOL_CHOICE_AUTO;
    inputs.parallel_tool_calls = request.at("parallel").get<bool>();
    inputs.enable_thinking     = request.at("thinking").get<bool>();
    // The server's default (--reasoning-format auto): thoughts go to reasoning_content.
    inputs.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
    const common_chat_params chat = common_chat_templates_apply(templates.get(), inputs);

    common_chat_parser_params params(chat);
    params.reasoning_format = inputs.reasoning_format;
    params.parser.load(chat.parser);

    const bool prefixes = request.at("prefixes").get<bool>();
    const common_json & outputs = request.at("outputs");
    common_json answers = common_json::array();
    for (size_t i = 0; i < outputs.size(); i++) {
        const std::string text = outputs.at(i).get<std::string>();
        common_json answer = common_json::object({ { "whole", parsed(text, false, params) } });
        if (prefixes) {
            common_json partial = common_json::array();
            for (size_t n = 0; n <= text.size(); n++) partial.push_back(parsed(text.substr(0, n), true, params));
            answer["prefixes"] = partial;
        }
        answers.push_back(answer);
    }
    std::cout << answers.dump() << "\n";
    return 0;
}
