# Read by the llama-server build (benchlib/measure/servers/llama_server.py, `make llama-server`) through
# CMAKE_PROJECT_INCLUDE: unity builds for ggml's libraries only (llama's own src/ asks for one itself), the part
# that compiles cleanly that way (tools/llama_build.cmake does the same for the wheel); llama.cpp's common library,
# mtmd and the server are compiled file by file, as upstream builds them. Deferred to the end of llama.cpp's
# top-level CMakeLists, when those targets exist; ggml-cpu's AMX kernels stay out of the batches
# (tools/ggml_amx_unity.cmake says why).
if(PROJECT_NAME STREQUAL "llama.cpp" AND CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)
  include(${CMAKE_CURRENT_LIST_DIR}/ggml_amx_unity.cmake)
  function(frontier_bench_unity_ggml)
    foreach(target ggml-base ggml-cpu ggml)
      if(TARGET ${target})
        set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
      endif()
    endforeach()
    frontier_bench_amx_out_of_unity()
  endfunction()
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL frontier_bench_unity_ggml)
endif()
