# llvm.cmake — optional LLVM 19 for the CPU backend's code generator (jit/cpu/llvm/). Included
# OPTIONALly by the root CMakeLists. Finds LLVM 19 through llvm-config-19 (or find_package(LLVM 19
# CONFIG)), sets TJ_LLVM_INCLUDE and TJ_LLVM_LIBS (the root gives them to tj_cpu_llvm) and
# appends the shared libLLVM to TJ_EXTRA_LIBS. Without LLVM, libtracejit links jit/cpu/none/: it
# runs saved and cached native code and compiles none.
option(TJ_WITH_LLVM "Build the LLVM CPU JIT backend when LLVM 19 is found" ON)
if(NOT TJ_WITH_LLVM)
  return()
endif()

set(TJ_LLVM_INCLUDE "")
set(TJ_LLVM_LIBS "")
# A cross build names the target's LLVM directly (its llvm-config cannot run here):
# -DTJ_LLVM_INCLUDE_DIR=<headers with llvm-c/ and llvm/Config/> -DTJ_LLVM_LIBRARY=<libLLVM.so>
set(TJ_LLVM_INCLUDE_DIR "" CACHE PATH "LLVM 19 headers (cross builds; default: llvm-config-19)")
set(TJ_LLVM_LIBRARY "" CACHE FILEPATH "the shared libLLVM 19 (cross builds)")
if(TJ_LLVM_INCLUDE_DIR AND TJ_LLVM_LIBRARY)
  set(TJ_LLVM_INCLUDE ${TJ_LLVM_INCLUDE_DIR})
  set(TJ_LLVM_LIBS ${TJ_LLVM_LIBRARY})
  set(TJ_PC_LLVM "${TJ_LLVM_LIBRARY} -lstdc++")
endif()
find_program(TJ_LLVM_CONFIG NAMES llvm-config-19 HINTS /usr/lib/llvm-19/bin)
if(TJ_LLVM_CONFIG AND NOT TJ_LLVM_LIBS)
  execute_process(COMMAND ${TJ_LLVM_CONFIG} --version OUTPUT_VARIABLE _tj_llvm_ver
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc1)
  execute_process(COMMAND ${TJ_LLVM_CONFIG} --includedir OUTPUT_VARIABLE _tj_llvm_inc
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc2)
  execute_process(COMMAND ${TJ_LLVM_CONFIG} --libdir OUTPUT_VARIABLE _tj_llvm_libdir
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc3)
  if(_rc1 EQUAL 0 AND _rc2 EQUAL 0 AND _rc3 EQUAL 0 AND _tj_llvm_ver MATCHES "^19\\.")
    find_library(TJ_LLVM_SHARED NAMES LLVM-19 LLVM PATHS ${_tj_llvm_libdir} NO_DEFAULT_PATH)
    if(TJ_LLVM_SHARED)
      set(TJ_LLVM_INCLUDE ${_tj_llvm_inc})
      set(TJ_LLVM_LIBS ${TJ_LLVM_SHARED})
      # for tracejit.pc's Libs.private: a static libtracejit needs libLLVM and the C++ runtime
      get_filename_component(_tj_llvm_name ${TJ_LLVM_SHARED} NAME_WE)
      string(REGEX REPLACE "^lib" "" _tj_llvm_name "${_tj_llvm_name}")
      set(TJ_PC_LLVM "-L${_tj_llvm_libdir} -l${_tj_llvm_name} -lstdc++")
    endif()
  endif()
endif()
if(NOT TJ_LLVM_LIBS)
  find_package(LLVM 19 CONFIG QUIET)
  if(LLVM_FOUND)
    set(TJ_LLVM_INCLUDE ${LLVM_INCLUDE_DIRS})
    if(TARGET LLVM)
      set(TJ_LLVM_LIBS LLVM)
    else()
      llvm_map_components_to_libnames(TJ_LLVM_LIBS orcjit native passes)
    endif()
  endif()
endif()

if(TJ_LLVM_LIBS)
  message(STATUS "tracejit: LLVM CPU backend enabled (${TJ_LLVM_LIBS})")
  list(APPEND TJ_EXTRA_LIBS ${TJ_LLVM_LIBS})
else()
  message(STATUS "tracejit: LLVM 19 not found; CPU JIT backend disabled")
endif()
