# Installs the build into a scratch prefix, then configures, builds and runs tests/package
# against it: the same steps a downstream project takes.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${PACKREC_BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
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
