// The keys every tower of a projector file ("mmproj") is read with: what makes the file a
// projector with that tower, and its size keys.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "gguf/key_reader.h"

namespace lf {

// general.architecture "clip", clip.has_<tower>_encoder true and the tower's projector type
// `type` (clip.<tower>.projector_type, else clip.projector_type); each refused by name.
Status check_projector_tower(const GgufFile& file, const std::string& tower, const std::string& type);

// keys' `key`: a required positive integer no larger than max, refused by its full name.
Status positive_key(const KeyReader& keys, std::string_view key, int max, int* out);

}  // namespace lf
