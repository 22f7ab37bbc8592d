# Included by tools/llama_build.cmake (the wheel) and tools/llama_server_build.cmake (llama-server), which ask for
# unity builds of ggml. ggml-cpu's AMX kernels (ggml-cpu/amx/*.cpp) include ggml-common.h in its C++ declaration
# mode; inside a unity batch an earlier file has already included it in another mode, so on a CPU with AMX (where
# GGML_NATIVE compiles those kernels in) the batch fails: "'const struct block_q4_1' has no member named 'd'".
# Elsewhere the files compile to nothing, which is why a CPU without AMX never shows it. They are taken out of the
# batches and compiled on their own; the rest of ggml-cpu stays unity-built.
# Both builds now leave the AMX kernels out (-mno-amx-*: benchlib/measure/servers/llama_server.py, NO_AMX), so this
# matters again only for a build that lets them in (CFLAGS/CXXFLAGS without those flags).
function(frontier_bench_amx_out_of_unity)
  foreach(target ggml-cpu)
    if(NOT TARGET ${target})
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(amx)
    foreach(source IN LISTS sources)
      if(source MATCHES "(^|/)amx/[^/]*\\.(c|cpp)$")
        if(NOT IS_ABSOLUTE "${source}")
          set(source "${source_dir}/${source}")
        endif()
        list(APPEND amx "${source}")
      endif()
    endforeach()
    if(amx)
      set_source_files_properties(${amx} TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      message(STATUS "frontier-bench: ${target}: AMX sources compiled outside the unity batches: ${amx}")
    endif()
  endforeach()
endfunction()
