# packrec_add_layer(TARGET EXPORT_NAME SOURCES...): one of packrec's static libraries (a layer of
# lib/ or a format of formats/), installed and exported as packrec::EXPORT_NAME. The public headers
# are its interface; lib/ and formats/ are private include roots (tests/layout/layering_check.py
# holds the includes to the layer rules, and each target links only the layers below it, so a
# call upwards fails to link).
function(packrec_add_layer target export_name)
  add_library(${target} STATIC ${ARGN})
  add_library(packrec::${export_name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name}
                                             POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/lib ${PROJECT_SOURCE_DIR}/formats)
  packrec_set_warnings(${target})
  set_property(GLOBAL APPEND PROPERTY PACKREC_LIBRARY_TARGETS ${target})
endfunction()
