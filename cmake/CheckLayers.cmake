# cmake -DCORE_DIR=<core folder> -P CheckLayers.cmake: fails when an include points upward.
# The tests run it on the real tree and on a copy with an upward include (which must fail).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/CoreLayers.cmake)
ml_check_layers(${CORE_DIR})
message(STATUS "core/ follows the layer arrows: ${CORE_DIR}")
