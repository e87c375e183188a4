# Installs the build into a scratch prefix, then configures, builds and runs tests/package
# against it: the same steps a downstream project takes.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${PACKREC_BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed")
endif()
# The documentation's C++ blocks, built with the consumers.
execute_process(COMMAND "${PYTHON}" "${CONSUMER_SOURCE_DIR}/extract_snippets.py" "${SOURCE_ROOT}"
                        "${WORK_DIR}/snippets"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "extracting the documentation's C++ blocks failed: ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                        -DSNIPPET_DIR=${WORK_DIR}/snippets
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer against the installed package failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" "${WORK_DIR}/dataset" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed (${rc})")
endif()

# The shard-only consumer reads what the first one wrote, and links none of the other formats'
# libraries: neither on its link line (static archives) nor among its shared libraries (ldd).
execute_process(COMMAND "${WORK_DIR}/build/shard_consumer" "${WORK_DIR}/dataset"
                        "${WORK_DIR}/shard-only" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the shard-only consumer failed (${rc})")
endif()
file(READ "${WORK_DIR}/build/CMakeFiles/shard_consumer.dir/link.txt" link_line)
execute_process(COMMAND ldd "${WORK_DIR}/build/shard_consumer" OUTPUT_VARIABLE shared_libraries
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd failed on the shard-only consumer")
endif()
message(STATUS "shard-only consumer links: ${link_line}")
message(STATUS "shard-only consumer loads:\n${shared_libraries}")
foreach(forbidden hdf5 lmdb protobuf archive opencv cuda turbojpeg png packrec_dataset
                  packrec_decode packrec_pipeline packrec_ingest)
  string(TOLOWER "${link_line}\n${shared_libraries}" haystack)
  if(haystack MATCHES "${forbidden}")
    message(FATAL_ERROR "the shard-only consumer links ${forbidden}")
  endif()
endforeach()

# Each documentation block runs, in a directory holding the datasets they open (data.pkr and
# train-shards: 60 synthetic JPEGs in two classes).
set(run_dir "${WORK_DIR}/snippet-run")
file(MAKE_DIRECTORY "${run_dir}")
execute_process(COMMAND "${PACKREC_CLI}" synth "${run_dir}/tree" --classes 2 --per-class 30 --seed 3
                RESULT_VARIABLE rc OUTPUT_QUIET)
execute_process(COMMAND "${PACKREC_CLI}" convert -q "${run_dir}/tree" "${run_dir}/data.pkr"
                RESULT_VARIABLE rc2)
if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "making the documentation blocks' dataset failed")
endif()
file(CREATE_LINK "${run_dir}/data.pkr" "${run_dir}/train-shards" SYMBOLIC)
file(GLOB snippets "${WORK_DIR}/snippets/*.cc")
foreach(snippet IN LISTS snippets)
  get_filename_component(name "${snippet}" NAME_WE)
  execute_process(COMMAND "${WORK_DIR}/build/${name}" WORKING_DIRECTORY "${run_dir}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} (a C++ block of the documentation) failed (${rc}): ${out}${err}")
  endif()
  message(STATUS "${name}: ran. ${out}")
endforeach()
