# The modules a host loads. The C ABI sources are linked directly (not through the static
# library) so their exported symbols are always kept.
file(GLOB LF_CAPI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/capi/*.cpp)

if(LF_TARGET STREQUAL "emscripten")
  # Threaded module for Node: pthreads on a SharedArrayBuffer, SIMD128, a MODULARIZE factory.
  # The host passes wasmBinary (the 3.1.6 glue would fetch() a file path under Node 18+) and
  # never has its process exit taken over by the runtime.
  add_executable(layerfold_mt ${LF_CAPI_SOURCES})
  target_link_libraries(layerfold_mt PRIVATE layerfold)
  target_include_directories(layerfold_mt PRIVATE ${CMAKE_SOURCE_DIR}/src)
  set_target_properties(layerfold_mt PROPERTIES SUFFIX ".js")
  target_link_options(layerfold_mt PRIVATE
    -sMODULARIZE=1 -sEXPORT_NAME=createLayerfold -sENVIRONMENT=node,worker
    -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=64MB -sMAXIMUM_MEMORY=4GB
    -sPTHREAD_POOL_SIZE=Module.lfThreads -sTOTAL_STACK=1MB
    -sEXIT_RUNTIME=0 -sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0
    -sEXPORTED_RUNTIME_METHODS=UTF8ToString)
elseif(LF_TARGET STREQUAL "wasi")
  # Single-thread reactor for edge workers: no JS glue, instantiated by the worker itself.
  add_executable(layerfold_wasi ${LF_CAPI_SOURCES})
  target_link_libraries(layerfold_wasi PRIVATE layerfold)
  target_include_directories(layerfold_wasi PRIVATE ${CMAKE_SOURCE_DIR}/src)
  set_target_properties(layerfold_wasi PROPERTIES OUTPUT_NAME "layerfold" SUFFIX ".wasm")
  target_link_options(layerfold_wasi PRIVATE -mexec-model=reactor
    -Wl,--max-memory=4294967296 -Wl,--export=malloc -Wl,--export=free)
  find_program(LF_WASM_OPT wasm-opt REQUIRED)
  add_custom_command(TARGET layerfold_wasi POST_BUILD
    COMMAND ${LF_WASM_OPT} -O3 --enable-simd --enable-bulk-memory --enable-sign-ext
            --enable-nontrapping-float-to-int --enable-mutable-globals
            $<TARGET_FILE:layerfold_wasi> -o $<TARGET_FILE:layerfold_wasi>
    COMMENT "wasm-opt layerfold.wasm")
endif()
