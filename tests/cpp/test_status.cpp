#include <catch2/catch.hpp>

#include "gguf/ggml_type.h"
#include "base/status.h"

TEST_CASE("status carries code and message", "[status]") {
  lf::Status ok;
  CHECK(ok.ok());
  lf::Status bad(lf::Code::malformed, "bad magic");
  CHECK_FALSE(bad.ok());
  CHECK(bad.code() == lf::Code::malformed);
  CHECK(bad.message() == "bad magic");
  CHECK(std::string(lf::code_name(lf::Code::need_more_data)) == "need_more_data");
}

TEST_CASE("type traits match the block table of docs/gguf.md", "[status]") {
  lf::TypeTraits t{};
  REQUIRE(lf::type_traits(2, &t));
  CHECK(t.block_elems == 32);
  CHECK(t.block_bytes == 18);
  REQUIRE(lf::type_traits(14, &t));
  CHECK(t.block_bytes == 210);
  CHECK(lf::row_bytes(t, 512) == 420);
  CHECK_FALSE(lf::type_traits(4, &t));   // retired
  CHECK_FALSE(lf::type_traits(39, &t));  // MXFP4: not ours
}
