# The modules a host loads. The C ABI sources are linked directly (not through the static
# library) so their exported symbols are always kept.
file(GLOB LF_CAPI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/capi/*.cpp)

# The relaxed-SIMD kernels, for a second variant of each WASM module (engines that validate
# relaxed SIMD load it; the others, such as Node 20, refuse it whole, so the host picks the
# variant by js-glue/src/wasm/features.js). Only the Q4_0 / Q8_0 GEMM's choice
# (kernels/gemm_q4_0_q8_0.cpp), its strip kernel (kernels/gemm_q4_0_strips_relaxed.cpp, empty in
# the plain build) and the attention kernels (whose value step takes the fused madd) differ:
# their relaxed build and the kernels assembled from .wat come before liblayerfold.a, whose plain
# members of the same names are then never pulled in; its tiled GEMM and GEMV members are
# shared. docs/kernels.md says why .wat.
if(LF_TARGET STREQUAL "emscripten" OR LF_TARGET STREQUAL "wasi")
  find_program(LF_WAT2WASM wat2wasm REQUIRED)
  find_program(LF_NODE node REQUIRED)
  # The hand-written kernels with the two-strip ones for 1..8 tokens written in at their marker:
  # those differ only in their token count, so one template makes them.
  set(LF_RELAXED_WAT_SOURCE ${CMAKE_SOURCE_DIR}/src/kernels/relaxed_simd.wat)
  set(LF_RELAXED_WAT ${CMAKE_BINARY_DIR}/relaxed_simd.wat)
  set(LF_GEN_STRIPS_RELAXED ${CMAKE_SOURCE_DIR}/wasm/gen_q4_0_strips_relaxed.mjs)
  add_custom_command(OUTPUT ${LF_RELAXED_WAT}
    COMMAND ${LF_NODE} ${LF_GEN_STRIPS_RELAXED} ${LF_RELAXED_WAT_SOURCE} ${LF_RELAXED_WAT}
    DEPENDS ${LF_RELAXED_WAT_SOURCE} ${LF_GEN_STRIPS_RELAXED}
    COMMENT "kernels/relaxed_simd.wat and its two-strip kernels")
  set(LF_RELAXED_WAT_OBJECT ${CMAKE_BINARY_DIR}/relaxed_simd.o)
  # binaryen 108 knows the relaxed dot-add and madd by other numbers: the script renumbers them
  # in the object, for the link, and in the linked modules, for the engines. The object's
  # memory import is shared; wasm-ld links it into the wasm32-wasi reactor's unshared memory too.
  set(LF_PATCH_RELAXED_OPS ${LF_NODE} ${CMAKE_SOURCE_DIR}/wasm/patch_relaxed_ops.mjs)
  add_custom_command(OUTPUT ${LF_RELAXED_WAT_OBJECT}
    COMMAND ${LF_WAT2WASM} --enable-relaxed-simd --enable-threads --relocatable ${LF_RELAXED_WAT}
            -o ${LF_RELAXED_WAT_OBJECT}
    COMMAND ${LF_PATCH_RELAXED_OPS} --object ${LF_RELAXED_WAT_OBJECT} ${LF_RELAXED_WAT}
    DEPENDS ${LF_RELAXED_WAT} ${CMAKE_SOURCE_DIR}/wasm/patch_relaxed_ops.mjs
    COMMENT "wat2wasm kernels/relaxed_simd.wat")
  add_library(layerfold_relaxed_kernels OBJECT ${CMAKE_SOURCE_DIR}/src/kernels/gemm_q4_0_q8_0.cpp
              ${CMAKE_SOURCE_DIR}/src/kernels/gemm_q4_0_strips_relaxed.cpp ${CMAKE_SOURCE_DIR}/src/kernels/attention.cpp
              ${CMAKE_SOURCE_DIR}/src/kernels/attention_truncated.cpp ${CMAKE_SOURCE_DIR}/src/kernels/attention_quantized.cpp
              ${CMAKE_SOURCE_DIR}/src/kernels/attention_f32_tiles.cpp ${CMAKE_SOURCE_DIR}/src/kernels/gemm_lanes16.cpp)
  target_compile_definitions(layerfold_relaxed_kernels PRIVATE LF_RELAXED_SIMD=1)
  target_include_directories(layerfold_relaxed_kernels PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
endif()

if(LF_TARGET STREQUAL "emscripten")
  # Threaded module for Node: pthreads on a SharedArrayBuffer, SIMD128, a MODULARIZE factory.
  # The host passes wasmBinary (the 3.1.6 glue would fetch() a file path under Node 18+) and
  # never has its process exit taken over by the runtime.
  add_executable(layerfold_mt ${LF_CAPI_SOURCES})
  target_link_libraries(layerfold_mt PRIVATE layerfold)
  set_target_properties(layerfold_mt PROPERTIES SUFFIX ".js")
  set(LF_MT_LINK_OPTIONS
    -sMODULARIZE=1 -sEXPORT_NAME=createLayerfold -sENVIRONMENT=node,worker
    -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=64MB -sMAXIMUM_MEMORY=4GB
    -sPTHREAD_POOL_SIZE=Module.lfThreads -sTOTAL_STACK=1MB
    -sEXIT_RUNTIME=0 -sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0
    -sEXPORTED_RUNTIME_METHODS=UTF8ToString)
  target_link_options(layerfold_mt PRIVATE ${LF_MT_LINK_OPTIONS})

  # The same module with the relaxed-SIMD Q4_0 kernel.
  add_executable(layerfold_mt_relaxed ${LF_CAPI_SOURCES} $<TARGET_OBJECTS:layerfold_relaxed_kernels>
                 ${LF_RELAXED_WAT_OBJECT})
  target_link_libraries(layerfold_mt_relaxed PRIVATE layerfold)
  set_target_properties(layerfold_mt_relaxed PROPERTIES SUFFIX ".js")
  target_link_options(layerfold_mt_relaxed PRIVATE ${LF_MT_LINK_OPTIONS})
  add_custom_command(TARGET layerfold_mt_relaxed POST_BUILD
    COMMAND ${LF_PATCH_RELAXED_OPS} --module $<TARGET_FILE_DIR:layerfold_mt_relaxed>/layerfold_mt_relaxed.wasm
            ${LF_RELAXED_WAT}
    COMMENT "relaxed opcodes in layerfold_mt_relaxed.wasm")

  # The synthetic-model generator as a module, so the npm package makes its built-in default
  # model itself: the native tool's command line through callMain, real files through NODERAWFS.
  # EXIT_RUNTIME stays off so that main's return never ends the host's process. The writer fills
  # tensors on one std::thread that main joins: its worker must exist before main blocks.
  file(GLOB LF_MAKE_MODEL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/tools/make_model/*.cpp)
  add_executable(make_model ${LF_MAKE_MODEL_SOURCES})
  target_link_libraries(make_model PRIVATE layerfold)
  set_target_properties(make_model PROPERTIES SUFFIX ".js")
  target_link_options(make_model PRIVATE
    -sMODULARIZE=1 -sEXPORT_NAME=createMakeModel -sENVIRONMENT=node -sNODERAWFS=1 -sINVOKE_RUN=0 -sPTHREAD_POOL_SIZE=1
    -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=1MB
    -sEXIT_RUNTIME=0 -sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0 -sEXPORTED_RUNTIME_METHODS=callMain)
elseif(LF_TARGET STREQUAL "wasi")
  # Single-thread reactor for edge workers: no JS glue, instantiated by the worker itself, in
  # two variants like the threaded module: layerfold.wasm (SIMD128) and layerfold_relaxed.wasm
  # (the relaxed-SIMD Q4_0 kernel), which the worker picks where its engine validates it.
  set(LF_WASI_LINK_OPTIONS -mexec-model=reactor
    -Wl,--max-memory=4294967296 -Wl,--export=malloc -Wl,--export=free)
  set(LF_WASM_OPT_FEATURES --enable-simd --enable-bulk-memory --enable-sign-ext
    --enable-nontrapping-float-to-int --enable-mutable-globals)
  find_program(LF_WASM_OPT wasm-opt REQUIRED)
  add_executable(layerfold_wasi ${LF_CAPI_SOURCES})
  target_link_libraries(layerfold_wasi PRIVATE layerfold)
  set_target_properties(layerfold_wasi PROPERTIES OUTPUT_NAME "layerfold" SUFFIX ".wasm")
  target_link_options(layerfold_wasi PRIVATE ${LF_WASI_LINK_OPTIONS})
  add_custom_command(TARGET layerfold_wasi POST_BUILD
    COMMAND ${LF_WASM_OPT} -O3 ${LF_WASM_OPT_FEATURES}
            $<TARGET_FILE:layerfold_wasi> -o $<TARGET_FILE:layerfold_wasi>
    COMMENT "wasm-opt layerfold.wasm")

  # wasm-opt reads the dot-add by binaryen's number (the object's), so the module is renumbered
  # for the engines after it, as the threaded relaxed module is after emcc's wasm-opt.
  add_executable(layerfold_wasi_relaxed ${LF_CAPI_SOURCES} $<TARGET_OBJECTS:layerfold_relaxed_kernels>
                 ${LF_RELAXED_WAT_OBJECT})
  target_link_libraries(layerfold_wasi_relaxed PRIVATE layerfold)
  set_target_properties(layerfold_wasi_relaxed PROPERTIES OUTPUT_NAME "layerfold_relaxed" SUFFIX ".wasm")
  target_link_options(layerfold_wasi_relaxed PRIVATE ${LF_WASI_LINK_OPTIONS})
  add_custom_command(TARGET layerfold_wasi_relaxed POST_BUILD
    COMMAND ${LF_WASM_OPT} -O3 ${LF_WASM_OPT_FEATURES} --enable-relaxed-simd
            $<TARGET_FILE:layerfold_wasi_relaxed> -o $<TARGET_FILE:layerfold_wasi_relaxed>
    COMMAND ${LF_PATCH_RELAXED_OPS} --module $<TARGET_FILE:layerfold_wasi_relaxed> ${LF_RELAXED_WAT}
    COMMENT "wasm-opt layerfold_relaxed.wasm, relaxed opcodes in it")
endif()
