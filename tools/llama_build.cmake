# Read by llama-cpp-python's CMake run when the Makefile installs the embedded extra (CMAKE_PROJECT_INCLUDE:
# included after every project() call). It trims the first install's compile, which is most of it:
# - llama-cpp-python forces LLAMA_BUILD_COMMON ON, yet ships no file of llama.cpp's common library (the helpers
#   of llama.cpp's own CLI tools and server; only libllama and libggml* land in llama_cpp/lib): inside
#   llama.cpp's project it is turned off again, so it is neither compiled nor installed.
# - The Makefile also asks for unity builds (CMAKE_UNITY_BUILD), which llama and ggml compile cleanly
#   (common does not, another reason to leave it out) except ggml-cpu's AMX kernels, taken out of the batches
#   (tools/ggml_amx_unity.cmake) at the end of llama.cpp's CMakeLists, when the ggml-cpu target exists.
# Measured on 2 cores (cmake + ninja, same flags otherwise): 4 min 56 s as llama-cpp-python builds it,
# 2 min 9 s with both. If this build fails the Makefile retries the plain one.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
  include(${CMAKE_CURRENT_LIST_DIR}/ggml_amx_unity.cmake)
  cmake_language(DEFER DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} CALL frontier_bench_amx_out_of_unity)
endif()
