# Catch2 (v2, Debian's single header) tests: the same sources natively and under Node.
file(GLOB LF_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cpp/test_*.cpp)

# The Catch2 main takes ~17 s to compile under Emscripten: build it once, on its own.
add_library(lf_catch_main OBJECT ${CMAKE_SOURCE_DIR}/tests/cpp/catch_main.cpp)
# make_model's code without its main, so a test reads its files back through the engine.
file(GLOB LF_MAKE_MODEL_CODE CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/tools/make_model/*.cpp)
list(FILTER LF_MAKE_MODEL_CODE EXCLUDE REGEX "/main\\.cpp$")
add_executable(lf_tests ${LF_TEST_SOURCES} ${LF_MAKE_MODEL_CODE} $<TARGET_OBJECTS:lf_catch_main>)
target_link_libraries(lf_tests PRIVATE layerfold)
target_compile_definitions(lf_tests PRIVATE LF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

if(LF_TARGET STREQUAL "emscripten")
  # Never -I/usr/include under Emscripten (glibc headers break the build): a private dir that
  # holds only a link to catch2 (made by scripts/setup).
  set(LF_CATCH_INCLUDE ${CMAKE_BINARY_DIR}/catch2-include)
  file(MAKE_DIRECTORY ${LF_CATCH_INCLUDE})
  file(CREATE_LINK /usr/include/catch2 ${LF_CATCH_INCLUDE}/catch2 SYMBOLIC)
  foreach(t lf_catch_main lf_tests)
    target_include_directories(${t} PRIVATE ${LF_CATCH_INCLUDE})
    target_compile_options(${t} PRIVATE -fexceptions)
  endforeach()
  target_include_directories(lf_catch_main PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_link_options(lf_tests PRIVATE -fexceptions -sEXIT_RUNTIME=1 -sNODERAWFS=1
    -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sPTHREAD_POOL_SIZE=8 -sPROXY_TO_PTHREAD=1
    -sTOTAL_STACK=1MB --pre-js ${CMAKE_SOURCE_DIR}/tests/node-wasm-prejs.js)
endif()

if(LF_FUZZ)
  add_executable(fuzz_gguf ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_gguf.cpp)
  target_link_libraries(fuzz_gguf PRIVATE layerfold)
  target_compile_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
