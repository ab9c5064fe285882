// Which type each matrix of a synthetic model is written in: --type for all, refined per tensor
// by --tensor-type rules in the spirit of llama-quantize's (docs/gguf.md, "What make_model writes").
#pragma once

#include <string>
#include <vector>

#include "settings.h"

namespace lf::make_model {

// PATTERN matches a tensor when it equals the tensor's name without ".weight", or a tail of it
// that starts after a '.'; '*' stands for any run of characters. "ffn_down" matches
// blk.3.ffn_down.weight but not blk.3.ffn_down_exps.weight; "blk.0.*" every matrix of layer 0.
bool tensor_pattern_matches(const std::string& pattern, const std::string& tensor_name);

// The type of matrix `tensor_name`: the last matching rule's, else settings.type. uses[i] counts the
// tensors rule i decided, so a rule that matches nothing can be refused.
GgmlType matrix_type(const MakeSettings& settings, const std::string& tensor_name, std::vector<int>* uses);

}  // namespace lf::make_model
