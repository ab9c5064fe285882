// Compiled once, on its own: the Catch2 runner is slow to build under Emscripten.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
